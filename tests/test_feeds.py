"""Interests and feeds (issue 15, item 1) on the real recorded data, as a researcher uses them.

A researcher saves two interests (a saved search with a category filter, a saved search without) and a seed
set imported from a BibTeX library, then the nightly refresh runs twice against a local replay of the
recorded arXiv / Semantic Scholar responses, with new papers in between:

- night 1: the recorded arXivRaw OAI page (6 physics / maths papers) and 4 of the 10 real PDFs;
- night 2: the recorded ``arXiv``-format OAI page (3 hep-th / quant-ph papers) and the other 6 PDFs.

The second snapshot's feeds must list exactly the new papers whose similarity (recomputed here from the
snapshot's own vectors and the embedding model, independently of ``pipeline.feeds.write``) reaches the
threshold; Atom feeds parse with feedparser; the digest is mailed through a real SMTP server (aiosmtpd).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from email import message_from_bytes, policy
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO_ROOT

pytestmark = pytest.mark.slow

NIGHT1_PDFS = ["1409.0473", "1412.6980", "1505.04597", "1410.5401"]
NMT = "attention mechanisms for neural machine translation"
BRANES = "thick branes in Weyl geometry"
LIBRARY = r"""
@article{bahdanau2015,
  title = {Neural Machine Translation by Jointly Learning to Align and Translate},
  author = {Bahdanau, Dzmitry and Cho, Kyunghyun and Bengio, Yoshua},
  year = {2015},
  eprint = {1409.0473},
  archivePrefix = {arXiv}
}
@inproceedings{ronneberger2015,
  title = {{U-Net}: Convolutional Networks for Biomedical Image Segmentation},
  author = {Ronneberger, Olaf and Fischer, Philipp and Brox, Thomas},
  year = {2015}
}
@book{knuth1968,
  title = {The Art of Computer Programming},
  author = {Knuth, Donald E.},
  year = {1968}
}
"""


# ---- the two nights ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def replay(shared_data):
    from pytest_httpserver import HTTPServer
    from werkzeug import Response

    from devtools.replay_server import RecordedServices

    services = RecordedServices.load(shared_data)

    def handler(request):
        reply = services.respond(request.method, request.path, request.query_string.decode(), request.get_data())
        return Response(reply.body, status=reply.status, content_type=reply.content_type)

    server = HTTPServer(host="127.0.0.1", port=0)
    server.expect_request(re.compile(r"/.*")).respond_with_handler(handler)
    server.start()
    yield server.url_for("/").rstrip("/")
    server.clear()
    server.stop()


def _settings(warehouse: Path, base_url: str, cache, **overrides):
    from conftest import isolated_settings
    from devtools.replay_server import service_env

    urls = {k.removeprefix("PAPERKB_").lower(): v for k, v in service_env(base_url).items()}
    return isolated_settings(warehouse, categories=["*"], arxiv_delay_s=0.0, s2_delay_s=0.0, retry_max_backoff_s=0.05,
                             embed_cache_dir=cache, snapshot_min_age_h=0, **urls, **overrides)


@pytest.fixture(scope="module")
def nights(shared_data, replay, tmp_path_factory, request):
    from pipeline.feeds.interests import add_interest
    from pipeline.library.pdf_folder import import_pdfs
    from pipeline.query.filters import Filters
    from pipeline.steps.refresh import run_refresh

    cache = request.config.cache.mkdir("paperkb-vector-cache") if getattr(request.config, "cache", None) else None
    root = tmp_path_factory.mktemp("feeds")
    wh = root / "warehouse"
    pdfs = shared_data / "arxiv" / "pdf"
    s1 = _settings(wh, replay, cache)
    for p in NIGHT1_PDFS:
        import_pdfs(s1, pdfs / f"{p}.pdf")
    library = root / "library.bib"
    library.write_text(LIBRARY, encoding="utf-8")
    add_interest(s1, "nmt", query=NMT)
    add_interest(s1, "branes", query=BRANES, filters=Filters(categories=["hep-th"]))
    seeds = add_interest(s1, "my-library", library=library)
    first = run_refresh(s1)
    for p in sorted(pdfs.glob("*.pdf")):
        if p.stem not in NIGHT1_PDFS:
            import_pdfs(s1, p)
    s2 = _settings(wh, replay, cache, oai_metadata_prefix="arXiv")  # the other recorded OAI page: 3 new papers
    second = run_refresh(s2)
    return {"settings": s2, "seeds": seeds, "first": first["snapshot_id"], "second": second["snapshot_id"], "root": root}


def _catalog_ids(settings, sid: str) -> set[str]:
    from pipeline.snapshots import open_catalog

    con = open_catalog(settings.snapshots_dir / sid)
    try:
        return {r[0] for r in con.execute("SELECT paper_id FROM papers").fetchall()}
    finally:
        con.close()


def _feed(settings, sid: str, name: str) -> dict:
    return json.loads((settings.snapshots_dir / sid / "feeds" / f"{name}.json").read_text(encoding="utf-8"))


def _ids(feed: dict) -> list[str]:
    return [it["_paperkb"]["paper_id"] for it in feed["items"]]


# ---- independent recomputation of "matches" -------------------------------------------------------------------
def _unit(m):
    m = np.asarray(m, dtype=np.float64)
    n = np.linalg.norm(m, axis=-1, keepdims=True)
    return np.divide(m, n, out=np.zeros_like(m), where=n > 0)


class SnapshotVectors:
    """The snapshot's vectors read straight from its LanceDB tables, and its model loaded from the manifest."""

    def __init__(self, folder: Path):
        import lancedb
        from sentence_transformers import SentenceTransformer

        manifest = json.loads((folder / "manifest.json").read_text())
        self.model = SentenceTransformer(manifest["model"]["path"], device="cpu")
        db = lancedb.connect(str(folder / "lancedb"))
        papers = db.open_table("papers").to_arrow().to_pylist()
        self.paper = {r["paper_id"]: _unit(r["doc_vector"] if r["doc_vector"] is not None and np.any(r["doc_vector"])
                                           else r["abs_vector"]) for r in papers}
        self.meta = {r["paper_id"]: r for r in papers}
        self.chunks: dict[str, list[np.ndarray]] = {}
        for r in db.open_table("chunks").to_arrow().select(["paper_id", "section", "vector"]).to_pylist():
            if r["section"] and re.match(r"^\s*([0-9A-Z]{1,3}\.?\s+)?references\s*$", r["section"], re.IGNORECASE):
                continue
            self.chunks.setdefault(r["paper_id"], []).append(_unit(r["vector"]))

    def query_similarity(self, query: str, pid: str) -> float:
        q = _unit(self.model.encode([query], normalize_embeddings=True))[0]
        sims = [float(self.paper[pid] @ q)] + [float(c @ q) for c in self.chunks.get(pid, [])]
        return max(sims)


