"""The pages in a real headless Chromium (Debian's chromium + chromium-driver, driven by
Selenium through /usr/bin/chromedriver, so Selenium Manager never downloads anything).

Screenshots go to a temporary folder (or CALLGATE_SCREENSHOTS when set) for a person to look at.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from browser_driver import CHROMEDRIVER, CHROMIUM, keys, press, ready, ready_page, start_browser
from paths import ROOT
from webserver import Server, callgate_script

SET = ROOT / "calibration" / "tool_choice.jsonl"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                       reason="browser tests need /usr/bin/chromium and /usr/bin/chromedriver "
                              "(apt-get install chromium chromium-driver)"),
]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("demo") / "callgate.db"
    done = subprocess.run([callgate_script(), "demo", "--db", str(db)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return db


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = os.environ.get("CALLGATE_SCREENSHOTS")
    if where:
        Path(where).mkdir(parents=True, exist_ok=True)
        return Path(where)
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    driver = start_browser(tmp_path / "chromium-profile")
    try:
        yield driver
    finally:
        driver.quit()  # type: ignore[attr-defined]


@pytest.fixture
def second_browser(tmp_path: Path) -> Iterator[object]:
    """Another person's browser: its own profile, so its own stored name."""
    driver = start_browser(tmp_path / "chromium-profile-2")
    try:
        yield driver
    finally:
        driver.quit()  # type: ignore[attr-defined]


@pytest.mark.slow
def test_the_releases_chart_shows_both_releases_and_the_regression(
    browser, demo_db: Path, shots: Path
) -> None:
    from selenium.webdriver.common.by import By

    server = Server(demo_db)
    try:
        browser.get(server.base + "/releases?" + urlencode({"model": "example-agent",
                                                           "suite": "order-support"}))
        chart = browser.find_element(By.CSS_SELECTOR, "svg.chart")
        assert chart.is_displayed() and chart.size["width"] > 600
        marks = {el.get_attribute("data-release"): el.get_attribute("data-outcome")
                 for el in chart.find_elements(By.CSS_SELECTOR, "g.release")}
        assert marks == {"2026.10": "first_release", "2026.11": "regression"}
        regression = chart.find_element(By.CSS_SELECTOR, "g.mark-regression")
        assert regression.is_displayed() and "regression" in regression.text
        assert len(chart.find_elements(By.CSS_SELECTOR, "line.rule")) >= 2  # the gate lines
        assert len(chart.find_elements(By.CSS_SELECTOR, "circle.failed-point")) == 2
        browser.save_screenshot(str(shots / "releases.png"))
        browser.find_element(By.LINK_TEXT, "2026.11").click()
        assert "Passed before, fail now" in browser.page_source
        browser.save_screenshot(str(shots / "release.png"))
        browser.find_element(By.LINK_TEXT, "clean-009").click()  # a flipped case
        rows = browser.find_elements(By.CSS_SELECTOR, "table.attempts tbody tr")
        assert [row.get_attribute("id") for row in rows] == ["case-clean-009"] * 2
        rows[0].find_element(By.TAG_NAME, "a").click()
        blamed = browser.find_elements(By.CSS_SELECTOR, "mark.blame")
        assert [el.text for el in blamed] == ['"reason": "too slow"']
        browser.save_screenshot(str(shots / "attempt.png"))
    finally:
        server.stop()


def labels_in(db: Path, labeller: str = "tester") -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT item_id, tool_choice, arguments FROM person_labels "
                            "WHERE labeller = ? ORDER BY id", [labeller]).fetchall()


def item_id(browser) -> str:
    """The item the labelling page shows. Read again if the page is replaced between finding
    the heading and reading it: seen under load as a stale element, a JavaScript error or a
    bare WebDriverException ("unhandled inspector error: Node with given id does not belong
    to the document")."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    for _ in range(50):
        try:
            return str(browser.find_element(By.CSS_SELECTOR, "h1").text.split()[0])
        except WebDriverException:  # the base class of each of those
            time.sleep(0.1)
    raise AssertionError("the labelling page never showed an item")


def open_queue(browser, server: Server, set_name: str, labeller: str, item: str = "") -> None:
    query = {"labeller": labeller, **({"item": item} if item else {})}
    browser.get(f"{server.base}/calibration/{set_name}?{urlencode(query)}")
    ready(browser)


def file_and_store(db: Path, labels: Path) -> tuple[list[tuple], list[tuple], dict]:
    """(people's labels in the file, in the store; the labels that count in the file)."""
    from callgate.judging.calibration_set import read_journal, read_set

    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT item_id, labeller, tool_choice, arguments FROM "
                              "person_labels WHERE set_name = ? ORDER BY id",
                              [labels.name]).fetchall()
        counted = dict(((i, (t, a)) for i, t, a in conn.execute(
            "SELECT item_id, label_tool_choice, label_arguments FROM calibration_items "
            "WHERE set_name = ?", [labels.name])))
    in_file = [(i.id, i.labeller, i.label.tool_choice, i.label.arguments)
               for i in read_journal(labels).people]
    effective = {i.id: (i.label.tool_choice, i.label.arguments) for i in read_set(labels)[0]}
    assert counted == effective
    return in_file, stored, effective


