"""Every link and form of `callgate serve`'s pages answers, over a store whose case ids (and so
the labelling items made of them) and whose calibration set's file name hold the characters a
URL treats specially: '/', '?', '#', '%', '&', '+', spaces and non-ASCII. Crawled over HTTP
from the index, the releases, their comparison, the labelling and the audit pages; and, for the
labelling page, in a real Chromium, whose resolution of each link is the one a click makes."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, unquote, unquote_plus, urlencode, urljoin, urlsplit

import pytest
from conftest import KEY, KEY_ENV
from live_judge import TOOLS, make_judge, verdict
from loopback import Loopback, ok
from webserver import Server, callgate_script

pytestmark = pytest.mark.slow

# (not ".." : a browser resolves a path segment "..", and "%2e%2e" too, to the folder above)
ODD = ["a/b", "q?x=1&y=2", "h#2", "p%41%2F", "sp ace+1", "ünï-код-😀", "semi;colon"]
SET_NAME = "set #1 ü 100%.jsonl"
PEOPLE = ("ana", "bo")


def odd_cases() -> list[dict]:
    """Per odd id, a case the judge decides (the id itself) and one that must not call a
    tool, answered so that it flips between the releases."""
    cases = []
    for n, base in enumerate(ODD):
        cases.append({"id": base, "messages": [{"role": "user", "content": f"[case-{n}] a person"}],
                      "expect": {"type": "judge", "rubric": "Escalate faithfully."}})
        cases.append({"id": f"{base} no call", "messages": [{"role": "user", "content": "hours?"}],
                      "expect": {"type": "no_call"}})
    return cases


def odd_responses(path: Path, release: str) -> Path:
    call = {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {
        "name": "escalate", "arguments": '{"summary": "a person"}'}}]}
    text = {"role": "assistant", "content": "9 to 5"}
    lines = []
    for n, base in enumerate(ODD):
        lines.append({"case_id": base, "response": call})
        calls_now = (n % 2 == 0) == (release == "r2")  # half get worse in r2, half better
        lines.append({"case_id": f"{base} no call", "response": call if calls_now else text})
    path.write_text("".join(json.dumps({**line, "finish_reason": "stop"}) + "\n"
                            for line in lines))
    return path


@pytest.fixture(scope="module")
def odd_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """Two releases scored with a judge (a loopback server plays its model) and gated, an
    audit sample of r2 drawn; the run ids by release."""
    root = tmp_path_factory.mktemp("crawl")
    suite = root / "suite"
    suite.mkdir()
    (suite / "tools.json").write_text(json.dumps(TOOLS))
    (suite / "cases.jsonl").write_text("".join(json.dumps(c) + "\n" for c in odd_cases()))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CALLGATE_", "OPENROUTER"))}
    env.update({KEY_ENV: KEY, "HOME": str(root)})
    loopback = Loopback().start()
    try:
        spec = make_judge(root, loopback.base_url)
        for n in range(len(ODD)):
            loopback.script(f"[case-{n}]", ok(content=verdict("pass", "pass", f"says {n}"),
                                              provider=None, cost=None))

        def cli(*args: str) -> subprocess.CompletedProcess[str]:
            done = subprocess.run([callgate_script(), *args, "--db", "c.db"], cwd=root,
                                  env=env, capture_output=True, text=True, timeout=300)
            assert done.returncode in (0, 1, 3), (args, done.stderr)
            return done

        runs = {}
        for release in ("r1", "r2"):
            scored = cli("score", str(suite), "-r",
                         str(odd_responses(root / f"{release}.jsonl", release)), "-m", "m",
                         "--release", release, "--judge", str(spec), "--uncalibrated", "--json")
            runs[release] = json.loads(scored.stdout)["run_id"]
            cli("gate", "-m", "m", "--release", release)
        cli("judge", "audit", str(runs["r2"]), "--n", "3", "--seed", "5")
    finally:
        loopback.stop()
    return root / "c.db", runs


@pytest.fixture(scope="module")
def server(odd_store: tuple[Path, dict[str, int]]) -> Iterator[Server]:
    """Serving the store with a set file not yet written; two people label r2's first judged
    attempts into it, disagreeing on one, so the progress page lists a conflict."""
    db, runs = odd_store
    running = Server(db, "--set", str(db.parent / SET_NAME), "--labellers", ",".join(PEOPLE))
    try:
        run = runs["r2"]
        for who, item, tool, args in (("ana", ODD[0], "pass", "pass"),
                                      ("bo", ODD[0], "fail", "n/a"),
                                      ("ana", ODD[2], "pass", "fail")):
            status, _, _ = running.request(
                f"/runs/{run}/label", method="POST", no_redirect=True,
                data=urlencode({"set": SET_NAME, "item_id": f"run{run}-{item}-r0",
                                "labeller": who, "tool_choice": tool, "arguments": args,
                                "split": "test"}).encode(),
                headers={"content-type": "application/x-www-form-urlencoded"})
            assert status == 303
        yield running
    finally:
        running.stop()


class Targets(HTMLParser):
    """The links (a href) and the forms (action, method) of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[str] = []
        self.forms: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "a" and found.get("href"):
            self.links.append(str(found["href"]))
        elif tag == "form":
            self.forms.append((str(found.get("action") or ""),
                               str(found.get("method") or "get").lower()))