@pytest.fixture(scope="module")
def vectors(nights):
    return SnapshotVectors(nights["settings"].snapshots_dir / nights["second"])


# ---- the tests ----------------------------------------------------------------------------------------------------
def test_the_seed_set_comes_from_the_library_and_lists_what_matched_nothing(nights):
    seeds = nights["seeds"]
    assert seeds.kind == "seeds"
    assert seeds.seeds == ["1409.0473", "1505.04597"]  # by arXiv eprint, then by title
    assert [(u["key"], u["reason"]) for u in seeds.unmatched] == [("knuth1968", "title not in the catalog")]


def test_the_first_snapshot_has_empty_baseline_feeds(nights):
    s = nights["settings"]
    index = json.loads((s.snapshots_dir / nights["first"] / "feeds" / "index.json").read_text())
    assert index["previous_snapshot_id"] is None
    assert set(index["feeds"]) == {"nmt", "branes", "my-library"}
    for name in index["feeds"]:
        feed = _feed(s, nights["first"], name)
        assert feed["items"] == [] and "first snapshot" in feed["_paperkb"]["notes"][0]


def test_the_second_snapshot_lists_exactly_the_new_matching_papers(nights, vectors):
    s = nights["settings"]
    new = _catalog_ids(s, nights["second"]) - _catalog_ids(s, nights["first"])
    assert len(new) == 9  # 6 PDFs + 3 hep-th records
    index = json.loads((s.snapshots_dir / nights["second"] / "feeds" / "index.json").read_text())
    assert index["previous_snapshot_id"] == nights["first"] and index["new_papers"] == len(new)

    nmt = _feed(s, nights["second"], "nmt")
    want = {p for p in new if vectors.query_similarity(NMT, p) >= s.feed_query_threshold}
    assert set(_ids(nmt)) == want
    assert "1508.04025" in want and "2306.03589" not in want  # attention-based NMT in, graph networks out
    sims = [it["_paperkb"]["similarity"] for it in nmt["items"]]
    assert sims == sorted(sims, reverse=True)
    for it in nmt["items"]:
        assert it["_paperkb"]["similarity"] == pytest.approx(vectors.query_similarity(NMT, it["_paperkb"]["paper_id"]), abs=1e-3)

    branes = _feed(s, nights["second"], "branes")
    hep_th = {p for p in new if "hep-th" in (vectors.meta[p].get("categories") or [])}
    want = {p for p in hep_th if vectors.query_similarity(BRANES, p) >= s.feed_query_threshold}
    assert set(_ids(branes)) == want and want  # the Weyl thick branes paper; the filter keeps the PDFs out
    assert all("brane" in vectors.meta[p]["title"].lower() for p in want)

    lib = _feed(s, nights["second"], "my-library")
    seeds = [vectors.paper[x] for x in nights["seeds"].seeds]
    want = {p for p in new if max(float(v @ vectors.paper[p]) for v in seeds) >= s.feed_seed_threshold}
    # no direct citations between the recorded papers in the replayed S2 data: similarity decides alone
    assert set(_ids(lib)) == want and "1508.04025" in want
    first = next(it for it in lib["items"] if it["_paperkb"]["paper_id"] == "1508.04025")
    assert first["_paperkb"]["seed"] == "1409.0473" and "similar to seed 1409.0473" in first["_paperkb"]["why"]


