"""Recommendations on the page, in headless Chromium on the CACM snapshot (real citations): two papers
liked on the search page and on a paper page, the recommendations page shows the API's papers in the
API's order with their reasons and export links; a bad seed shows the API's one-line error."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from live_server import NEEDS_CHROMIUM, chromium_page, served

pytestmark = [pytest.mark.browser, pytest.mark.slow, NEEDS_CHROMIUM]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


@pytest.fixture(scope="module")
def base_url(cacm_snapshot):
    with served(cacm_snapshot) as url:
        yield url


@pytest.fixture(scope="module")
def page():
    with chromium_page() as pg:
        yield pg


def _api(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=120) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_like_two_papers_then_recommendations_with_reasons(base_url, page):
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "Failed to load resource" not in m.text else None)
    page.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 and not r.url.endswith("/favicon.ico") else None)

    # seed 1: "+ like" on a search result
    page.goto(f"{base_url}/?q=hash+table+storage")
    page.wait_for_selector("#results li.result")
    page.wait_for_load_state("networkidle")  # the example queries and the snapshot line too: no layout left to move
    first = page.locator("#results li.result").first
    like = first.locator("button.seed-pos")
    first_id = like.get_attribute("data-seed")
    like.click()
    assert like.get_attribute("aria-pressed") == "true"
    assert "1 liked" in page.inner_text("#basket")

    # seed 2: "+ like" on a paper page (cacm:1 is not among the hash-table results)
    page.goto(f"{base_url}/paper?id=cacm:1")
    page.wait_for_selector("#paper h1")
    page.click("#paper button.seed-pos")
    assert "2 liked" in page.inner_text("#basket")
    assert first_id != "cacm:1"

    # the recommendations page shows what the API answers for these seeds, in the same order
    page.click("#basket")
    page.wait_for_selector("#recs li.rec")
    seeds = page.locator("#pos li").evaluate_all("(els) => els.map((e) => e.dataset.id)")
    assert seeds == [first_id, "cacm:1"]
    assert page.url.endswith("/recommend?pos=" + urllib.request.quote(f"{first_id},cacm:1", safe=""))
    status, api = _api(f"{base_url}/api/recommend?pos={first_id},cacm:1&k=20")
    assert status == 200 and api["results"]
    shown = page.locator("#recs li.rec").evaluate_all("""(els) => els.map((e) => ({
        id: e.dataset.id, why: e.querySelector('.whytext').textContent,
        nearest: e.querySelector('.nearest') && e.querySelector('.nearest').dataset.seed,
        sim: e.querySelector('.nearest') && +e.querySelector('.nearest').dataset.similarity,
        links: [...e.querySelectorAll('ul.links li')].map((l) => [l.dataset.seed, l.textContent.replace(/\\s+/g, ' ')])}))""")
    assert [s["id"] for s in shown] == [r["paper_id"] for r in api["results"]]
    for s, r in zip(shown, api["results"]):
        assert s["why"] == r["why"] and s["why"]
        assert (s["nearest"], s["sim"]) == (r["nearest_seed"], pytest.approx(r["nearest_similarity"]))
        assert [ln[0] for ln in s["links"]] == [ln["seed"] for ln in r["links"]]
        for (_, text), ln in zip(s["links"], r["links"]):
            if ln["shared_references"]:
                assert f"{ln['shared_references']} shared reference" in text and all(i in text for i in ln["reference_ids"])
            if ln["shared_citers"]:
                assert f"{ln['shared_citers']} shared citer" in text and all(i in text for i in ln["citer_ids"])
            assert ("cites it" in text) == ln["cites"]
    # real graph reasons on CACM: some results share references or citers with a seed, or cite it
    assert any(ln["shared_references"] or ln["shared_citers"] or ln["cites"] or ln["cited_by"]
               for r in api["results"] for ln in r["links"])
    assert all(s not in [r["id"] for r in shown] for s in seeds)  # seeds are never recommended
    href = page.locator("#status a.export[data-format=bibtex]").get_attribute("href")
    assert href.count("id=") == len(shown)
    with urllib.request.urlopen(base_url + href, timeout=60) as r:
        assert r.read().count(b"@") == len(shown)

    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "recommend.png"), full_page=False)

    # "− unlike" on a recommended paper: it becomes a negative seed, and the list is asked again
    top = page.locator("#recs li.rec").first
    neg_id = top.get_attribute("data-id")
    top.locator("button.seed-neg").click()
    page.wait_for_function(f"() => document.querySelector('#recs li.rec') && "
                           f"document.querySelector('#recs li.rec').dataset.id !== {json.dumps(neg_id)}")
    assert page.locator("#neg li").evaluate_all("(els) => els.map((e) => e.dataset.id)") == [neg_id]
    status, api2 = _api(f"{base_url}/api/recommend?pos={first_id},cacm:1&neg={neg_id}&k=20")
    page.wait_for_function("() => !document.getElementById('status').textContent.includes('Recommending')")
    assert page.locator("#recs li.rec").evaluate_all("(els) => els.map((e) => e.dataset.id)") == \
        [r["paper_id"] for r in api2["results"]]

    assert not errors, errors  # no failed request, no script error (the unknown id below is a 404)

    # bad input: an unknown paper id added as a seed shows the API's one-line error
    page.fill("#seed_id", "cacm:999999")
    page.click("#addseed button[type=submit]")
    page.wait_for_selector("#status .error")
    status, err = _api(f"{base_url}/api/recommend?pos={first_id},cacm:1,cacm:999999&neg={neg_id}")
    assert status == 404 and page.inner_text("#status .error") == err["detail"]
    assert page.locator("#recs li").count() == 0

    # a shared link opens with its seeds; clearing them says how to add some
    page.goto(f"{base_url}/recommend?pos=cacm:1785")
    page.wait_for_selector("#recs li.rec")
    assert page.locator("#pos li").evaluate_all("(els) => els.map((e) => e.dataset.id)") == ["cacm:1785"]
    page.click("#clear")
    assert "No seeds yet" in page.inner_text("#status") and page.locator("#recs li").count() == 0
