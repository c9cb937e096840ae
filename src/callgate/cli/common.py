"""What the commands share: exit codes, option types, and failing with one clean line."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich.console import Console
from rich.markup import escape

from callgate.scoring.exclusion import EXCLUDED_IN_WORDS

try:  # typer 0.29 vendors click; older releases use click itself
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover
    from click import exceptions as click_errors  # type: ignore[no-redef]
ClickException = click_errors.ClickException  # what entry() catches: click's usage errors

if TYPE_CHECKING:  # the stages are imported inside the commands, so that --help stays fast
    from callgate.judging.step import JudgeStep
    from callgate.models.pacing import PacingFigures
    from callgate.scoring.behaviour import BehaviourJudges
    from callgate.scoring.result import GateRecord
    from callgate.store.db import Store


EXIT_INPUT = 2


def command_name(cwd: Path | None = None) -> str:
    """How to run callgate from `cwd` (default: here), for the commands a hint names:
    `uv run callgate` inside the uv project whose .venv runs this callgate (a source checkout,
    or a project that depends on callgate), else `callgate`, as after `uv tool install .` or
    `pip install .` into a virtual environment of one's own."""
    venv = Path(sys.prefix)
    project = venv.parent
    here = (cwd or Path.cwd()).resolve()
    if venv.name == ".venv" and (project / "pyproject.toml").is_file() and (
            here == project.resolve() or project.resolve() in here.parents):
        return "uv run callgate"
    return "callgate"

ShardOption = Annotated[str | None, typer.Option(
    "--shard", metavar="K/N",
    help="Only the cases of shard K of N (by a hash of the case id; repeats of a case stay "
         "together); the run is stored as that shard of its release. Combine the shard stores "
         "with `callgate merge`.")]

JudgeOption = Annotated[Path | None, typer.Option(
    "--judge", help="Judge spec (judges/NAME.toml), or the name of a bundled judge (tool_choice), "
                    "for cases whose expectation is `judge`.")]
JudgeApiBaseOption = Annotated[str | None, typer.Option(
    "--judge-api-base", help="Reach the judge's model at this endpoint instead (e.g. a local "
                             "vLLM or Ollama server); not part of the fingerprint.")]
JudgeKeyEnvOption = Annotated[str | None, typer.Option(
    "--judge-api-key-env", help="NAME of the variable holding the key for --judge-api-base "
                                "(default: send no key).")]
ApiBaseOption = Annotated[str | None, typer.Option(
    "--api-base", help="Reach the judge's model at this endpoint instead (e.g. a local vLLM or "
                       "Ollama server); not part of the fingerprint.")]
ApiKeyEnvOption = Annotated[str | None, typer.Option(
    "--api-key-env", help="NAME of the variable holding the key for --api-base (default: send "
                          "no key; the spec's key is never sent to another endpoint).")]
UncalibratedOption = Annotated[bool, typer.Option(
    "--uncalibrated", help="Use a judge that has no certificate; the scores are marked so and "
                           "the gate is inconclusive.")]
# The judges beyond the call (docs/guides/judge.md, "Judges beyond the call"): `score` and `run`.
AnswerKindJudgeOption = Annotated[Path | None, typer.Option(
    "--answer-kind-judge", help="The answer_kind judge (judges/answer_kind.toml, or "
    "answer_kind) for the text answers of no-call cases that name a kind.")]
ClaimsJudgeOption = Annotated[Path | None, typer.Option(
    "--claims-judge", help="The claim_support judge (judges/claim_support.toml, or "
    "claim_support) for the cases with policies.judge_claims.")]
UserJudgeOption = Annotated[Path | None, typer.Option(
    "--user-judge", help="The user_fidelity judge (judges/user_fidelity.toml, or "
    "user_fidelity), with --user: a failed scenario conversation it finds the simulated user "
    "unfaithful in is the simulator's failure (docs/simulated-user.md).")]

AgentOption = Annotated[str | None, typer.Option(
    "--agent", help="The agent a release belongs to: a stable name kept when the model changes "
                    "(default: the candidate's name in the config, else the model id).")]
