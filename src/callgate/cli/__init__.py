"""The `callgate` command: `main` holds the typer app and most commands; `live` is `callgate
run`, `judge` the `callgate judge` group, `common` what they share (exit codes, options);
`demo` and `scaffold` serve the `demo` and `init` commands. Each command imports the stages it
uses when it runs, so that `callgate --help` stays fast."""

from callgate.cli.main import app, entry

__all__ = ["app", "entry"]
