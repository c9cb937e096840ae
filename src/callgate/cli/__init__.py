"""The `callgate` command: `main` holds the typer app; `demo` and `scaffold` serve the `demo`
and `init` commands."""

from callgate.cli.main import app, entry

__all__ = ["app", "entry"]