# `gate`, `report` and `history` name a release by its agent; --model names it as before.
NamedAgentOption = Annotated[str | None, typer.Option(
    "--agent", help="The agent whose releases are meant (default: --model).")]
NamedModelOption = Annotated[str | None, typer.Option(
    "--model", "-m", help="The agent's name or, without --agent, the model id the release "
                          "was filed under.")]

DbOption = Annotated[
    Path,
    typer.Option(
        "--db", envvar="CALLGATE_DB", help="SQLite file to store everything in.", show_default=True
    ),
]


def not_blank(value: str) -> str:
    """A model name or release label is what a run is filed under: an empty one is a typo
    (an unset variable in CI), never a label."""
    if not value.strip():
        raise typer.BadParameter("must not be empty")
    return value


# The largest integer SQLite stores: a run id or a seed past it can only be a typo.
SQLITE_INT_MAX = 2**63 - 1


def _fail(message: str, code: int = EXIT_INPUT) -> typer.Exit:
    Console(stderr=True).print(f"[red]error:[/red] {escape(message)}", highlight=False,
                               soft_wrap=True)
    return typer.Exit(code)


def _agent_named(agent: str | None, model: str | None) -> str:
    """The agent a command names: --agent, else --model (a release's agent defaults to it)."""
    name = agent if agent is not None else model
    if not name or not name.strip():
        raise _fail("name the agent: --agent NAME (or --model, the name or model id the "
                    "release was filed under)")
    return name


def _usage_error(exc: click_errors.ClickException) -> int:
    """Show what click found wrong in the command line (a bad, missing or unknown option,
    argument or command) as one line, as callgate shows its own errors, without the usage
    and help lines; its exit code. The help a bare group prints instead is shown as it was."""
    if isinstance(exc, getattr(click_errors, "NoArgsIsHelpError", ())):
        exc.show()
    else:
        _fail(_usage_message(exc), exc.exit_code)
    return exc.exit_code


def _usage_message(exc: click_errors.ClickException) -> str:
    """Click's words on one line, lower case first and without a full stop as callgate's own
    messages are; "Invalid value for '--max-drop' / '-d': ..." becomes `--max-drop -1: ...`."""
    message = exc.format_message()
    prefix, problem = "Invalid value for ", f": {exc.message}"
    if message.startswith(prefix) and message.endswith(problem):
        option = message[len(prefix):-len(problem)].split(" / ")[0].replace("'", "")
        given = _refused_value(exc)
        message = f"{option}{'' if given is None else f' {given}'}: {_lower_first(exc.message)}"
    return _lower_first(" ".join(message.split()).removesuffix("."))


def _refused_value(exc: click_errors.ClickException) -> str | None:
    """The value typer refused, when pydantic checked it (typer's message leaves it out)."""
    errors = getattr(exc.__cause__, "errors", None)
    found = (errors() or [{}])[0].get("input") if callable(errors) else None
    return str(found) if isinstance(found, str | int | float) else None


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


MaxExcludedOption = Annotated[float, typer.Option(
    "--max-excluded", min=0.0, max=1.0,
    help="Exit 3 (not a result, never a baseline) above this share of excluded attempts "
         f"({EXCLUDED_IN_WORDS}).")]
EXIT_INCONCLUSIVE = 3
ServerErrorsOption = Annotated[Literal["count", "exclude"], typer.Option(
    "--server-errors",
    help="exclude: a server error (HTTP 5xx after retries) is a provider error, left out of the "
         "shares like rate limits and timeouts. count: it is a wrong answer, labelled so, for "
         "when the serving stack (vLLM, SGLang, a proxy) is what is released.")]


def judge_step_for(judge: Path | None, store: Store, *, uncalibrated: bool,
                   api_base: str | None, api_key_env: str | None,
                   concurrency: int | None = None
                   ) -> JudgeStep | None:
    """The --judge of `score` and `run` (None without one): its modules are imported only
    when it is given, so scoring without a judge does not pay for loading them."""
    if judge is None:
        return None
    import os

    from callgate.judging.step import judge_step

    return judge_step(judge, store, uncalibrated=uncalibrated, environ=os.environ,
                      concurrency=concurrency, api_base=api_base, api_key_env=api_key_env)


