"""The search page in headless Chromium (Debian's, driven by Playwright; no browser download):
type a query, see results with their signals, open a paper and see its graph drawn.
Screenshots are kept in test-artifacts/ (and copied into docs/ for the README)."""

from __future__ import annotations

from pathlib import Path

import pytest
from live_server import NEEDS_CHROMIUM, chromium_page, served

pytestmark = [pytest.mark.browser, NEEDS_CHROMIUM]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


@pytest.fixture(scope="module")
def base_url(cisi_snapshot):
    with served(cisi_snapshot) as url:
        yield url


@pytest.fixture(scope="module")
def page():
    with chromium_page() as pg:
        yield pg


def test_search_then_paper_graph(base_url, page):
    import json
    import urllib.request

    ARTIFACTS.mkdir(exist_ok=True)
    with urllib.request.urlopen(base_url + "/api/examples", timeout=60) as r:
        examples = json.loads(r.read())
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(base_url + "/")
    assert page.evaluate("document.activeElement.id") == "q"  # the search box has focus on load
    # example queries and placeholders come from the served snapshot (CISI), not another corpus
    page.wait_for_selector("#examples a.example")
    assert page.locator("#q").get_attribute("placeholder") == f"e.g. {examples['queries'][0]}"
    assert page.locator("#examples a.example").all_inner_texts() == examples["queries"]
    assert "cacm" not in page.locator("form.search").inner_html().lower()
    page.evaluate("document.activeElement && document.activeElement.blur()")
    page.keyboard.press("/")  # keyboard: focus the search box
    page.keyboard.type("information retrieval evaluation of search systems")
    page.keyboard.press("Enter")
    page.wait_for_selector("li.result", timeout=60000)
    results = page.locator("li.result")
    assert results.count() >= 1
    first = results.first
    for sig in ("ck", "doc", "abs", "fig", "pr"):
        assert first.locator(f".sig-{sig}").count() == 1
        assert len(first.locator(f".sig-{sig}").get_attribute("title")) > 20  # each chip says what it means
    legend = page.locator("#legend-list dt").all_text_contents()  # the legend below the results says it in words
    assert {"ck", "doc", "abs", "fig", "pr", "bm25", "fused", "rm3", "nbr"} <= set(legend)
    assert "queries used" in page.locator("#status").inner_text()
    assert page.locator("#q").input_value() == "information retrieval evaluation of search systems"
    assert first.locator("a.author").count() >= 1  # authors on every result, linked to their page
    assert page.locator("li.result .passage mark").count() >= 3  # query words marked in the passages
    assert {m.lower()[:5] for m in page.locator("li.result .passage mark").all_inner_texts()} & {"retri", "evalu", "searc", "syste", "infor"}
    page.screenshot(path=str(ARTIFACTS / "search.png"), full_page=False)

    # paging: the next 10, numbered on; sorting by date: newest first
    assert page.locator("#status").inner_text().startswith("Papers 1–10")
    page.click("#pager button.next")
    page.wait_for_selector("#status:has-text('Papers 11–20')", timeout=60000)  # (no wait_for_function: the CSP forbids eval)
    assert "offset=10" in page.url
    page.select_option("#sort", "date")
    page.wait_for_selector("#status:has-text('Papers 1–10')", timeout=60000)
    years = [int(y) for y in page.locator("li.result .year").all_inner_texts()]
    dated = [page.locator("li.result").nth(i).locator(".year").count() for i in range(page.locator("li.result").count())]
    # (few CISI records have a year: the dated ones come first, newest first)
    assert years and years == sorted(years, reverse=True) and dated == sorted(dated, reverse=True), (years, dated)
    first = page.locator("li.result").first

    first.locator("a.title").focus()
    page.keyboard.press("Enter")  # open the paper by keyboard
    page.wait_for_selector("article#paper h1", timeout=60000)
    page.wait_for_selector("#graph circle.node", timeout=60000)
    assert page.locator("#graph circle.node").count() >= 1
    assert page.locator("article#paper").inner_text().count("Abstract") >= 1
    assert page.locator("article#paper a.author").count() >= 1
    cites = page.locator("table.metrics tr", has_text="citation count").locator("td").nth(1).inner_text()
    assert cites.replace(",", "").isdigit(), cites  # an integer, not 19.000
    page.screenshot(path=str(ARTIFACTS / "paper.png"), full_page=False)
    # CISI has no TeX: KaTeX (static/math.js) is never downloaded
    assert requested and not [u for u in requested if "/vendor/katex/" in u]


def test_prices_are_not_taken_for_tex(base_url, page):
    """Dollar signs that are prices stay text (static/math.js follows Pandoc's rule for "$...$"): CISI 188's abstract
    lists salaries "$12,732; ... $10,044; ..."."""
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto(base_url + "/paper?id=cisi:188")
    page.wait_for_selector("article#paper a.author")
    text = " ".join(page.inner_text("article#paper").split())
    assert "at $12,732; for female professionals at $10,044; for male nonprofessionals at $7,878" in text
    assert page.locator(".katex").count() == 0 and not [u for u in requested if "/vendor/katex/" in u]


