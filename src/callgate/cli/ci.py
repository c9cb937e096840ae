"""`callgate ci comment`: what the GitHub Action does after the gate (step outputs, job
summary, one pull-request comment), as a command so that it runs, and is tested, off GitHub."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from callgate.cli.common import _fail
from callgate.errors import CallgateError

ci_app = typer.Typer(help="CI glue: what the GitHub Action runs after the gate.",
                     no_args_is_help=True)


@ci_app.command("comment")
def comment_command(
    summary: Annotated[Path, typer.Option(
        "--summary", help="The gate's Markdown summary (callgate gate --markdown).")],
    exit_code: Annotated[int, typer.Option(
        "--exit-code", help="The gate's exit code: it names the outcome, and is passed on "
                            "by the action, never changed by this command.")],
    scores: Annotated[Path | None, typer.Option(
        "--scores", help="The release's scores file (callgate gate --scores-out): the "
                         "three figures become step outputs.")] = None,
    key: Annotated[str, typer.Option(
        "--key", help="Tells this gate's comment apart from another gate's on the same "
                      "pull request (e.g. the agent's name).")] = "",
    comment: Annotated[bool, typer.Option(
        "--comment/--no-comment", help="Create or update the pull-request comment "
                                       "(GITHUB_TOKEN, GITHUB_EVENT_PATH).")] = True,
) -> None:
    """Write the step outputs (outcome, exit-code, right-tool, right-arguments,
    calls-per-task) to GITHUB_OUTPUT, the summary to GITHUB_STEP_SUMMARY, and create or update
    one comment on the pull request. Exits 0 when the comment cannot be written (a fork's
    read-only token): the gate's exit code is the verdict."""
    from callgate.cli import github

    try:
        github.publish(summary, scores, exit_code, key, comment)
    except CallgateError as exc:  # an unreadable scores or event file
        raise _fail(str(exc)) from None
    except (OSError, UnicodeDecodeError) as exc:  # the summary, GITHUB_OUTPUT, the summary file
        raise _fail(f"{getattr(exc, 'filename', None) or summary}: cannot be read or written "
                    f"({getattr(exc, 'strerror', None) or exc})") from None