def behaviour_judges_for(answer_kind: Path | None, claims: Path | None, store: Store, *,
                         uncalibrated: bool, api_base: str | None, api_key_env: str | None,
                         concurrency: int | None = None) -> BehaviourJudges | None:
    """The judges beyond the call `score` or `run` was given (None: neither), each loaded and
    refused without a certificate as --judge is (judge_step_for)."""
    if answer_kind is None and claims is None:
        return None
    from callgate.scoring.behaviour import BehaviourJudges

    def step(path: Path | None) -> JudgeStep | None:
        return judge_step_for(path, store, uncalibrated=uncalibrated, api_base=api_base,
                              api_key_env=api_key_env, concurrency=concurrency)

    return BehaviourJudges(answer_kind=step(answer_kind), claim_support=step(claims))


def user_judge_for(judge: Path | None, user: Path | None, store: Store, *,
                   uncalibrated: bool, api_base: str | None, api_key_env: str | None,
                   concurrency: int | None = None) -> JudgeStep | None:
    """`run --user-judge` (None without it): it reads what a simulated user wrote, so it needs
    --user; loaded and refused without a certificate as --judge is (judge_step_for)."""
    if judge is None:
        return None
    if user is None:
        raise _fail("--user-judge reads what a simulated user wrote: give --user SPEC too")
    from callgate.judging.user_fidelity import refuse_other

    step = judge_step_for(judge, store, uncalibrated=uncalibrated, api_base=api_base,
                          api_key_env=api_key_env, concurrency=concurrency)
    assert step is not None
    refuse_other(step)
    return step


def print_judge_pacing(pacing: PacingFigures | None) -> None:
    """What limited the judge's calls, on stderr (nothing when every verdict was cached)."""
    if pacing is not None:
        from callgate.models.pacing import figures_text

        typer.echo(f"judge calls: {figures_text(pacing)}", err=True)


def _exit_if_not_a_result(record: GateRecord | None) -> None:
    if record is None:
        return
    again = (" (running the same command again asks the attempts that failed at the provider "
             "or the target again)" if record.decided_by == "run" else "")
    Console(stderr=True).print(
        f"[yellow]inconclusive:[/yellow] {escape(record.messages[0])}. This run is not a "
        f"result: it is stored, marked inconclusive, and never used as a baseline{again}.",
        highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_INCONCLUSIVE)


STORE_FILE_SUFFIXES = ("", "-wal", "-shm", "-journal")  # SQLite's files of one store


def check_output(option: str, path: Path, *, store: Path | None = None,
                 inputs: tuple[Path | None, ...] = (), makes_folder: bool = False) -> None:
    """Refuse, before anything is decided or written, an output path that would destroy what
    the command reads: the store (or its -wal, -shm or -journal file), one of the command's
    input files, or a folder. Symlinks and relative paths are resolved first, and a hard link
    is caught by comparing files. A missing parent folder is refused unless the command makes
    it (`makes_folder`)."""
    shown = f"{option} {path}"
    if path.is_dir():
        raise _fail(f"{shown}: is a folder; name a file to write")
    target = path.resolve()
    if store is not None:
        home = store.resolve()
        for suffix in STORE_FILE_SUFFIXES:
            kept = home.with_name(home.name + suffix)
            if _same_file(target, kept):
                what = "the store" if not suffix else f"the store's {suffix[1:]} file"
                raise _fail(f"{shown}: is {what} ({store}); writing it would destroy the "
                            "store: name another file")
    for given in inputs:
        if given is not None and _same_file(target, given.resolve()):
            raise _fail(f"{shown}: is another file this command reads or writes ({given}); "
                        "name another file")
    parent = target.parent
    if not parent.exists() and not makes_folder:
        raise _fail(f"{shown}: folder {parent} does not exist; create it first")
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise _fail(f"{shown}: {parent} is not a folder")


def _same_file(one: Path, other: Path) -> bool:
    if one == other:
        return True
    try:
        return one.exists() and other.exists() and one.samefile(other)
    except OSError:
        return False