@pytest.mark.slow
def test_labelling_five_items_with_the_keyboard(browser, demo_db: Path, tmp_path: Path,
                                                shots: Path) -> None:
    from selenium.webdriver.common.by import By

    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = tmp_path / SET.name
    shutil.copyfile(SET, labels)
    lines_before = labels.read_text().splitlines()
    server = Server(db, "--set", str(labels))
    try:
        open_queue(browser, server, labels.name, "tester")
        browser.save_screenshot(str(shots / "label.png"))
        pairs = [("p", "p"), ("p", "f"), ("f", "n"), ("p", "n"), ("f", "n")]
        labelled = []
        for pair in pairs:
            labelled.append(item_id(browser))
            press(browser, *pair)
        browser.save_screenshot(str(shots / "label-after-five.png"))
        expected = [(item, {"p": "pass", "f": "fail"}[tool],
                     {"p": "pass", "f": "fail", "n": "n/a"}[args])
                    for item, (tool, args) in zip(labelled, pairs, strict=True)]
        assert labels_in(db) == expected
        lines = labels.read_text().splitlines()
        assert lines[:len(lines_before)] == lines_before
        assert len(lines) == len(lines_before) + 5
        assert [line.split('"id":"')[1].split('"')[0] for line in lines[-5:]] == labelled

        press(browser, "u")  # undo: back to the last item labelled, its label withdrawn
        assert item_id(browser) == labelled[-1]
        assert labels_in(db) == expected[:4]
        lines = labels.read_text().splitlines()
        assert len(lines) == len(lines_before) + 6 and '"withdraw"' in lines[-1]
        press(browser, "j")
        press(browser, "k")
        assert item_id(browser) == labelled[-1]
        browser.get(f"{server.base}/calibration/{labels.name}/progress")
        assert "4" in browser.find_element(By.CSS_SELECTOR, ".card strong").text
        browser.save_screenshot(str(shots / "progress.png"))
    finally:
        server.stop()


@pytest.mark.slow
def test_two_labellers_undo_and_relabel_keep_the_file_and_the_store_equal(
        browser, second_browser, demo_db: Path, tmp_path: Path, shots: Path) -> None:
    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = tmp_path / SET.name
    shutil.copyfile(SET, labels)
    server = Server(db, "--set", str(labels))
    ana, bo = browser, second_browser

    def agree() -> dict:
        in_file, stored, effective = file_and_store(db, labels)
        assert in_file == stored
        return effective

    try:
        open_queue(ana, server, labels.name, "ana")
        first = item_id(ana)
        press(ana, "p", "p")
        assert agree()[first] == ("pass", "pass")
        open_queue(bo, server, labels.name, "bo")
        assert item_id(bo) == first  # bo's own queue starts at bo's first item
        press(bo, "f", "n")
        assert first not in agree()  # they disagree: it counts for nothing yet
        open_queue(ana, server, labels.name, "ana")
        press(ana, "u")  # ana takes her label back: bo's alone counts
        assert item_id(ana) == first
        assert agree()[first] == ("fail", "n/a")
        assert [row[1] for row in file_and_store(db, labels)[1]] == ["bo"]
        open_queue(bo, server, labels.name, "bo", first)
        press(bo, "p", "f")  # bo relabels
        assert agree()[first] == ("pass", "fail")
        press(bo, "u")  # and undoes the relabel: bo's first label stands again
        assert agree()[first] == ("fail", "n/a")
        open_queue(ana, server, labels.name, "ana", first)
        press(ana, "f", "n")  # ana agrees with bo now
        assert agree()[first] == ("fail", "n/a")
        bo.save_screenshot(str(shots / "label-two-people.png"))
    finally:
        server.stop()


PHONE_WIDTH = 390


def run_ids_of(db: Path) -> dict[tuple[str, str], int]:
    with sqlite3.connect(db) as conn:
        return {(suite, release): run_id for suite, release, run_id in conn.execute(
            "SELECT suite_name, release, id FROM runs WHERE status = 'done'")}


