"""The `callgate` command: `main` holds the typer app and the console script; the commands are
by concern: `importing` (`suite check`, `import`), `scoring` (`score`, `merge`, `init`, `demo`),
`gating` (`gate`, `history`, `report`), `serving` (`serve`), `live` (`run`) and `judge` (the
`callgate judge` group); `common` is what they share (exit codes, options); `demo` and
`scaffold` serve the `demo` and `init` commands. Each command imports the stages it
uses when it runs, so that `callgate --help` stays fast."""

from callgate.cli.main import app, entry

__all__ = ["app", "entry"]
