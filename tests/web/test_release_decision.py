"""`serve` shows the decision `callgate gate` gave: a release gated with a quarantine (its only
regression on the quarantined cases) passed at the CLI, and the release page, its JSON, the
releases' JSON and /api/gate say exactly that decision (not the default rule's regression
taken again without the quarantine); a store changed since is decided again with the gate's
own inputs. The tool surface's change is on the page. In process, through the app over HTTP
(Starlette's test client); one real headless chromium reads the page."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from browser_driver import CHROMEDRIVER, CHROMIUM, ready_page, start_browser
from quarantined_release import AGENT, QUARANTINED, quarantine_file, scored_store
from starlette.testclient import TestClient
from typer.testing import CliRunner
from webserver import Server

from callgate.cli.main import app as cli
from callgate.gating.gated import keep_gated, kept_gated
from callgate.gating.release import decide_release, decision_key
from callgate.store.db import Store
from callgate.web.app import create_app
from callgate.web.report_html import html_report_text


def gate_cli(db: Path, *args: str) -> tuple[int, dict[str, Any]]:
    done = CliRunner().invoke(cli, ["gate", "--agent", AGENT, "--release", "r2", "--db",
                                    str(db), "--json", *args])
    return done.exit_code, json.loads(done.stdout)


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], Path]:
    """The store, the CLI's decision on r2 with the quarantine (and its JUnit file)."""
    root = tmp_path_factory.mktemp("release-decision")
    db = scored_store(root)
    junit = root / "gate.xml"
    code, decision = gate_cli(db, "--quarantine", str(quarantine_file(root)), "--junit",
                              str(junit))
    assert code == 0 and decision["outcome"] == "pass", decision["messages"]
    assert len(decision["quarantined"]) == len(QUARANTINED)
    return db, decision, junit


@pytest.fixture
def client(gated: tuple[Path, dict[str, Any], Path]) -> Iterator[TestClient]:
    with TestClient(create_app(gated[0]), base_url="http://127.0.0.1:8765") as http:
        yield http


def run_id(db: Path, release: str = "r2") -> int:
    with Store(db) as store:
        found = store.find_stored_run("weather", AGENT, release)
        assert found is not None
        return found.id


