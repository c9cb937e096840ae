"""The command line: a thin typer layer over the Python API. This module holds the app and the
console script (`entry`); the commands are in a module by concern (`importing`, `scoring`,
`gating`, `serving`, `live`, `judge`).

Exit codes: 0 success (or gate pass), 1 regression, 2 usage or input error, 3 inconclusive.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer
from rich.console import Console

from callgate.cli.ci import ci_app
from callgate.cli.common import EXIT_INPUT, ClickException, _fail, _usage_error
from callgate.cli.gating import gate, history, report
from callgate.cli.importing import import_app, suite_app
from callgate.cli.judge import judge_app
from callgate.cli.live import run_command
from callgate.cli.scoring import demo, init, merge, score
from callgate.cli.serving import serve
from callgate.cli.suite_tools import tools_command
from callgate.errors import CallgateError
from callgate.version import __version__

app = typer.Typer(
    name="callgate",
    help="Evaluate how well an LLM calls tools, and gate releases on it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(suite_app, name="suite")
suite_app.command("tools")(tools_command)
app.add_typer(judge_app, name="judge")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"callgate {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """callgate: right tool %, right arguments % and calls per task, gated per release."""


app.add_typer(import_app, name="import")
app.add_typer(ci_app, name="ci")
app.command()(score)
app.command()(init)
app.command()(demo)
app.command()(gate)
app.command()(merge)
app.command()(history)
app.command("run")(run_command)
app.command()(serve)
app.command()(report)

EXIT_INTERNAL = 4


def _refuse_arguments_not_utf8(args: list[str]) -> None:
    """A command line byte that is not UTF-8 (Python keeps it as half a surrogate pair) would
    be stored or printed as no text can be: refused, naming the option it belongs to."""
    for index, arg in enumerate(args):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError as exc:
            code = ord(arg[exc.start])
            byte = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "a surrogate"
            if arg.startswith("--") and "=" in arg:
                where = arg.split("=", 1)[0]
            elif index and args[index - 1].startswith("-"):
                where = args[index - 1]
            else:
                where = f"argument {index + 1}"
            where = where.encode("utf-8", "backslashreplace").decode("utf-8")
            raise _fail(f"{where}: not UTF-8 text ({byte} cannot be read); give it in UTF-8"
                        ) from None


def entry() -> None:
    """The console script. CI reads exit 1 as "regression", so no failure that a command did
    not catch may end with it: unreadable input is 2, an internal error 4, Ctrl-C 130."""
    try:
        _refuse_arguments_not_utf8(sys.argv[1:])
        code = app(standalone_mode=False)
    except typer.Exit as done:
        code = done.exit_code
    except typer.Abort:
        Console(stderr=True).print("interrupted", highlight=False)
        code = 130
    except ClickException as exc:  # usage errors (exit 2), one line each
        code = _usage_error(exc)
    except BrokenPipeError:  # e.g. `callgate gate ... | head`: the reader went away
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141
    except CallgateError as exc:  # e.g. a store that cannot be used, where no command caught it
        Console(stderr=True).print(f"error: {exc}", highlight=False, markup=False,
                                   soft_wrap=True)
        code = EXIT_INPUT
    except UnicodeDecodeError as exc:
        Console(stderr=True).print(f"error: a file is not UTF-8 text ({exc.reason} at byte "
                                   f"{exc.start})", highlight=False, markup=False, soft_wrap=True)
        code = EXIT_INPUT
    except OSError as exc:
        Console(stderr=True).print(f"error: {exc.filename or ''}: {exc.strerror or exc}",
                                   highlight=False, markup=False, soft_wrap=True)
        code = EXIT_INPUT
    except Exception as exc:
        if os.environ.get("CALLGATE_DEBUG"):
            raise
        Console(stderr=True).print(
            f"internal error: {exc!r} (set CALLGATE_DEBUG=1 for the traceback; please report it)",
            highlight=False, markup=False, soft_wrap=True)
        code = EXIT_INTERNAL
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    entry()
