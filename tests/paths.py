"""Where the tests find what they read: the repository, the tests' own folder (helpers run as
scripts: mcp_server.py, target_agents.py), the committed fixtures and the bundled examples.
Test files may sit in any folder under tests/, so they name these instead of climbing from
their own __file__."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
EXAMPLES = ROOT / "src" / "callgate" / "examples"