@pytest.mark.slow
def test_the_pages_fit_a_390_px_phone_without_sideways_scrolling(browser, demo_db: Path,
                                                                 shots: Path) -> None:
    ids = run_ids_of(demo_db)
    before, after = ids[("order-support", "2026.10")], ids[("order-support", "2026.11")]
    pages = {
        "index": "/",
        "releases": "/releases?" + urlencode({"model": "example-agent",
                                              "suite": "order-support"}),
        "release": f"/runs/{after}",
        "attempt": f"/runs/{after}/attempts/clean-001/0",
        "compare": "/compare?" + urlencode({"run": [before, after]}, doseq=True),
        "models": "/compare?" + urlencode({"suite": "order-support"}),
    }
    # not "mobile": a mobile layout viewport widens to fit what overflows, hiding it
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": PHONE_WIDTH, "height": 844, "deviceScaleFactor": 2, "mobile": False})
    server = Server(demo_db)
    try:
        too_wide = {}
        for name, path in pages.items():
            browser.get(server.base + path)
            assert browser.execute_script("return window.innerWidth") == PHONE_WIDTH
            scroll, client = browser.execute_script(
                "const e = document.scrollingElement; return [e.scrollWidth, e.clientWidth]")
            browser.save_screenshot(str(shots / f"phone-{name}.png"))
            if scroll > client:
                too_wide[name] = (scroll, client)
        assert too_wide == {}
    finally:
        server.stop()


# Every text of each chart shown: its text, its rendered size in CSS px (the font size in the
# SVG's units times the SVG's scale to the screen) and how far it stays inside the chart's
# box on the left and the right (negative: cut off).
CHART_TEXTS = """
const out = [];
for (const svg of document.querySelectorAll('svg.chart')) {
  const box = svg.getBoundingClientRect();
  if (box.width === 0) continue;
  const scale = svg.getScreenCTM().a;
  for (const t of svg.querySelectorAll('text')) {
    const r = t.getBoundingClientRect();
    out.push([t.textContent, parseFloat(getComputedStyle(t).fontSize) * scale,
              r.left - box.left, box.right - r.right]);
  }
}
return out;
"""


@pytest.mark.slow
def test_the_charts_text_is_12_px_or_more_on_a_390_px_phone(browser, demo_db: Path,
                                                            shots: Path) -> None:
    pages = {
        "releases": "/releases?" + urlencode({"model": "example-agent",
                                              "suite": "order-support"}),
        "models": "/compare?" + urlencode({"suite": "order-support"}),
    }
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": PHONE_WIDTH, "height": 844, "deviceScaleFactor": 2, "mobile": False})
    server = Server(demo_db)
    try:
        for name, path in pages.items():
            browser.get(server.base + path)
            ready_page(browser)
            browser.save_screenshot(str(shots / f"phone-chart-{name}.png"))
            texts = browser.execute_script(CHART_TEXTS)
            assert len(texts) >= 5, (name, texts)  # the chart is there and measured
            small = [(text, round(px, 1)) for text, px, _, _ in texts if px < 12]
            cut = [(text, round(left, 1), round(right, 1)) for text, _, left, right in texts
                   if min(left, right) < -0.5]
            assert (name, small, cut) == (name, [], [])
            scroll, client = browser.execute_script(
                "const e = document.scrollingElement; return [e.scrollWidth, e.clientWidth]")
            assert scroll <= client
    finally:
        server.stop()


@pytest.mark.slow
@pytest.mark.parametrize("width", [375, 390])
def test_the_models_chart_text_is_13_px_or_more_on_a_phone(browser, demo_db: Path, shots: Path,
                                                          width: int) -> None:
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": 844, "deviceScaleFactor": 2, "mobile": False})
    server = Server(demo_db)
    try:
        browser.get(server.base + "/compare?" + urlencode({"suite": "order-support"}))
        ready_page(browser)
        browser.save_screenshot(str(shots / f"phone-{width}-models-chart.png"))
        texts = browser.execute_script(CHART_TEXTS)
        assert len(texts) >= 5, texts  # the legend, a model's name and its two values
        small = [(text, round(px, 1)) for text, px, _, _ in texts if px < 13]
        cut = [(text, round(left, 1), round(right, 1)) for text, _, left, right in texts
               if min(left, right) < -0.5]
        assert (small, cut) == ([], [])
        scroll, client = browser.execute_script(
            "const e = document.scrollingElement; return [e.scrollWidth, e.clientWidth]")
        assert scroll <= client
    finally:
        server.stop()


