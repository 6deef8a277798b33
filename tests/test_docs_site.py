"""The documentation site, looked at in a real browser.

Builds the site with MkDocs in strict mode into a temporary directory, serves it on
127.0.0.1 (``http.server`` on a free port: the search index is fetched over HTTP, which a
``file://`` page cannot do) and opens it in headless Chromium driven by selenium: the pages
render with their title and navigation, the search finds pages, the picture of the checker's
report loads. Needs Debian's ``chromium`` and ``chromium-driver`` (CI installs them); skipped
with the reason when they or the Python packages are missing.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytest.importorskip("mkdocs", reason="mkdocs is not installed (requirements-test.txt)")
pytest.importorskip("selenium", reason="selenium is not installed (requirements-test.txt)")

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as ec  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs chromium and chromedriver (apt-get install chromium chromium-driver)",
)

WAIT_S = 20


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site, built in strict mode from this checkout."""
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, build.stderr
    return out


@pytest.fixture(scope="module")
def base_url(site: Path):
    """``http://127.0.0.1:PORT/`` serving the built site."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(site))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    for arg in ("--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"):
        options.add_argument(arg)
    # Debian's binaries, named: selenium must not look for a browser to download
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


def test_home_page_renders_with_title_and_navigation(browser, base_url):
    browser.get(base_url)
    assert browser.title.startswith("dlbridge")
    assert browser.find_element(By.TAG_NAME, "h1").text == "dlbridge"
    nav = {
        a.get_attribute("textContent").strip()
        for a in browser.find_elements(By.CSS_SELECTOR, "nav.md-nav--primary a")
    }
    for page in (
        "Getting started",
        "NumPy",
        "PyTorch",
        "Copies and read-only memory",
        "Errors",
        "Python API",
    ):
        assert page in nav


def test_search_finds_pages(browser, base_url):
    browser.get(base_url)
    # at this window width the search box sits in the header
    box = WebDriverWait(browser, WAIT_S).until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, "input.md-search__input"))
    )
    box.click()
    box.send_keys("fill_null")
    # the result list is re-rendered as the search index answers, so its links are read in one
    # script call (no element can go stale between finding and reading it) until both pages
    # are among them
    read_links = (
        "return [...document.querySelectorAll('.md-search-result__item a')].map(a => a.href)"
    )

    def both_pages_found(driver):
        links = driver.execute_script(read_links)
        found = any("errors/" in h for h in links) and any("libraries/arrow/" in h for h in links)
        return links if found else False

    links = WebDriverWait(browser, WAIT_S).until(both_pages_found)
    assert any("errors/" in href for href in links), links
    assert any("libraries/arrow/" in href for href in links), links


def test_checker_report_picture_loads(browser, base_url):
    browser.get(base_url + "checker/")
    img = browser.find_element(By.CSS_SELECTOR, "img[src$='check-report.png']")
    WebDriverWait(browser, WAIT_S).until(
        lambda d: d.execute_script("return arguments[0].complete", img)
    )
    assert browser.execute_script("return arguments[0].naturalWidth", img) > 0


def test_api_reference_is_generated_from_the_stubs(browser, base_url):
    browser.get(base_url + "python-api/")
    for anchor in ("dlbridge.from_dlpack", "dlbridge.Tensor.__dlpack__", "dlbridge.DType"):
        assert browser.find_elements(By.ID, anchor), anchor
    text = browser.find_element(By.ID, "dlbridge.from_dlpack").find_element(By.XPATH, "..").text
    assert "zero-copy" in text


@pytest.mark.parametrize(
    "path, title, shows",
    [
        ("troubleshooting/", "Troubleshooting", "Reporting a bug"),
        ("support-matrix/", "Support matrix", "Versions tested"),
        ("changelog/", "Changelog", "Unreleased"),
        # pages that include a file of the repository show the file, not the link to it
        ("contributing/", "Contributing to dlbridge", "A fresh machine"),
        ("check-your-library/", "Check your array library", "class GoodArrayAdapter"),
        ("checker/", "The conformance checker", "Glossary"),
    ],
)
def test_page_renders_with_its_content(browser, base_url, path, title, shows):
    browser.get(base_url + path)
    assert browser.find_element(By.TAG_NAME, "h1").text == title
    text = browser.find_element(By.TAG_NAME, "article").text
    assert shows in text
    assert "<!-- include" not in browser.page_source and "--8<--" not in text
