"""`callgate suite tools`: snapshot an MCP server's tool list into the suite's tools.json, so the
descriptions the model reads are versioned with the suite, or `--check` that it still matches."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from callgate.cli.common import _fail
from callgate.errors import CallgateError, InputError

if TYPE_CHECKING:
    from callgate.suites.environment import McpSpec

SuiteArgument = Annotated[Path, typer.Argument(help="Suite directory; tools.json goes in it.")]
McpOption = Annotated[str | None, typer.Option(
    "--mcp", metavar="COMMAND",
    help="The MCP server to start over stdio, as one string (\"python server.py --flag\"); "
         "default: the one suite.json's environment names.")]
TimeoutOption = Annotated[float | None, typer.Option(
    "--timeout", min=0.1, max=86400.0,
    help="Seconds the server may take to start, and to list its tools (default: the "
         "environment's timeout in suite.json, else 30).")]
CheckOption = Annotated[bool, typer.Option(
    "--check", help="Write nothing: exit 1 naming the tools whose snapshot differs from the "
                    "server (for CI).")]


def tools_command(suite: SuiteArgument, mcp: McpOption = None, timeout: TimeoutOption = None,
                  check: CheckOption = False) -> None:
    """Snapshot an MCP server's tools (name, description, inputSchema) into SUITE/tools.json."""
    from callgate.suites.mcp_tools import DEFAULT_TIMEOUT, McpFailure, McpServer, parse_command

    try:
        if not suite.is_dir():
            raise InputError(suite, "not a directory: a suite is a folder (tools.json goes in it)")
        spec = _suite_mcp(suite)
        command = mcp if mcp is not None else spec.mcp if spec is not None else None
        if command is None:
            raise _fail("name the server: --mcp \"command args\" (or an environment "
                        "{\"mcp\": ...} in suite.json)")
        try:
            words = parse_command(command)
        except ValueError as exc:
            raise _fail(f"--mcp: {exc}") from None
        if timeout is None:
            timeout = spec.timeout if spec is not None else DEFAULT_TIMEOUT
        try:
            with McpServer(words, cwd=suite, timeout=timeout) as server:
                listed = server.list_tools()
                server_info = server.server_info
        except McpFailure as exc:
            hint = (f"; give it longer with --timeout (now {timeout:g} s), or the environment's "
                    '"timeout" in suite.json' if exc.slow_start else "")
            raise _fail(f"--mcp {command!r}: {exc}{hint}") from None
        state_tool = spec.state if spec is not None else None
        catalogue = [tool.as_catalogue_entry() for tool in listed if tool.name != state_tool]
        if check:
            _check(suite / "tools.json", catalogue)
            return
        _write(suite / "tools.json", catalogue)
        if server_info is not None:
            _record_server(suite / "suite.json", server_info)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    shown = f" (not {state_tool}, suite.json's state tool)" if state_tool else ""
    served = (" from " + " ".join(filter(None, server_info.values())) if server_info else "")
    typer.echo(f"wrote {suite / 'tools.json'}: {len(catalogue)} tools{shown}{served}")


def _record_server(meta_path: Path, server_info: dict[str, str]) -> None:
    """suite.json's source.mcp_server: the server the snapshot came from, its name and version
    (the tool surface a release runs with names it; gating/surface_diff.py)."""
    from callgate.reading import read_json
    from callgate.suites.surface import MCP_SERVER_KEY

    meta = read_json(meta_path) if meta_path.is_file() else {}
    if not isinstance(meta, dict):
        raise InputError(meta_path, "must be a JSON object")
    source = meta.get("source", {})
    if not isinstance(source, dict):
        return  # a source another program wrote: left as it is
    meta["source"] = {**source, MCP_SERVER_KEY: server_info}
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=meta_path.parent,
                                     prefix=".suite.json.", suffix=".tmp", delete=False) as out:
        json.dump(meta, out, indent=2, ensure_ascii=False)
        out.write("\n")
    os.replace(out.name, meta_path)


def _suite_mcp(suite: Path) -> McpSpec | None:
    """suite.json's MCP environment, if it names one."""
    from callgate.reading import read_json, validate
    from callgate.suites.environment import McpSpec

    meta_path = suite / "suite.json"
    if not meta_path.is_file():
        return None
    meta = read_json(meta_path)
    environment = meta.get("environment") if isinstance(meta, dict) else None
    if not isinstance(environment, dict):
        return None
    return validate(McpSpec, environment, meta_path, prefix="environment.")


def _write(target: Path, catalogue: list[dict[str, Any]]) -> None:
    """Stage the catalogue beside tools.json, load it as a suite's tools.json is loaded (Draft 7
    schemas, an object's parameters, unique names), then rename it over the old one."""
    from callgate.suites.suite import load_tools

    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=target.parent,
                                     prefix=".tools.json.", suffix=".tmp", delete=False) as out:
        json.dump(catalogue, out, indent=2, ensure_ascii=False)
        out.write("\n")
    staged = Path(out.name)
    try:
        load_tools(staged)
        os.replace(staged, target)
    except InputError as exc:
        raise InputError(target, _named(exc, catalogue), field=exc.field) from None
    finally:
        staged.unlink(missing_ok=True)


def _named(exc: InputError, catalogue: list[dict[str, Any]]) -> str:
    """The loader's message about the staged file, naming the server's tool it is about."""
    found = re.match(r"\[(\d+)\]", exc.field or "")
    if found is None:
        return f"the server's tool list: {exc.message}"
    name = catalogue[int(found.group(1))]["function"]["name"]
    return f"the server's tool {name!r}: {exc.message}; tools.json is unchanged"


def _check(target: Path, catalogue: list[dict[str, Any]]) -> None:
    from callgate.reading import read_json

    snapshot = read_json(target, missing="file not found: snapshot it first (without --check)")
    if not isinstance(snapshot, list):
        raise InputError(target, "must be a JSON array of OpenAI function-tool objects")
    differences = _differences(snapshot, catalogue)
    if differences:
        raise _fail(f"{target} differs from the MCP server: {'; '.join(differences)}", code=1)
    typer.echo(f"{target} matches the MCP server: {len(catalogue)} tools")


def _differences(snapshot: list[Any], served: list[dict[str, Any]]) -> list[str]:
    """What differs, tool by tool: `changed NAME (description)`, `new NAME`, `gone NAME`."""
    def by_name(entries: list[Any]) -> dict[str, dict[str, Any]]:
        return {entry["function"]["name"]: entry["function"] for entry in entries
                if isinstance(entry, dict) and isinstance(entry.get("function"), dict)
                and isinstance(entry["function"].get("name"), str)}

    old, new = by_name(snapshot), by_name(served)
    found = []
    for name in [*old, *(n for n in new if n not in old)]:
        if name not in new:
            found.append(f"gone {name}")
        elif name not in old:
            found.append(f"new {name}")
        else:
            parts = [key for key in ("description", "parameters")
                     if old[name].get(key) != new[name].get(key)]
            if parts:
                found.append(f"changed {name} ({', '.join(parts)})")
    return found