def test_feeds_parse_with_feedparser_and_follow_json_feed(nights):
    import feedparser

    s = nights["settings"]
    folder = s.snapshots_dir / nights["second"] / "feeds"
    for name in ("nmt", "branes", "my-library"):
        items = _feed(s, nights["second"], name)["items"]
        atom = feedparser.parse((folder / f"{name}.atom").read_bytes())
        assert atom.bozo == 0 and atom.version == "atom10"
        assert [e.id for e in atom.entries] == [it["id"] for it in items]
        assert [e.title for e in atom.entries] == [it["title"] for it in items]
        assert all(e.link.startswith("https://arxiv.org/abs/") for e in atom.entries)
        # feedparser 6 reads no JSON Feed: check the JSON Feed 1.1 rules here
        jf = json.loads((folder / f"{name}.json").read_text())
        assert jf["version"] == "https://jsonfeed.org/version/1.1" and isinstance(jf["title"], str)
        for it in jf["items"]:
            assert isinstance(it["id"], str) and it["id"] and ("content_text" in it or "content_html" in it)
            assert re.match(r"^\d{4}-\d{2}-\d{2}T", it["date_published"])
        md = (folder / f"{name}.md").read_text()
        assert all(it["title"] in md for it in items)


def test_the_snapshot_with_feeds_verifies_and_records_them(nights):
    from pipeline import snapshots

    s = nights["settings"]
    assert snapshots.verify(s.snapshots_dir, nights["second"]) == []
    manifest = snapshots.read_manifest(s.snapshots_dir / nights["second"])
    assert manifest["layout"]["feeds"] == "feeds"
    assert "feeds/nmt.atom" in manifest["files"] and manifest["feeds"]["nmt"] >= 1


