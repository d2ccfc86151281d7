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


def test_connected_papers_graph_links_and_clusters_neighbours(base_url, page):
    """The related papers are linked to each other (not a star) and similar ones are drawn together."""
    from pathlib import Path

    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{base_url}/paper?id=cacm:1785")
    page.wait_for_selector("#graph circle.node.center")
    g = page.evaluate("""() => {
        const pos = {};
        for (const c of document.querySelectorAll('#graph circle.node'))
            pos[c.dataset.id] = [+c.getAttribute('cx'), +c.getAttribute('cy'), c.classList.contains('center')];
        const centre = document.querySelector('#graph circle.node.center').dataset.id;
        const edges = [...document.querySelectorAll('#graph line.edge')].map((l) => ({
            s: l.dataset.source, t: l.dataset.target, kind: l.dataset.kind, w: +l.dataset.weight,
            len: Math.hypot(+l.getAttribute('x1') - +l.getAttribute('x2'), +l.getAttribute('y1') - +l.getAttribute('y2'))}));
        return {pos, centre, edges};
    }""")
    assert not errors, errors
    centre, pos, edges = g["centre"], g["pos"], g["edges"]
    assert centre == "cacm:1785" and len(pos) == 21
    inner = [e for e in edges if centre not in (e["s"], e["t"])]
    assert len(inner) > 0 and all(e["kind"] != "related" for e in inner)
    assert {e["kind"] for e in inner} >= {"ccbc", "cosine"}
    assert all(e["s"] in pos and e["t"] in pos and 0 <= e["w"] <= 1 for e in edges)
    # neighbours joined by a strong edge sit closer together than neighbours with no edge between them
    strong = [e["len"] for e in inner if e["w"] >= 0.3]
    linked = {frozenset((e["s"], e["t"])) for e in inner}
    others = [p for p in pos if p != centre]
    apart = [((pos[a][0] - pos[b][0]) ** 2 + (pos[a][1] - pos[b][1]) ** 2) ** 0.5
             for i, a in enumerate(others) for b in others[i + 1:] if frozenset((a, b)) not in linked]
    assert strong and apart
    assert sum(strong) / len(strong) < 0.6 * sum(apart) / len(apart), (strong, apart)

    artifacts = Path(__file__).resolve().parent.parent / "test-artifacts"
    artifacts.mkdir(exist_ok=True)
    top = page.locator("section[aria-label='Connected papers'] h2").bounding_box()
    legend = page.locator("section[aria-label='Connected papers'] .legend").bounding_box()
    page.screenshot(path=str(artifacts / "connected-papers.png"),  # the graph and its legend (docs/)
                    clip={"x": legend["x"] - 8, "y": top["y"] - 8, "width": legend["width"] + 16,
                          "height": legend["y"] + legend["height"] - top["y"] + 16})
