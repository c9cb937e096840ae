"""Debian's Chromium driven through Selenium, for the tests that look at the pages: where the
binaries are, a headless browser with its own profile, waiting for a page (and its key
shortcuts) and sending keys."""

from __future__ import annotations

from pathlib import Path

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def start_browser(profile: Path) -> object:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--window-size=1280,1000",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)),
                            options=options)


def ready(browser) -> None:
    """The page has loaded and its shortcuts listen: a key sent earlier would be lost."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30, ignored_exceptions=(WebDriverException,)).until(
        lambda _: browser.execute_script("return document.readyState") == "complete"
        and browser.find_element(By.TAG_NAME, "body").get_attribute("data-keys") == "ready")


def keys(browser, *pressed: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    for key in pressed:
        ActionChains(browser).send_keys(key).perform()


def press(browser, *pressed: str) -> None:
    """Keys that end on another page (a label saved, undo, next): wait for it."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    ready(browser)
    browser.execute_script("window.beforeTheKeys = true;")  # gone once another page loads
    keys(browser, *pressed)
    WebDriverWait(browser, 30, ignored_exceptions=(WebDriverException,)).until(
        lambda _: browser.execute_script("return window.beforeTheKeys === undefined") is True)
    ready(browser)


def ready_page(browser) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30).until(
        lambda _: browser.execute_script("return document.readyState") == "complete")
