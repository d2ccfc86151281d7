"""The HTTP API's reading endpoints over a CACM snapshot (real citation links): a paper's links and
counts, its references and citing papers page by page, lists of papers, authors, examples, search
paging and sorting, and the connected papers' hover cards and prior / derivative works."""

from __future__ import annotations

import pytest

fastapi = pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from pipeline.serve import create_app  # noqa: E402


@pytest.fixture(scope="module")
def client(cacm_snapshot):
    with TestClient(create_app(cacm_snapshot)) as c:
        yield c


@pytest.fixture(scope="module")
def examples(client):
    r = client.get("/api/examples")
    assert r.status_code == 200, r.text
    return r.json()


def test_examples_name_this_snapshot(examples):
    assert examples["papers"] == 3204 and examples["paper_id"].startswith("cacm:")
    assert len(examples["queries"]) == 3 and examples["author"] and examples["year_min"] == 1958


def test_paper_has_authors_links_counts(client, examples):
    pid = examples["paper_id"]
    p = client.get(f"/api/papers/{pid}").json()
    assert p["authors"] and p["bylines"][0]["name"] == p["authors"][0]
    assert set(p["links"]) == {"arxiv", "pdf", "doi", "s2"}
    assert isinstance(p["metrics"]["citation_count"], int)
    refs = client.get(f"/api/papers/{pid}/references").json()
    cites = client.get(f"/api/papers/{pid}/cited-by", params={"limit": 5}).json()
    assert refs["total"] == p["reference_count"] and cites["total"] == p["cited_by_count"] > 5
    assert len(cites["items"]) == 5 and all(i["paper_id"] and i["title"] for i in cites["items"])
    page2 = client.get(f"/api/papers/{pid}/cited-by", params={"limit": 5, "offset": 5}).json()
    assert not {i["paper_id"] for i in page2["items"]} & {i["paper_id"] for i in cites["items"]}
    assert client.get(f"/api/papers/{pid}/cited-by", params={"sort": "order"}).status_code == 422
    assert client.get("/api/papers/cacm:999999/references").status_code == 404


def test_papers_list_and_author(client, examples):
    r = client.get("/api/papers", params={"sort": "citations", "limit": 5}).json()
    assert r["total"] == 3204 and len(r["items"]) == 5
    counts = [i["citation_count"] for i in r["items"]]
    assert counts == sorted(counts, reverse=True)
    assert client.get("/api/papers", params={"year_from": 1970, "year_to": 1960}).status_code == 400
    a = client.get(f"/api/authors/{examples['author']}").json()
    assert a["paper_count"] >= len(a["papers"]) > 5 and a["years"] and a["name"] == examples["author"]
    assert client.get("/api/authors/Nobody, N.").status_code == 404
    assert "candidates" not in client.get("/api/authors/Nobody, N.").json()
    one = client.get("/api/authors/Dijkstra").json()  # a surname alone: the one author of that name
    assert one["name"] == "Dijkstra, E. W." and one["asked"] == "Dijkstra" and one["paper_count"] > 1
    assert client.get(f"/api/authors/{examples['author']}").json()["asked"] is None
    two = client.get("/api/authors/Perlis")
    assert two.status_code == 404 and two.json()["candidates"] == [{"name": "Perlis, A. J.", "paper_count": 10},
                                                                   {"name": "Perlis, J. A.", "paper_count": 1}]
    assert two.json()["detail"].startswith("'Perlis' names 2 authors")


def test_search_pages_and_sorts(client, examples):
    q = examples["queries"][0]
    first = client.get("/api/search", params={"q": q, "k": 5}).json()
    second = client.get("/api/search", params={"q": q, "k": 5, "offset": 5}).json()
    both = client.get("/api/search", params={"q": q, "k": 10}).json()
    assert first["more"] and [r["paper_id"] for r in first["results"] + second["results"]] == \
        [r["paper_id"] for r in both["results"]]
    assert all(isinstance(r["citation_count"], int) and "links" in r for r in both["results"])
    for sort, key in (("date", "year"), ("citations", "citation_count")):
        res = client.get("/api/search", params={"q": q, "k": 20, "sort": sort}).json()["results"]
        values = [r[key] or 0 for r in res]
        assert len(res) == 20 and values == sorted(values, reverse=True)


def test_related_has_cards_and_prior_derivative_works(client, examples):
    r = client.get(f"/api/papers/{examples['paper_id']}/related", params={"k": 20}).json()
    assert any(i["authors"] for i in r["related"]) and all("links" in i for i in r["related"])
    assert r["prior_works"] and r["derivative_works"]
    assert all(w["count"] >= 2 for w in r["prior_works"] + r["derivative_works"])


def test_a_paper_is_found_by_its_title(client):
    """A title one corpus paper has names it wherever an id is asked for (the searcher's paper, related, paths)."""
    by_id = client.get("/api/papers/cacm:1785").json()
    assert by_id["title"] == "Scatter Storage Techniques"
    for typed in ("Scatter Storage Techniques", "scatter  storage techniques."):
        got = client.get(f"/api/papers/{typed}")
        assert got.status_code == 200 and got.json()["paper_id"] == "cacm:1785", typed
    related = client.get("/api/papers/Scatter Storage Techniques/related", params={"k": 3}).json()
    assert related["paper"]["paper_id"] == "cacm:1785" and len(related["related"]) == 3
    assert client.get("/api/papers/Scatter Storage Techniques, Revisited").status_code == 404


def test_a_search_for_a_pasted_id_puts_that_paper_first(client):
    """A search box gets pasted ids (an arXiv address, a DOI, a corpus id): the results were whatever the text of the
    id matched. The paper comes first now, then the papers its title finds; a bare number stays a text search."""
    got = client.get("/api/search", params={"q": "cacm:1785", "k": 5}).json()
    assert [r["paper_id"] for r in got["results"]][0] == "cacm:1785" and len(got["results"]) == 5
    assert got["query"] == "cacm:1785" and got["queries"][0] == "Scatter Storage Techniques"
    assert any("names the paper cacm:1785" in n for n in got["notes"])
    assert len({r["paper_id"] for r in got["results"]}) == 5  # the paper once, then others
    plain = client.get("/api/search", params={"q": "1785", "k": 5}).json()
    assert plain["queries"][0] == "1785" and not any("names the paper" in n for n in plain["notes"])
    titled = client.get("/api/search", params={"q": "Scatter Storage Techniques", "k": 5}).json()
    assert not any("names the paper" in n for n in titled["notes"])

