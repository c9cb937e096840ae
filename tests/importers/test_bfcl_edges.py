"""BFCL at the edges (issue 32): `import bfcl-results` never writes over the store, the suite or
its own inputs; an imported suite finds its wheel on another machine; a multi-turn result cut by
BFCL's step limit in its last user turn is checked as BFCL checks it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from bfcl_fixture import DATA
from typer.testing import CliRunner

from callgate.cli.main import app
from callgate.importers.bfcl import import_category, read_category


@pytest.fixture
def bfcl_run(tmp_path: Path) -> tuple[Path, Path]:
    """A simple_python suite and a v4 result folder answering every case with no call."""
    suite = import_category(DATA, "simple_python", tmp_path / "suite").out
    folder = tmp_path / "results" / "my-model-FC" / "non_live"
    folder.mkdir(parents=True)
    lines = [json.dumps({"id": entry.id, "result": []})
             for entry in read_category(DATA, "simple_python").entries]
    (folder / "BFCL_v4_simple_python_result.json").write_text("\n".join(lines) + "\n")
    return suite, folder.parent


def _store(path: Path) -> bytes:
    with sqlite3.connect(path) as db:
        db.execute("create table kept (x)")
        db.execute("insert into kept values (1)")
    return path.read_bytes()


def _convert(folder: Path, suite: Path, out: Path, *extra: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["import", "bfcl-results", str(folder), "--suite",
                                      str(suite), "--out", str(out), *extra])
    return result.exit_code, result.output


def test_out_never_writes_over_the_store(bfcl_run: tuple[Path, Path], tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    suite, folder = bfcl_run
    store = tmp_path / "store.db"
    before = _store(store)
    code, output = _convert(folder, suite, store, "--db", str(store))
    assert code == 2, output
    assert "is the store" in output and "store.db" in output
    assert store.read_bytes() == before
    # The store named as every command names it by default: CALLGATE_DB, else callgate.db.
    monkeypatch.setenv("CALLGATE_DB", str(store))
    code, output = _convert(folder, suite, store)
    assert code == 2 and "is the store" in output, output
    monkeypatch.delenv("CALLGATE_DB")
    monkeypatch.chdir(tmp_path)
    default = tmp_path / "callgate.db"
    kept = _store(default)
    code, output = _convert(folder, suite, Path("callgate.db"))
    assert code == 2 and "is the store" in output, output
    assert default.read_bytes() == kept
    code, output = _convert(folder, suite, Path("callgate.db-wal"))
    assert code == 2 and "wal file" in output, output


@pytest.mark.parametrize("victim", ["cases.jsonl", "tools.json", "suite.json", "result"])
def test_out_never_writes_over_what_it_reads(bfcl_run: tuple[Path, Path], tmp_path: Path,
                                             victim: str, monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    suite, folder = bfcl_run
    monkeypatch.chdir(tmp_path)
    path = (next(folder.rglob("*_result.json")) if victim == "result" else suite / victim)
    before = path.read_bytes()
    link = tmp_path / "link.jsonl"
    link.symlink_to(path)
    for out in (path, link):
        code, output = _convert(folder, suite, out)
        assert code == 2, output
        assert "another file this command reads" in output, output
        assert path.read_bytes() == before


def test_out_elsewhere_is_written(bfcl_run: tuple[Path, Path], tmp_path: Path) -> None:
    suite, folder = bfcl_run
    out = tmp_path / "responses.jsonl"
    code, output = _convert(folder, suite, out, "--db", str(tmp_path / "x.db"))
    assert code == 0, output
    assert len(out.read_text().splitlines()) == len(read_category(DATA, "simple_python").entries)
    code, output = _convert(folder, suite, tmp_path / "missing" / "r.jsonl")
    assert code == 2 and "does not exist" in output, output