def test_a_night_without_new_papers_lists_nothing(nights, replay, tmp_path):
    from pipeline.steps.refresh import run_refresh

    s = nights["settings"]
    third = run_refresh(s)["snapshot_id"]
    index = json.loads((s.snapshots_dir / third / "feeds" / "index.json").read_text())
    assert index["previous_snapshot_id"] == nights["second"] and index["new_papers"] == 0
    assert all(f["matched"] == 0 for f in index["feeds"].values())
    # and CURRENT is this one again for the tests below: roll back to the second
    from pipeline import snapshots

    snapshots.rollback(s.snapshots_dir, nights["second"])


def test_the_digest_is_mailed_once_per_recipient(nights):
    from aiosmtpd.controller import Controller

    from pipeline.feeds.mail import deliver

    got = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            got.append((list(envelope.rcpt_tos), envelope.content))
            return "250 OK"

    from live_server import free_port

    port = free_port()  # not 0: aiosmtpd's controller connects to its own port to start
    ctl = Controller(Handler(), hostname="127.0.0.1", port=port)
    ctl.start()
    try:
        s = nights["settings"].model_copy(update={
            "feed_smtp_host": "127.0.0.1", "feed_smtp_port": port,
            "feed_smtp_starttls": False, "feed_mail_to": ["reader@example.org"]})
        out = deliver(s, nights["second"])
        assert out["sent_to"] == ["reader@example.org"] and out["skipped"] is None
        assert len(got) == 1 and got[0][0] == ["reader@example.org"]
        msg = message_from_bytes(got[0][1], policy=policy.default)
        assert msg["Subject"].startswith("paperkb: ") and nights["second"] in msg["Subject"]
        text = msg.get_body(("plain",)).get_content()
        html = msg.get_body(("html",)).get_content()
        assert "Effective Approaches to Attention-based Neural Machine Translation" in text
        assert "Effective Approaches to Attention-based Neural Machine Translation" in html
        again = deliver(s, nights["second"])  # a retried task
        assert again["sent_to"] == [] and again["skipped"] == "already mailed to every recipient" and len(got) == 1
    finally:
        ctl.stop()
    unreachable = s.model_copy(update={"feed_smtp_port": 1, "feed_mail_to": ["other@example.org"]})
    from pipeline.errors import UserError

    with pytest.raises(UserError, match="could not mail the feed digest through 127.0.0.1:1"):
        deliver(unreachable, nights["second"])


def _cli(settings, *args: str) -> subprocess.CompletedProcess:
    import os

    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "--warehouse", str(settings.warehouse), *args],
                          capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=300)


def test_cli_lists_interests_prints_feeds_and_refuses_bad_input(nights):
    s = nights["settings"]
    out = _cli(s, "interests", "list", "--json")
    assert out.returncode == 0, out.stderr
    assert {i["name"] for i in json.loads(out.stdout)} == {"nmt", "branes", "my-library"}
    out = _cli(s, "feeds", "--snapshot", nights["second"])
    listed = " ".join(out.stdout.split())  # lines wrapped at 80 columns, read as one text
    assert out.returncode == 0 and "nmt" in listed and f"since {nights['first']}" in listed
    out = _cli(s, "feeds", "nmt", "--format", "bibtex", "--snapshot", nights["second"])
    import bibtexparser

    lib = bibtexparser.parse_string(out.stdout)
    assert [e.fields_dict["title"].value for e in lib.entries][0] == _feed(s, nights["second"], "nmt")["items"][0]["title"]
    for args, msg in [
        (("interests", "add", "nmt", "--query", "again"), "interest 'nmt' exists"),
        (("interests", "add", "bad name", "--query", "x"), "interest name 'bad name'"),
        (("interests", "add", "both", "--query", "x", "--seed", "1409.0473"), "give exactly one of"),
        (("interests", "add", "ghost", "--seed", "9999.99999"), "no paper '9999.99999' in the warehouse"),
        (("interests", "add", "lib", "--from", "missing.bib"), "no library file at missing.bib"),
        (("interests", "remove", "nope"), "no interest 'nope'"),
        (("feeds", "nope", "--snapshot", nights["second"]), "no feed 'nope'"),
    ]:
        res = _cli(s, *args)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith("paperkb: error:")]
        assert "Traceback" not in res.stderr and len(errors) == 1 and msg in errors[0], (args, res.stderr)


