"""Kept for suite environments written before the stage packages: `from callgate.environment
import ToolError` still works. New code writes `from callgate import ToolError`."""

from callgate.suites.environment import ToolError

__all__ = ["ToolError"]
