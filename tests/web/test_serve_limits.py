"""`callgate serve` at its edges: a body over the limit is refused (413) by its length or as
its chunks arrive, text that cannot be kept (a lone surrogate, bytes that are not UTF-8) is
refused (400, one line), nothing of either reaches the set file or the store, and the server
answers the next request at once."""

from __future__ import annotations

import http.client
import json
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_driver import CHROMEDRIVER, CHROMIUM, keys, ready, start_browser
from paths import ROOT
from webserver import Server, callgate_script

pytestmark = pytest.mark.slow

SET = ROOT / "calibration" / "tool_choice.jsonl"
LABEL = {"item_id": "tc-001", "labeller": "ana", "tool_choice": "pass", "arguments": "n/a"}
BIG = 30 * 1024 * 1024


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, Path]]:
    root = tmp_path_factory.mktemp("limits")
    db = root / "c.db"
    done = subprocess.run([callgate_script(), "demo", "--db", str(db)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    labels = root / "tool_choice.jsonl"
    shutil.copyfile(SET, labels)
    server = Server(db, "--set", str(labels))
    try:
        yield server, db, labels
    finally:
        server.stop()


def post(server: Server, path: str, body: bytes | Iterator[bytes], content_type: str,
         chunked: bool = False) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    try:
        headers = {"content-type": content_type}
        conn.request("POST", path, body=body, headers=headers, encode_chunked=chunked)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def answers_promptly(server: Server) -> None:
    """The next request is answered at once: within 10 s on a busy machine (it took about
    3 minutes after a surrogate or a 30 MB note)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", "/calibration/tool_choice.jsonl?labeller=ana")
        response = conn.getresponse()
        assert response.status == 200 and b"tc-" in response.read()
    finally:
        conn.close()


def people(db: Path) -> list[tuple]:
    with sqlite3.connect(db) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'person_labels'"
                            ).fetchone():
            return []
        return conn.execute("SELECT item_id, labeller, note FROM person_labels").fetchall()


API = "/api/calibration/tool_choice.jsonl/labels"
FORM = "/calibration/tool_choice.jsonl/label"
URLENCODED = "application/x-www-form-urlencoded"


def test_a_lone_surrogate_is_refused_in_one_line_and_the_server_goes_on(
    served: tuple[Server, Path, Path]
) -> None:
    server, db, labels = served
    before, rows = labels.read_bytes(), people(db)
    body = json.dumps({**LABEL, "note": "\ud800"}).encode()  # '"note": "\\ud800"'
    assert b"\\ud800" in body
    status, text = post(server, API, body, "application/json")
    assert status == 400, text
    error = json.loads(text)["error"]
    assert "\n" not in error and "note" in error and "surrogate" in error
    # in a form: %ED%A0%80 is the UTF-8 form of a surrogate, which no decoder accepts
    status, page = post(server, FORM, b"item_id=tc-001&labeller=ana&tool_choice=pass&"
                         b"arguments=n%2Fa&note=%ED%A0%80", URLENCODED)
    assert status == 400 and "not UTF-8 text" in page and "Traceback" not in page
    status, page = post(server, FORM, b"item_id=tc-001&labeller=ana&tool_choice=pass&"
                        b"arguments=n%2Fa&note=\xff\xfe", URLENCODED)
    assert status == 400 and "not UTF-8 text" in page
    assert labels.read_bytes() == before and people(db) == rows
    answers_promptly(server)


def test_a_body_over_the_limit_is_refused_by_its_length_or_its_chunks(
    served: tuple[Server, Path, Path]
) -> None:
    server, db, labels = served
    before, rows = labels.read_bytes(), people(db)
    big = json.dumps({**LABEL, "note": "x" * BIG}).encode()
    status, text = post(server, API, big, "application/json")
    assert status == 413 and "1,048,576 bytes" in json.loads(text)["error"]
    answers_promptly(server)

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit counts what arrives
        yield json.dumps(LABEL)[:-1].encode() + b', "note": "'
        for _ in range(BIG // 65536):
            yield b"y" * 65536
        yield b'"}'

    status, text = post(server, API, chunks(), "application/json", chunked=True)
    assert status == 413, text
    status, page = post(server, FORM, b"note=" + b"z" * (2 * 1024 * 1024), URLENCODED)
    assert status == 413 and "the most this server takes" in page
    assert labels.read_bytes() == before and people(db) == rows
    answers_promptly(server)


def test_a_note_under_the_limit_in_any_language_is_kept(served: tuple[Server, Path, Path]
                                                        ) -> None:
    server, db, labels = served
    rows = people(db)
    note = "café ✓ " + "n" * 200_000
    status, text = post(server, API, json.dumps({**LABEL, "note": note}).encode(),
                        "application/json")
    assert status == 201, text
    status, _ = post(server, FORM, "item_id=tc-002&labeller=ana&tool_choice=pass&"
                     "arguments=n%2Fa&note=na\u00efve".encode(), URLENCODED)
    assert status == 303
    assert [(i, n[:12]) for i, _, n in people(db)[len(rows):]] == [("tc-001", note[:12]),
                                                        ("tc-002", "naïve")]
    assert labels.read_text(encoding="utf-8").count("naïve") == 1
    answers_promptly(server)


def test_a_declared_length_past_any_drain_is_refused_before_a_byte_of_it(
    served: tuple[Server, Path, Path]
) -> None:
    server, _, _ = served
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.putrequest("POST", API)
        conn.putheader("content-type", "application/json")
        conn.putheader("content-length", str(10**12))
        conn.endheaders()  # and not one byte of the terabyte announced
        response = conn.getresponse()
        assert response.status == 413 and b"1,048,576 bytes" in response.read()
    finally:
        conn.close()
    answers_promptly(server)


@pytest.mark.browser
@pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                    reason="browser tests need /usr/bin/chromium and /usr/bin/chromedriver")
def test_a_browser_sending_a_note_over_the_limit_reads_the_refusal(
    served: tuple[Server, Path, Path], tmp_path: Path
) -> None:
    """A person pasting a 2 MiB note into the page's form reads the one-line 413 (it was
    saved, 2 MiB into the file and the store), and the queue opens again at once."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    server, db, labels = served
    before, rows = labels.read_bytes(), people(db)
    browser = start_browser(tmp_path / "profile")
    try:
        browser.get(f"{server.base}/calibration/{labels.name}?labeller=ana")
        ready(browser)
        browser.execute_script(
            "document.getElementById('note').value = 'x'.repeat(2 * 1024 * 1024);")
        keys(browser, "p", "n")  # the label is saved after the second key
        WebDriverWait(browser, 60).until(
            lambda b: "the most this server takes" in b.find_element(By.TAG_NAME, "body").text)
        body = browser.find_element(By.TAG_NAME, "body").text
        assert "the request body is over 1,048,576 bytes" in body
        browser.get(f"{server.base}/calibration/{labels.name}?labeller=ana")
        ready(browser)
        assert browser.find_element(By.ID, "queue-place")
    finally:
        browser.quit()
    assert labels.read_bytes() == before and people(db) == rows