def test_empty_query_shows_message(base_url, page):
    page.goto(base_url + "/?q=")
    page.evaluate("document.getElementById('q').removeAttribute('required')")
    page.click("button[type=submit]")
    assert "Type a query" in page.locator("#status").inner_text()


def _offline_page(page, base_url, violations: list[str], blocked: list[str]):
    """A fresh page of the same browser that can reach nothing but the server under test, and records
    Content-Security-Policy violations and blocked requests."""
    ctx = page.context.browser.new_context(viewport={"width": 1366, "height": 860})

    def only_local(route):
        if route.request.url.startswith(base_url + "/") or route.request.url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    ctx.route("**/*", only_local)
    pg = ctx.new_page()
    pg.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    return ctx, pg


def test_api_docs_work_offline_under_the_csp(base_url, page):
    violations: list[str] = []
    blocked: list[str] = []
    ctx, pg = _offline_page(page, base_url, violations, blocked)
    try:
        pg.goto(base_url + "/docs")
        pg.wait_for_selector(".swagger-ui .opblock", timeout=60000)  # Swagger UI rendered the operations
        assert "/api/search" in pg.locator(".swagger-ui").inner_text()
        pg.locator(".opblock-summary", has_text="/api/search").first.click()
        pg.wait_for_selector(".opblock.is-open .responses-table", timeout=30000)
        assert "422" in pg.locator(".opblock.is-open .responses-table").first.inner_text()
        ARTIFACTS.mkdir(exist_ok=True)
        pg.screenshot(path=str(ARTIFACTS / "docs.png"), full_page=False)

        pg.goto(base_url + "/redoc")
        pg.wait_for_selector("h1", timeout=60000)  # ReDoc rendered the API's title
        assert "paperkb" in pg.locator("h1").first.inner_text()

        pg.goto(base_url + "/")
        pg.fill("#q", "library classification")
        pg.keyboard.press("Enter")
        pg.wait_for_selector("li.result", timeout=60000)
        pg.locator("li.result a.title").first.click()
        pg.wait_for_selector("#graph circle.node", timeout=60000)
        pg.click("#back")
        pg.wait_for_selector("li.result", timeout=60000)
        assert pg.locator("#q").input_value() == "library classification"
    finally:
        ctx.close()
    # ReDoc's sidebar credit is an <img> from cdn.redoc.ly: the CSP stops it before any request is
    # made (ReDoc hides the image on error). Anything else the policy had to stop is a bug of ours.
    assert not [v for v in violations if "cdn.redoc.ly/redoc/logo-mini.svg" not in v], violations
    assert not blocked, blocked


def test_the_tex_scan_is_linear_in_the_texts_length(base_url, page):
    """Issue 64: static/math.js's scan was quadratic on unclosed "\\(" (60k characters: 266 ms; 240k: seconds). Each
    case here is 240,000 characters without a closed span; the TeX it finds is as before."""
    page.goto(base_url + "/")
    page.wait_for_selector("#q")
    found = page.evaluate("""async () => {
      const { texMatches } = await import("/static/math.js");
      const cases = { parens: "\\\\(".repeat(120000), brackets: "\\\\[".repeat(120000), mixed: "\\\\[\\\\(".repeat(60000),
                      open_paren_text: "\\\\(a".repeat(80000), one_long: "\\\\(" + "a".repeat(239998) };
      const out = {};
      for (const [name, text] of Object.entries(cases)) {
        const t0 = performance.now();
        out[name] = [text.length, texMatches(text).length, performance.now() - t0];
      }
      out.tex = texMatches("$^{11}$Be, $\\\\alpha_s$ and \\\\(a+b\\\\), \\\\[x^2\\\\] at $12,732; for $10,044").map((m) => m[0]);
      return out;
    }""")
    assert found.pop("tex") == ["$^{11}$", "$\\alpha_s$", "\\(a+b\\)", "\\[x^2\\]"]
    for name, (length, spans, ms) in found.items():
        assert length == 240_000 and spans == 0, (name, length, spans)
        assert ms < 1000, (name, ms)  # before: parens ~16 s (quadratic); now a few ms


def test_link_chips_link_http_addresses_only(base_url, page):
    """Issue 64: the link chips put any scheme of Semantic Scholar's openAccessPdf.url into href."""
    page.goto(base_url + "/")
    page.wait_for_selector("#q")
    hrefs = page.evaluate("""async () => {
      const { linkChips } = await import("/static/common.js");
      const box = document.createElement("div");
      box.innerHTML = linkChips({ arxiv: "https://arxiv.org/abs/1706.03762", pdf: "javascript:alert(document.domain)",
                                  doi: "data:text/html,<script>alert(1)</script>", s2: " javascript:alert(2)" })
        + linkChips({ pdf: "HTTP://example.org/x.pdf", doi: "vbscript:x" });
      return [...box.querySelectorAll("a")].map((a) => [a.textContent, a.getAttribute("href")]);
    }""")
    assert hrefs == [["arXiv", "https://arxiv.org/abs/1706.03762"], ["PDF", "HTTP://example.org/x.pdf"]]
