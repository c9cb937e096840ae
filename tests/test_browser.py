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
from webserver import Server, callgate_script

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
ROOT = Path(__file__).resolve().parent.parent
SET = ROOT / "calibration" / "tool_choice.jsonl"

pytestmark = [
    pytest.mark.browser,
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
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--window-size=1280,1000",
                 f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)),
                              options=options)
    try:
        yield driver
    finally:
        driver.quit()


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


def labels_in(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT item_id, tool_choice, arguments FROM person_labels "
                            "WHERE labeller = 'tester' ORDER BY id").fetchall()


def test_labelling_five_items_with_the_keyboard(browser, demo_db: Path, tmp_path: Path,
                                                shots: Path) -> None:
    # A page replaced while it is read shows up as any WebDriverException (stale element,
    # JavaScript or inspector errors): such reads are retried.
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    db = tmp_path / "c.db"
    shutil.copyfile(demo_db, db)
    labels = tmp_path / SET.name
    shutil.copyfile(SET, labels)
    lines_before = labels.read_text().splitlines()
    server = Server(db, "--set", str(labels))

    def item_id() -> str:
        # Read again if the page is replaced between finding the heading and reading it: seen
        # under load as a stale element, a JavaScript error or a bare WebDriverException
        # ("unhandled inspector error: Node with given id does not belong to the document").
        for _ in range(50):
            try:
                return str(browser.find_element(By.CSS_SELECTOR, "h1").text.split()[0])
            except WebDriverException:  # the base class of each of those
                time.sleep(0.1)
        raise AssertionError("the labelling page never showed an item")

    def ready() -> None:
        """The page has loaded and its shortcuts listen: a key sent earlier would be lost."""
        WebDriverWait(browser, 30, ignored_exceptions=(
            WebDriverException,)).until(
            lambda _: browser.execute_script("return document.readyState") == "complete"
            and browser.find_element(By.TAG_NAME, "body").get_attribute("data-keys") == "ready")

    def press(*keys: str) -> None:
        ready()
        shown = item_id()
        for key in keys:
            ActionChains(browser).send_keys(key).perform()
        WebDriverWait(browser, 30, ignored_exceptions=(
            WebDriverException,)).until(
            lambda _: item_id() != shown)
        ready()

    try:
        browser.get(f"{server.base}/calibration/{labels.name}?labeller=tester")
        browser.save_screenshot(str(shots / "label.png"))
        keys = [("p", "p"), ("p", "f"), ("f", "n"), ("p", "n"), ("f", "n")]
        labelled = []
        for pair in keys:
            labelled.append(item_id())
            press(*pair)
        browser.save_screenshot(str(shots / "label-after-five.png"))
        expected = [(item, {"p": "pass", "f": "fail"}[tool],
                     {"p": "pass", "f": "fail", "n": "n/a"}[args])
                    for item, (tool, args) in zip(labelled, keys, strict=True)]
        assert labels_in(db) == expected
        lines = labels.read_text().splitlines()
        assert lines[:len(lines_before)] == lines_before
        assert len(lines) == len(lines_before) + 5
        assert [line.split('"id":"')[1].split('"')[0] for line in lines[-5:]] == labelled

        press("u")  # undo: back to the last item labelled, its row and line gone
        assert item_id() == labelled[-1]
        assert labels_in(db) == expected[:4]
        assert len(labels.read_text().splitlines()) == len(lines_before) + 4
        press("j")
        press("k")
        assert item_id() == labelled[-1]
        browser.get(f"{server.base}/calibration/{labels.name}/progress")
        assert "4" in browser.find_element(By.CSS_SELECTOR, ".card strong").text
        browser.save_screenshot(str(shots / "progress.png"))
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