def as_browser_sends(url: str) -> str:
    """A URL's path and query as a browser sends them: what may not travel raw (spaces,
    non-ASCII) percent-encoded, '%' and the rest left as written."""
    parts = urlsplit(url)
    path = quote(parts.path, safe="/%:@!$&'()*+,;=-._~")
    query = quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
    return path + (f"?{query}" if query else "")


def post_empty(server: Server, path: str) -> tuple[int, str]:
    status, body, _ = server.request(
        path, data=b"", method="POST", no_redirect=True,
        headers={"content-type": "application/x-www-form-urlencoded"})
    return status, body


def crawl(server: Server, start: list[str], limit: int = 900
          ) -> tuple[set[str], dict[str, tuple[int, str]]]:
    """Every page reachable from `start` by links (GET), each form of each page posted
    empty; the pages seen and the answers that were not 200 (an empty post: not the page's
    refusal, a 400)."""
    seen: set[str] = set()
    posted: set[str] = set()
    wrong: dict[str, tuple[int, str]] = {}
    queue = list(start)
    while queue and len(seen) < limit:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        status, page = server.get(path)
        if status != 200:
            wrong[path] = (status, page[:200])
            continue
        targets = Targets()
        targets.feed(page)
        base = server.base + path
        for href in targets.links:
            target = as_browser_sends(urljoin(base, href))
            if urlsplit(urljoin(base, href)).netloc == urlsplit(server.base).netloc and \
                    not target.startswith("/static/") and target not in seen:
                queue.append(target)
        for action, method in targets.forms:
            target = as_browser_sends(urljoin(base, action))
            if method == "post" and target not in posted:
                posted.add(target)
                status, body = post_empty(server, target)
                if status != 400 or 'class="error"' not in body:
                    wrong[f"POST {target}"] = (status, body[:200])
    return seen, wrong


def test_every_link_and_form_of_the_pages_answers(server: Server,
                                                  odd_store: tuple[Path, dict[str, int]]
                                                  ) -> None:
    db, runs = odd_store
    r1, r2 = runs["r1"], runs["r2"]
    start = ["/", f"/runs/{r1}", f"/runs/{r2}",
             "/compare?" + urlencode({"run": [r1, r2]}, doseq=True),
             f"/runs/{r2}/label?labeller=ana", f"/runs/{r2}/audit?labeller=ana"]
    seen, wrong = crawl(server, start)
    assert {target: status for target, (status, _) in wrong.items()} == {}
    decoded = {unquote(p.split("?")[0]) for p in seen}
    # the crawl reached what it is meant to check, through the pages' own links
    for run in (r1, r2):
        for base in ODD:
            for case_id in (base, f"{base} no call"):
                assert f"/runs/{run}/attempts/{case_id}/0" in decoded, case_id
    for page in ("", "/progress", "/review"):
        assert f"/calibration/{SET_NAME}{page}" in decoded, page
    items = {unquote_plus(m) for p in seen for m in re.findall(r"[?&]item=([^&]*)", p)}
    assert {f"run{r2}-{base}-r0" for base in ODD} <= items
    with sqlite3.connect(db) as conn:  # the empty posts wrote nothing
        assert conn.execute("SELECT COUNT(*) FROM person_labels").fetchone()[0] == 3
        assert conn.execute("SELECT COUNT(*) FROM audit_items WHERE label_tool_choice "
                            "IS NOT NULL").fetchone()[0] == 0


