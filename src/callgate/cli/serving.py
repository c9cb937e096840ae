"""`callgate serve`: the web app and JSON API over the store, checked before the port is bound."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from callgate.cli.common import DbOption, _fail, check_output
from callgate.errors import CallgateError

if TYPE_CHECKING:
    from callgate.gating.gated import GateInputs

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def serve(
    db: DbOption = Path("callgate.db"),
    host: Annotated[str, typer.Option("--host", help="Address to listen on; anything but "
                                      "loopback needs --token.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8765,
    token: Annotated[str | None, typer.Option(
        "--token", envvar="CALLGATE_TOKEN",
        help="Every write (POST) must carry it: X-Callgate-Token header or token field.")] = None,
    sets: Annotated[list[Path] | None, typer.Option(
        "--set", help="Calibration file(s) people may label here; labels are appended to it, "
                      "as `callgate judge label` does.")] = None,
    labellers: Annotated[str | None, typer.Option(
        "--labellers", help="Comma-separated names: share each set's items among these "
                            "people (each person's queue holds their items).")] = None,
    second_label: Annotated[float, typer.Option(
        "--second-label", min=0, max=100,
        help="Percent of items that get a second person's label (for kappa).")] = 0,
    seed: Annotated[int, typer.Option(
        "--seed", help="Seed of the choice of items for a second label and of the sharing.")
    ] = 0,
    allow_hosts: Annotated[list[str] | None, typer.Option(
        "--allow-host", help="Beyond loopback, another name this server is reached by (the "
                             "Host header); the address bound and the machine's names are "
                             "allowed already.")] = None,
    config: Annotated[Path, typer.Option(
        "--config", help="callgate.toml, for its [gate] table (absent: defaults), as `gate` "
                         "reads it: the decision shown on a release `gate` never decided. A "
                         "release it decided shows that decision.")] = Path("callgate.toml"),
) -> None:
    """A local web app and JSON API over the store: releases, attempts, calibration sessions.
    Beyond loopback, every request needs the token, reads too.

    Everything is checked before the port is bound (exit 2, one line); with --port 0 the port
    picked is the one printed."""
    if host not in LOOPBACK and not token:
        raise _fail(f"--host {host} is not a loopback address: anyone who can reach it could "
                    "read and write labels; give --token T (or CALLGATE_TOKEN) so every "
                    "request needs it")
    if token is not None and not (token.isascii() and token.isprintable() and token.strip()
                                  and " " not in token):
        raise _fail("--token must be printable ASCII without spaces (it travels in an HTTP "
                    "header and a cookie)")
    if not db.exists():
        raise _fail(f"{db}: no such database; score a release first (e.g. callgate demo)")
    _check_serve_sets(db, list(sets or []))
    import uvicorn

    from callgate.judging.labelling import SessionPlan
    from callgate.store.db import Store
    from callgate.web.app import create_app

    names = tuple(dict.fromkeys(n.strip() for n in (labellers or "").split(",") if n.strip()))
    plan = (SessionPlan(labellers=names, second_share=second_label / 100, seed=seed)
            if names or second_label else None)
    try:
        configured = configured_gate(config)
        Store(db).close()  # a store that cannot be opened fails here, not in the server
        web_app = create_app(db, list(sets or []), token, host, plan, list(allow_hosts or []),
                             configured)
    except CallgateError as exc:
        raise _fail(str(exc)) from None
    listening = _listen(host, port)
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"callgate serve: http://{shown}:{listening.getsockname()[1]}/ over {db} "
               "(Ctrl-C stops)")
    server = uvicorn.Server(uvicorn.Config(web_app, log_level="warning"))
    server.run(sockets=[listening])


def configured_gate(config: Path) -> GateInputs | None:
    """callgate.toml's [gate] as `callgate gate --config FILE` (no other option) reads it:
    its rule, quarantine, slice rule and recovery threshold, at gate's default thresholds.
    None when that is the default rule's (no file, no [gate], or only its defaults).
    Raises CallgateError naming the file, line and field."""
    from callgate.cli.gating import gate_rules, slice_rule_of
    from callgate.gating.decision import DEFAULT_MAX_DROP
    from callgate.gating.gated import GateInputs
    from callgate.scoring.exclusion import DEFAULT_MAX_EXCLUDED

    settings, quarantine = gate_rules(config, None, None)
    inputs = GateInputs(max_drop=DEFAULT_MAX_DROP, max_excluded=DEFAULT_MAX_EXCLUDED,
                        rule=settings.rule, quarantine=quarantine,
                        slice_rule=slice_rule_of(settings, False, [], None),
                        recovery_max_drop=settings.recovery_max_drop)
    default = GateInputs(max_drop=DEFAULT_MAX_DROP, max_excluded=DEFAULT_MAX_EXCLUDED)
    return None if inputs == default else inputs


def _check_serve_sets(db: Path, sets: list[Path]) -> None:
    """Every --set file as `serve` will use it: a file (or a new one in a folder that exists)
    that is not the store, a set that reads cleanly, and no two of one name (the store keeps
    a set by its file name)."""
    from callgate.judging.calibration_set import read_set

    names: dict[str, Path] = {}
    for path in sets:
        check_output("--set", path, store=db)
        if path.name in names:
            raise _fail(f"--set {path}: another --set, {names[path.name]}, has the same file "
                        f"name {path.name}, and the store keeps a set by its file name; "
                        "rename one")
        names[path.name] = path
        if path.is_file() and path.read_bytes().strip():
            try:
                read_set(path)
            except CallgateError as exc:
                raise _fail(str(exc)) from None


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to `host`:`port` for uvicorn, or a one-line refusal naming the option.
    --host must be an IP address or localhost: a name would be looked up on the network."""
    import errno
    import ipaddress

    try:
        numeric = host == "localhost" or bool(ipaddress.ip_address(host))
    except ValueError:
        numeric = False
    if not numeric:
        raise _fail(f"--host {host}: not an IP address to listen on; give one (e.g. "
                    "127.0.0.1, ::1 or 0.0.0.0) or localhost")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (OSError, UnicodeError) as exc:
        raise _fail(f"--host {host}: cannot listen there ({exc})") from None
    listening = socket.socket(family, kind, proto)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind(address)
        # Listening before the address is printed: a client that connects on seeing it waits
        # in the backlog while the app starts, instead of being refused (uvicorn listens again
        # with its own backlog).
        listening.listen()
    except OSError as exc:
        listening.close()
        if exc.errno == errno.EADDRINUSE:
            raise _fail(f"--port {port}: already in use on {host}; stop what listens there, "
                        "or pass another --port (0 picks a free one)") from None
        raise _fail(f"--host {host}: cannot listen there ({exc.strerror or exc})") from None
    return listening
