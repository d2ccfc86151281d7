"""The paper page in headless Chromium on the CACM snapshot: export links for the paper and its connected
papers, and the citation paths to another paper drawn as chains of hops; the search page's export links."""

from __future__ import annotations

import shutil
import threading
import time

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(not CHROMIUM, reason="Debian chromium not installed (apt-get install chromium)")]


@pytest.fixture(scope="module")
def base_url(cacm_snapshot):
    import socket

    import uvicorn

    from pipeline.serve import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(cacm_snapshot), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def page():
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu",
                                                                    "--no-first-run", "--disable-background-networking"])
        yield browser.new_page(viewport={"width": 1366, "height": 860})
        browser.close()


def test_paper_page_exports_and_paths(base_url, page):
    import urllib.request

    page.goto(f"{base_url}/paper?id=cacm:1785")
    page.wait_for_selector("#related li")
    cite = page.locator("#paper a.export[data-format=bibtex]")
    href = cite.get_attribute("href")
    assert "id=cacm%3A1785" in href
    with urllib.request.urlopen(base_url + href, timeout=60) as r:
        assert b"Scatter Storage Techniques" in r.read()
    assert page.locator("#relexport a.export").count() == 3

    page.fill("#path_to", "cacm:1")
    page.click("#pathform button")
    page.wait_for_selector("ol.paths li.hop")
    assert "shortest path(s) of 4 hop(s)" in page.inner_text("#pathstatus")
    first = page.locator("ol.paths > li").first
    assert first.locator("li.hop").count() == 5
    assert "Preliminary Report-International Algebraic Language" in first.inner_text()

    page.fill("#path_to", "cacm:999999")
    page.click("#pathform button")
    page.wait_for_selector("#pathstatus .error")
    assert "unknown paper id" in page.inner_text("#pathstatus")

    page.goto(f"{base_url}/?q=hash+table+storage")
    page.wait_for_selector("#results li")
    assert page.locator("#status a.export").count() == 3