def test_http_api_serves_each_feed_format(nights):
    from fastapi.testclient import TestClient

    from pipeline.serve.app import create_app

    s = nights["settings"]
    with TestClient(create_app(s, nights["second"])) as c:
        index = c.get("/api/feeds").json()
        assert set(index["feeds"]) == {"nmt", "branes", "my-library"} and index["previous_snapshot_id"] == nights["first"]
        r = c.get("/api/feeds/nmt")
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/feed+json")
        assert r.json() == _feed(s, nights["second"], "nmt")
        r = c.get("/api/feeds/nmt", params={"format": "atom"})
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/atom+xml")
        r = c.get("/api/feeds/my-library", params={"format": "ris"})
        import rispy

        assert [e["id"] for e in rispy.loads(r.text)] == _ids(_feed(s, nights["second"], "my-library"))
        assert c.get("/api/feeds/nope").status_code == 404
        assert c.get("/api/feeds/nmt", params={"format": "pdf"}).status_code == 422
        assert c.get("/feeds").status_code == 200


@pytest.mark.browser
def test_the_feeds_page_lists_each_feeds_papers_with_why(nights):
    from live_server import NEEDS_CHROMIUM, chromium_page, served

    if NEEDS_CHROMIUM.args[0]:
        pytest.skip(NEEDS_CHROMIUM.kwargs["reason"])
    s = nights["settings"]
    errors: list[str] = []
    with served(s) as url, chromium_page() as page:
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}/feeds")
        page.wait_for_selector("section.feed li.feeditem")
        for name in ("nmt", "branes", "my-library"):
            shown = page.locator(f'section[data-feed="{name}"] li.feeditem')
            assert [shown.nth(i).get_attribute("data-paper") for i in range(shown.count())] == _ids(_feed(s, nights["second"], name))
        first = page.locator('section[data-feed="nmt"] li.feeditem').first
        assert "why:" in first.inner_text() and "similarity" in first.inner_text()
        assert page.locator('section[data-feed="nmt"] a.export').count() == 3
        assert page.locator('section[data-feed="nmt"] a.feedlink[data-format=atom]').get_attribute("href") == "/api/feeds/nmt?format=atom"
        assert nights["first"] in page.inner_text("#summary")
        page.screenshot(path=str(REPO_ROOT / "test-artifacts" / "feeds.png"), full_page=False)  # docs/feeds.png
    assert errors == []


def test_pasted_ids_on_this_snapshot_of_real_pdfs_and_records(nights):
    """(Beside the feeds, on the one test snapshot that holds arXiv papers with DOIs and a PDF's cited works.) A
    search for a pasted id puts that paper first; a DOI finds the paper that has it; an arXiv id of a work the papers
    cite, outside the corpus, searches that work's title and says so."""
    from pipeline.query import open_snapshot
    from pipeline.query.search import Searcher

    settings = nights["settings"]
    snap = open_snapshot(settings, nights["second"])
    try:
        searcher = Searcher(snap, settings)
        got = searcher.search("https://arxiv.org/abs/1706.03762v5", k=3, expand="off")
        assert got.results[0].paper_id == "1706.03762" and got.queries == ["Attention Is All You Need"]
        assert searcher.resolve_id("https://doi.org/10.1086/518736") == "0704.1114"  # a DOI from the OAI record
        cited = searcher.search("arXiv:1610.10099", k=3, expand="off")
        assert cited.queries == ["Neural machine translation in linear time"] and cited.results
        assert any("arxiv:1610.10099, a work outside this snapshot's corpus" in n for n in cited.notes)
    finally:
        snap.close()


