"""The CLI reference as Markdown, generated from the typer app (click's command tree): every
command with its help, usage, arguments and options. The documentation site's hook puts it
into docs/reference/cli.md at build time, so the reference cannot drift from the code."""

from __future__ import annotations

from typing import Any

import click
import typer.main


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _option_row(param: Any, context: click.Context) -> str:
    """One option as click's --help gives it: names with the value's kind, then the help with
    its [default: ...], [required] and [env var: ...]."""
    record = param.get_help_record(context)
    names, help_text = record if record else (", ".join(param.opts), "")
    return f"| `{_cell(names)}` | {_cell(help_text)} |"


def _metavar(param: Any) -> str:
    return str(param.metavar or param.name).strip("{}[]")


def command_markdown(path: tuple[str, ...], command: Any, level: int) -> list[str]:
    name = " ".join(("callgate", *path))
    context = click.Context(command, info_name=name)
    lines = ["#" * level + f" `{name}`", ""]
    if command.help:
        lines += [command.help.strip().replace("\b\n", ""), ""]
    pieces = " ".join(command.collect_usage_pieces(context))
    lines += ["```text", f"{name} {pieces}".rstrip(), "```", ""]
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    options = [p for p in command.params
               if p.param_type_name == "option" and not p.hidden]
    if arguments:
        lines += ["| argument | required |", "|---|---|"]
        lines += [f"| `{_metavar(p)}` | {'yes' if p.required else 'no'} |"
                  for p in arguments]
        lines.append("")
    if options:
        lines += ["| option | what it does |", "|---|---|"]
        lines += [_option_row(p, context) for p in options]
        lines += ["| `--help` | Show the help and exit. |", ""]
    return lines


def walk_commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every visible command under `group`, depth first, with its path of names."""
    found = []
    context = click.Context(group)
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        if command is None or command.hidden:
            continue
        found.append(((*path, name), command))
        if hasattr(command, "list_commands"):
            found.extend(walk_commands(command, (*path, name)))
    return found


def cli_reference() -> str:
    """Every visible command of `callgate`, in the order --help lists them."""
    from callgate.cli.main import app

    root = typer.main.get_command(app)
    out: list[str] = []
    for path, command in walk_commands(root):
        if hasattr(command, "list_commands"):
            out += [f"## `callgate {' '.join(path)}` …", "", (command.help or "").strip(), ""]
            continue
        out += command_markdown(path, command, 2 if len(path) == 1 else 3)
    return "\n".join(out)