# The links and forms of the page shown, as the browser resolved them (what a click sends).
PAGE_TARGETS = """
return [Array.from(document.links, a => a.href),
        Array.from(document.forms, f => [f.action, f.method])];
"""


def check_labelling_page(browser, server: Server, items: set[str]) -> str:
    """The page is a labelling page of one of `items`, and each of its links and forms, as
    the browser resolved them, answers; the item shown."""
    from selenium.webdriver.common.by import By

    shown = browser.find_element(By.CSS_SELECTOR, '#label-form input[name="item_id"]')
    item = str(shown.get_attribute("value"))
    assert item in items, (item, browser.current_url)
    links, forms = browser.execute_script(PAGE_TARGETS)
    origin = urlsplit(server.base).netloc
    answers = {}
    for url in links:
        parts = urlsplit(url)
        if parts.netloc == origin and not parts.path.startswith("/static/"):
            answers[url] = server.get(parts.path + (f"?{parts.query}" if parts.query else ""))[0]
    for url, method in forms:
        parts = urlsplit(url)
        if method == "post":
            answers[f"POST {url}"] = post_empty(server, parts.path)[0]
    assert answers and {u: s for u, s in answers.items()
                        if s != (400 if u.startswith("POST ") else 200)} == {}
    return item


@pytest.mark.browser
def test_the_labelling_pages_links_answer_in_a_browser(
    server: Server, odd_store: tuple[Path, dict[str, int]], tmp_path: Path
) -> None:
    from browser_driver import CHROMEDRIVER, CHROMIUM, press, ready_page, start_browser

    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("browser tests need /usr/bin/chromium and /usr/bin/chromedriver")
    from selenium.webdriver.common.by import By

    db, runs = odd_store
    run = runs["r2"]
    items = {f"run{run}-{base}-r0" for base in ODD}
    browser = start_browser(tmp_path / "profile")
    try:
        # the run's judged attempts, reached by the release page's link
        browser.get(f"{server.base}/runs/{run}")
        browser.execute_script("localStorage.setItem('callgate-labeller', 'cy')")  # a name kept
        browser.find_element(By.LINK_TEXT, "label them by hand").click()
        ready_page(browser)
        assert "labeller=cy" in browser.current_url
        seen = [check_labelling_page(browser, server, items)]
        for pressed in (("j",), ("j",), ("k",), ("p", "p"), ("p", "f"), ("u",), ("j",)):
            press(browser, *pressed)
            seen.append(check_labelling_page(browser, server, items))
        assert len(set(seen)) >= 3, seen
        with sqlite3.connect(db) as conn:  # two labels given, the last withdrawn
            assert len(conn.execute("SELECT item_id FROM person_labels WHERE labeller = 'cy'"
                                    ).fetchall()) == 1
        # the set's queue, reached by the index's link (no item of it counts yet: each has
        # two people's labels that differ)
        browser.get(server.base + "/")
        browser.find_element(By.LINK_TEXT, "label").click()
        ready_page(browser)
        check_labelling_page(browser, server, items)
        assert browser.find_elements(By.ID, "next") or browser.find_elements(By.ID, "prev")
        press(browser, "j" if browser.find_elements(By.ID, "next") else "k")
        check_labelling_page(browser, server, items)
    finally:
        browser.quit()
