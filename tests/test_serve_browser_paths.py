"""The paper page in headless Chromium on the CACM snapshot: export links for the paper and its connected
papers, and the citation paths to another paper drawn as chains of hops; the search page's export links."""

from __future__ import annotations

import pytest
from live_server import NEEDS_CHROMIUM, chromium_page, served

pytestmark = [pytest.mark.browser, pytest.mark.slow, NEEDS_CHROMIUM]


@pytest.fixture(scope="module")
def base_url(cacm_snapshot):
    with served(cacm_snapshot) as url:
        yield url


@pytest.fixture(scope="module")
def page():
    with chromium_page() as pg:
        yield pg


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