def test_a_cited_work_outside_the_corpus_has_its_page(nights):
    """(On this snapshot, the one with a PDF's cited works.) A reference outside the corpus was plain text on the page
    and an "unknown paper id" in the API; it has its own page (/work, /api/works/{id}): what the citing papers' reference
    lists print of it, the papers citing it here, the works cited together with it."""
    from fastapi.testclient import TestClient

    from pipeline.serve.app import create_app

    s = nights["settings"]
    with TestClient(create_app(s, nights["second"])) as c:
        r = c.get("/api/works/https://arxiv.org/abs/1610.10099v2")  # any form of its id
        assert r.status_code == 200, r.text
        d = r.json()
        assert d["in_corpus"] is False and d["work"]["work_id"] == "arxiv:1610.10099"
        assert d["work"]["title"] == "Neural machine translation in linear time" and d["work"]["year"] == 2017
        citing = c.get("/api/papers/arxiv:1610.10099/cited-by").json()
        assert d["cited_by_count"] == 1 == citing["total"]
        # where the Transformer's text cites it: its number in the Transformer's numbered reference list
        number = re.match(r"\[(\d+)\]", d["printed"]["items"][0]["raw"]).group(1)
        contexts = citing["items"][0]["contexts"]
        assert contexts and all(number in x["text"][x["marker"][0]:x["marker"][1]] and x["page"] for x in contexts)
        assert [(e["paper_id"], e["title"]) for e in d["printed"]["items"]] == [("1706.03762", "Attention Is All You Need")]
        assert "Neural machine translation in linear time" in d["printed"]["items"][0]["raw"]
        assert d["cited_with"] == {"citing": 1, "items": []}  # one citing paper: nothing is cited "together" yet
        assert c.get("/api/works/1706.03762").json() == {"snapshot_id": nights["second"], "in_corpus": True,
                                                         "paper_id": "1706.03762"}
        assert c.get("/api/works/arXiv:1234.56789").status_code == 404
        # a paper's endpoint says what the id is and where to look
        r = c.get("/api/papers/arXiv:1610.10099")
        assert r.status_code == 404 and "/api/works/arxiv:1610.10099" in r.json()["detail"]
        # a work several of the papers cite: its co-cited works, each counted among its citing papers' references
        w = c.get("/api/works/arXiv:1409.3215").json()
        citers = [i["work_id"] for i in c.get("/api/papers/arXiv:1409.3215/cited-by", params={"limit": 50}).json()["items"]]
        assert w["work"]["title"] == "Sequence to sequence learning with neural networks"
        assert w["cited_with"]["citing"] == len(citers) == w["cited_by_count"] >= 3
        assert {e["paper_id"] for e in w["printed"]["items"]} <= set(citers)
        cited = {ci: {x["work_id"] for x in c.get(f"/api/papers/{ci}/references", params={"limit": 200}).json()["items"]}
                 for ci in citers}
        assert w["cited_with"]["items"]
        for other in w["cited_with"]["items"]:
            assert other["count"] == sum(other["work_id"] in refs for refs in cited.values()) >= 2
            assert other["work_id"] != "arxiv:1409.3215"
        counts = [o["count"] for o in w["cited_with"]["items"]]
        assert counts == sorted(counts, reverse=True)
        assert c.get("/work").status_code == 200
        # a search's best passages: each in-text citation resolved by its paper's reference list
        found = c.get("/api/search", params={"q": "residual connection around each sub-layer followed by layer "
                                                  "normalization", "k": 5}).json()["results"]
        transformer = next(r for r in found if r["paper_id"] == "1706.03762")
        marked = {transformer["excerpt"][m["start"]:m["end"]]: [w["title"] for w in m["works"]]
                  for m in transformer["citations"]}
        assert marked["[1]"] == ["Layer normalization"], marked
        assert marked["[11]"] == ["Deep Residual Learning for Image Recognition"], marked
        for r in found:
            for m in r.get("citations", []):
                assert m["works"] and all(w["title"] and w["raw"] for w in m["works"])


