"""The search page over several indexes (PAPERKB_SERVE_SNAPSHOTS), in headless Chromium: each result names its
index; only the first index's results link to its paper pages."""

from __future__ import annotations

import pytest
from live_server import NEEDS_CHROMIUM, chromium_page, served

pytestmark = [pytest.mark.browser, NEEDS_CHROMIUM]


def test_page_names_each_results_index(cisi_snapshot, cranfield_snapshot):
    from pipeline import snapshots

    specs = f"cisi={snapshots.resolve(cisi_snapshot)},cran={cranfield_snapshot.warehouse}"
    with served(cisi_snapshot.model_copy(update={"serve_snapshots": specs})) as url, chromium_page() as page:
        page.goto(url + "/?q=" + "heat transfer in hypersonic boundary layers")
        page.wait_for_selector("li.result", timeout=60000)
        first = page.locator("li.result").first
        assert first.locator(".index").inner_text() == "cran"
        assert first.locator("a.title").count() == 0  # a Cranfield paper: no paper page on this server
        page.goto(url + "/?q=" + "library catalogue classification schemes")
        page.wait_for_selector("li.result", timeout=60000)  # a new document: the results of this query
        first = page.locator("li.result").first
        assert first.locator(".index").inner_text() == "cisi"
        assert first.locator("a.title").get_attribute("href").startswith("/paper?id=cisi%3A")