def text_of(page: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_the_api_gives_the_clis_decision_with_its_quarantine(
        gated: tuple[Path, dict[str, Any], Path], client: TestClient) -> None:
    db, decision, _ = gated
    api = client.get("/api/gate", params={"model": AGENT, "release": "r2"})
    assert api.status_code == 200
    assert api.json() == decision  # every field: rule, quarantine, figures, what to fix
    release = client.get(f"/api/runs/{run_id(db)}").json()
    assert release["gate"] == decision
    assert (release["outcome"], release["exit_code"]) == ("pass", 0)
    assert [q["case"] for q in release["quarantined"]] == QUARANTINED
    history = client.get("/api/releases", params={"model": AGENT}).json()
    assert [r["outcome"] for r in history["suites"]["weather"]] == ["first_release", "pass"]


def test_the_page_shows_the_clis_decision(gated: tuple[Path, dict[str, Any], Path],
                                          client: TestClient) -> None:
    db, decision, _ = gated
    page = client.get(f"/runs/{run_id(db)}")
    assert page.status_code == 200
    text = text_of(page.text)
    assert "pass exit 0, vs r1" in text
    assert f"{len(QUARANTINED)} quarantined case(s), out of the gate" in text
    assert "REGRESSION" not in text and "fell 12.5 points" not in text
    assert "10 quarantined case(s) left out of the slices" in text  # what to fix says so
    assert "No slice failed and no call moved to another tool." in text
    for message in decision["messages"]:
        assert " ".join(message.split()) in text


def test_the_page_shows_the_tool_surface_change(gated: tuple[Path, dict[str, Any], Path],
                                                client: TestClient) -> None:
    page = client.get(f"/runs/{run_id(gated[0])}").text
    section = page[page.index('id="tool-surface"'):]
    section = section[:section.index("</section>")]
    assert "Tool surface since r1" in section
    assert "<del>[-The forecast-]</del>" in section
    assert "<ins>{+Weather+}</ins>" in section
    assert "get_forecast: description:" in text_of(section)


def test_the_junit_report_names_the_changed_tool_description(
        gated: tuple[Path, dict[str, Any], Path]) -> None:
    root = ET.parse(gated[2]).getroot()
    gate = next(s for s in root.iter("testsuite") if s.get("name") == "weather.gate")
    properties = {p.get("name"): p.get("value") for p in gate.iter("property")}
    assert properties["callgate.tool_surface"] == (
        "tool surface: 1 tool(s) with a new description")
    surface = [c for c in gate.iter("testcase")
               if c.get("classname") == "callgate.gate.tool_surface"]
    assert [c.get("name") for c in surface] == ["tool changed: get_forecast"]
    out = surface[0].findtext("system-out") or ""
    assert out.startswith("get_forecast: description: [-The forecast-] {+Weather+}")
    assert "[20 compared case(s) expect it: 0 worse, 0 better]" in out
    assert surface[0].find("failure") is None  # the figures decide; this says what changed
    assert gate.get("tests") == str(len(list(gate.iter("testcase"))))
    assert gate[0].tag == "properties"


def test_a_store_changed_since_the_gate_is_decided_again_with_its_inputs(
        gated: tuple[Path, dict[str, Any], Path], client: TestClient) -> None:
    db, decision, _ = gated
    with Store(db) as store:
        run = store.stored_run(run_id(db))
        assert run is not None
        kept = kept_gated(store, run.id)
        assert kept is not None and kept.key == decision_key(store, run, 2.0, kept.inputs
                                                             .max_excluded)
        # as if the store had changed since: another key, and the default rule's decision
        default, _ = decide_release(store, run)
        assert default.outcome == "regression"  # what the page showed before
        keep_gated(store, run.id, "an older store", kept.inputs, default.model_dump_json())
    assert client.get("/api/gate", params={"model": AGENT, "release": "r2"}).json() == decision
    with Store(db) as store:
        again = kept_gated(store, run_id(db))
        assert again is not None and again.key == kept.key  # kept again under today's key


def test_the_html_report_shows_the_clis_decision_and_the_tool_surface(
        gated: tuple[Path, dict[str, Any], Path]) -> None:
    with Store(gated[0]) as store:
        text = text_of(html_report_text(store, AGENT, "r2", None))
    assert "pass exit 0, vs r1" in text
    assert f"{len(QUARANTINED)} quarantined case(s), out of the gate" in text
    assert "Tool surface since r1" in text and "get_forecast: description:" in text


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()),
                    reason="browser tests need /usr/bin/chromium and /usr/bin/chromedriver")
def test_a_browser_sees_the_gates_decision_and_the_quarantine(
        gated: tuple[Path, dict[str, Any], Path], tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    db = gated[0]
    server = Server(db)
    driver = start_browser(tmp_path / "chromium-profile")
    try:
        driver.get(f"{server.base}/runs/{run_id(db)}")
        ready_page(driver)
        cards = driver.find_element(By.CSS_SELECTOR, ".cards").text
        assert "pass" in cards and "exit 0" in cards
        quarantined = driver.find_element(By.CSS_SELECTOR, "p.quarantined")
        assert quarantined.is_displayed()
        assert quarantined.text.startswith(f"{len(QUARANTINED)} quarantined case(s)")
        surface = driver.find_element(By.ID, "tool-surface")
        assert surface.is_displayed() and "get_forecast: description:" in surface.text
        # on a 390 px phone, the page (its word diffs too) fits without sideways scrolling
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
            "width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": False})
        driver.get(f"{server.base}/runs/{run_id(db)}")
        ready_page(driver)
        scroll, client = driver.execute_script(
            "const e = document.scrollingElement; return [e.scrollWidth, e.clientWidth]")
        assert scroll <= client
    finally:
        driver.quit()
        server.stop()