def test_a_search_for_a_cited_works_title_names_the_work(nights):
    """A search for the title of a work the corpus cites but does not hold lists that work, and the others outside the
    corpus whose title the query names, among those the results cite: each counted against the results' own
    reference lists, in the API, `paperkb search` and its JSON."""
    from fastapi.testclient import TestClient

    from pipeline.query.titles import names_title
    from pipeline.serve.app import create_app

    s = nights["settings"]
    with TestClient(create_app(s, nights["second"])) as c:
        d = c.get("/api/search", params={"q": "sequence to sequence learning", "k": 10}).json()
        seq2seq = c.get("/api/works/arxiv:1409.3215").json()
        named = d["cited_works"]
        assert named[0]["work_id"] == "arxiv:1409.3215" and named[0]["title"] == seq2seq["work"]["title"]
        assert named[0]["cited_here"] == seq2seq["cited_by_count"] >= 3 and named[0]["authors"][0] == "I. Sutskever"
        refs = {r["paper_id"]: {x["work_id"] for x in c.get(f"/api/papers/{r['paper_id']}/references",
                                                            params={"limit": 200}).json()["items"]}
                for r in d["results"]}
        assert 1 < len(named) <= 3
        for w in named:
            assert w["paper_id"] is None and w["match"] > 0
            assert w["match"] == pytest.approx(names_title(d["query"], w["title"]), abs=1e-4)
            assert w["cited_by_results"] == sum(w["work_id"] in mine for mine in refs.values()) >= 1
            assert c.get(f"/api/works/{w['work_id']}").json()["cited_by_count"] == w["cited_here"]
        # the title named whole comes first; a query naming no cited title lists none; a one-word query none
        whole = c.get("/api/search", params={"q": "Layer Normalization", "k": 10}).json()["cited_works"]
        assert [(w["work_id"], w["match"]) for w in whole][:1] == [("arxiv:1607.06450", 1.0)]
        assert c.get("/api/search", params={"q": "neural networks", "k": 10}).json()["cited_works"] == []
        assert c.get("/api/search", params={"q": "normalization", "k": 10}).json()["cited_works"] == []
        second = c.get("/api/search", params={"q": "sequence to sequence learning", "k": 2, "offset": 2}).json()
        assert second["results"] and second["cited_works"] == []  # the first page's answer, not repeated
    out = _cli(s, "search", "sequence to sequence learning", "-k", "10")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    tail = out.stdout[out.stdout.index("cited works the query names"):]
    assert "arxiv:1409.3215" in tail and f"cited by {named[0]['cited_here']} papers here" in tail
    assert "Sutskever et al., 2014" in tail and max(len(x) for x in out.stdout.splitlines()) <= 80
    out = _cli(s, "search", "sequence to sequence learning", "-k", "10", "--json")
    assert [w["work_id"] for w in json.loads(out.stdout)["cited_works"]] == [w["work_id"] for w in named]


@pytest.mark.browser
def test_the_page_of_a_cited_work_outside_the_corpus(nights):
    from live_server import NEEDS_CHROMIUM, chromium_page, served

    if NEEDS_CHROMIUM.args[0]:
        pytest.skip(NEEDS_CHROMIUM.kwargs["reason"])
    errors: list[str] = []
    with served(nights["settings"]) as url, chromium_page() as page:
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}/paper?id=1706.03762")
        page.wait_for_selector("#refs li")
        # a reference outside the corpus links to its page now
        outside = page.locator("#refs li", has=page.locator(".outside")).first
        title = outside.locator("a.title.work").inner_text()
        outside.locator("a.title.work").click()
        page.wait_for_selector("#cites li")
        assert page.url.startswith(f"{url}/work?id=") and page.inner_text("#work h1") == title
        assert page.inner_text("#cites-title") == "Cited by (1)" and "Attention Is All You Need" in page.inner_text("#cites")
        assert page.locator("#cites ul.contexts q mark").first.inner_text().startswith("[")  # where it is cited
        assert re.fullmatch(r"\d+ mentions?", page.locator("#cites .mentions").first.inner_text())
        assert page.inner_text("#printed-title") == "As printed (1)" and "Attention Is All You Need" in page.inner_text("#printed")
        assert page.is_hidden("#refs-section") and "fewer than two" in page.inner_text("#with-note")
        # a cited work's id typed in the paper page's address goes to the work's page
        page.goto(f"{url}/paper?id=arXiv:1409.3215")
        page.wait_for_url("**/work?id=**")
        page.wait_for_selector("#with li")
        assert page.inner_text("#work h1") == "Sequence to sequence learning with neural networks"
        assert page.locator("#with li .count").count() >= 1 and page.locator("#printed li").count() >= 3
        assert page.locator("#work a.export").count() == 3
        page.screenshot(path=str(REPO_ROOT / "test-artifacts" / "work.png"), full_page=False)
        # on the search page, a best passage's citation links to the work it cites, its title in the tooltip
        page.goto(f"{url}/?q=residual+connection+around+each+sub-layer+followed+by+layer+normalization")
        cite = page.locator("li.result a.cite", has_text="[1]").first
        cite.wait_for()
        assert cite.get_attribute("title") == "Layer normalization (2016)"
        cite.click()
        page.wait_for_selector("#work h1")
        assert page.inner_text("#work h1") == "Layer normalization"
        # a search for a cited work's title: the work above the results, linked to its page
        page.goto(f"{url}/?q=sequence+to+sequence+learning+with+neural+networks")
        page.wait_for_selector("#named li")
        first = page.locator("#named li").first
        assert first.locator("a.title.work").inner_text() == "Sequence to sequence learning with neural networks"
        assert re.search(r"cited by [3-9] papers here", first.inner_text())
        page.screenshot(path=str(REPO_ROOT / "test-artifacts" / "search-named.png"), full_page=False)
        first.locator("a.title.work").click()
        page.wait_for_selector("#work h1")
        assert page.inner_text("#work h1") == "Sequence to sequence learning with neural networks"
        page.goto(f"{url}/?q=neural+networks")
        page.wait_for_selector("li.result")
        assert page.is_hidden("#named")
    assert errors == []