@pytest.mark.slow
def test_the_queue_is_blind_and_each_persons_own(browser, demo_db: Path, tmp_path: Path
                                                 ) -> None:
    import json
    import urllib.request

    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = tmp_path / SET.name
    shutil.copyfile(SET, labels)
    first, second, third = (json.loads(line) for line in labels.read_text().splitlines()[:3])
    server = Server(db, "--set", str(labels))
    try:
        open_queue(browser, server, labels.name, "anaxx")
        for item in (first, second):
            assert item_id(browser) == item["id"]
            press(browser, "f", "n")
        assert item_id(browser) == third["id"]  # anaxx's next
        request = urllib.request.Request(
            f"{server.base}/api/calibration/{labels.name}/labels", method="POST",
            headers={"content-type": "application/json"},
            data=json.dumps({"item_id": first["id"], "labeller": "cyxx", "tool_choice": "pass",
                             "arguments": "pass", "note": "cy-was-here"}).encode())
        urllib.request.urlopen(request, timeout=30).read()
        # bo, in the same browser: bo's queue opens at bo's first item, not after ana's work
        open_queue(browser, server, labels.name, "bo")
        assert item_id(browser) == first["id"]
        source = browser.page_source
        assert first["case"]["rubric"] in source
        for given_away in (first["category"], "anaxx", "cyxx", "cy-was-here", first["note"]):
            assert given_away not in source, given_away
        press(browser, "p", "p")
        assert item_id(browser) == second["id"]
        open_queue(browser, server, labels.name, "bo", first["id"])  # labelled: shown now
        source = browser.page_source
        assert first["category"] in source and "anaxx" in source and "cyxx" in source
    finally:
        server.stop()


@pytest.mark.slow
def test_a_fail_then_pass_slip_is_refused_on_the_page(browser, demo_db: Path, tmp_path: Path,
                                                     shots: Path) -> None:
    import asyncio

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from callgate.judging.calibration import calibrate
    from callgate.judging.judge import load_judge
    from callgate.store.db import Store

    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = tmp_path / SET.name
    shutil.copyfile(SET, labels)
    judge = load_judge(ROOT / "judges" / "tool_choice.toml").model_copy(
        update={"spec_path": tmp_path / "tool_choice.toml"})

    async def always_pass(messages: list[dict]) -> str:
        return '{"tool_choice": "pass", "arguments": "pass", "reason": "stub"}'

    with Store(db) as store:
        asyncio.run(calibrate(judge, labels, store, always_pass, 4))
    before = labels.read_bytes()
    server = Server(db, "--set", str(labels))
    try:
        open_queue(browser, server, labels.name, "ana")
        shown = item_id(browser)
        keys(browser, "f", "p")
        refusal = browser.find_element(By.ID, "key-refused")
        assert refusal.is_displayed() and "cannot pass" in refusal.text
        browser.save_screenshot(str(shots / "label-refused.png"))
        assert item_id(browser) == shown and labels.read_bytes() == before
        assert labels_in(db, "ana") == []
        press(browser, "n")  # the arguments: n/a, and the label is saved
        assert labels_in(db, "ana") == [(shown, "fail", "n/a")]
        # the review page's dropdowns: a failed tool choice moves the arguments to n/a
        browser.get(f"{server.base}/calibration/{labels.name}/review?labeller=ana")
        ready_page(browser)
        row = browser.find_element(By.CSS_SELECTOR, "form.relabel")
        tool = Select(row.find_element(By.NAME, "tool_choice"))
        arguments = Select(row.find_element(By.NAME, "arguments"))
        tool.select_by_value("pass")
        arguments.select_by_value("pass")
        tool.select_by_value("fail")
        assert arguments.first_selected_option.get_attribute("value") == "n/a"
        assert row.find_element(By.CSS_SELECTOR, ".why").is_displayed()
        item = row.find_element(By.NAME, "item_id").get_attribute("value")
        row.find_element(By.TAG_NAME, "button").click()
        ready_page(browser)
        assert (item, "fail", "n/a") in labels_in(db, "ana")
    finally:
        server.stop()


@pytest.mark.slow
def test_a_foreign_page_cannot_frame_the_app(browser, demo_db: Path, tmp_path: Path) -> None:
    server = Server(demo_db)
    try:
        foreign = tmp_path / "foreign.html"
        foreign.write_text(f'<!doctype html><p>foreign</p><iframe id="f" src="{server.base}/" '
                           'width="800" height="600"></iframe>')
        browser.get(foreign.as_uri())
        time.sleep(1.5)
        browser.switch_to.frame(browser.find_element("id", "f"))
        framed = browser.page_source
        browser.switch_to.default_content()
        assert "Releases" not in framed and "example-agent" not in framed
        browser.get(server.base + "/")  # the same page, not framed, shows
        assert "example-agent" in browser.page_source
    finally:
        server.stop()