def test_tex_in_a_title_and_abstract_is_typeset(nights):
    """arXiv's titles and abstracts carry TeX (0704.1586: "... breakup of $^{11}$Be on protons", in the recorded OAI
    page): the paper page and the search results typeset it with the vendored KaTeX, every request answered by this
    server (its fonts too), and copying the typeset title copies its TeX."""
    from live_server import NEEDS_CHROMIUM, chromium_page, served

    if NEEDS_CHROMIUM.args[0]:
        pytest.skip(NEEDS_CHROMIUM.kwargs["reason"])
    errors: list[str] = []
    answered: list[tuple[int, str]] = []
    with served(nights["settings"]) as url, chromium_page() as page:
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type in ("error", "warning") else None)
        page.on("response", lambda r: answered.append((r.status, r.url)))
        page.goto(f"{url}/paper?id=0704.1586")
        page.wait_for_selector("article#paper h1 .katex")
        page.wait_for_selector("article#paper p .katex")  # the abstract's "$^{11}$Be" too
        h1 = page.locator("article#paper h1")
        assert h1.locator(".katex annotation").all_text_contents() == ["^{11}"]  # KaTeX's MathML keeps the TeX
        assert h1.locator(".katex-html").inner_text() == "11" and "$" not in h1.inner_text()
        assert h1.locator(".katex-html .msupsub").count() == 1  # set as a superscript
        copied = page.evaluate("""() => {
            const h1 = document.querySelector("article#paper h1"), range = document.createRange();
            range.selectNodeContents(h1);
            getSelection().removeAllRanges(); getSelection().addRange(range);
            const data = new DataTransfer();
            h1.dispatchEvent(new ClipboardEvent("copy", {clipboardData: data, bubbles: true, cancelable: true}));
            return data.getData("text/plain");
        }""")
        assert copied == "Core excitation in the elastic scattering and breakup of $^{11}$Be on protons"
        page.screenshot(path=str(REPO_ROOT / "test-artifacts" / "paper-tex.png"), full_page=False)
        page.goto(f"{url}/?q=elastic+scattering+breakup+protons")
        first = page.locator("li.result").first
        first.locator("a.title .katex").wait_for()
        assert first.locator("a.title").get_attribute("href").endswith("0704.1586")
        assert first.locator("a.title .katex annotation").all_text_contents() == ["^{11}"]
    assert errors == []
    assert all(u.startswith(url) for _, u in answered) and all(s < 400 for s, _ in answered), answered
    assert any(u.endswith(".woff2") for _, u in answered)  # KaTeX's fonts, from the vendored copy
