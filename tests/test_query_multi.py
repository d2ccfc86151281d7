"""Several indexes, one ranking (pipeline.query.multi): the pure merging on hand-made results, then the
MultiSearcher, the CLI and eval on real CISI and Cranfield snapshots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.errors import UserError
from pipeline.query.multi import (NORMALISATIONS, IndexAnswer, index_names, merge, normalise, paper_keys, run_docid,
                                  split_spec, title_key)
from pipeline.query.results import Result


def res(pid: str, score: float, title: str | None = None, ext: str | None = None) -> Result:
    return Result(paper_id=pid, external_id=ext, title=title or f"paper {pid} about something", authors=[], year=None,
                  score=score, signals={"ck": score}, passage="")


# ---- pure pieces ---------------------------------------------------------------------------------------
def test_normalise_each_method():
    s = [3.0, 2.0, 1.0]
    assert normalise(s, "raw") == s
    assert normalise(s, "minmax") == [1.0, 0.5, 0.0]
    z = normalise(s, "zscore")
    assert z[1] == 0.0 and z[0] == pytest.approx(-z[2]) and z[0] > 0
    assert normalise(s, "rrf") == [1 / 61, 1 / 62, 1 / 63]
    assert normalise([2.0, 2.0], "minmax") == [1.0, 1.0] and normalise([2.0, 2.0], "zscore") == [0.0, 0.0]
    for m in NORMALISATIONS:
        assert normalise([], m) == []
    with pytest.raises(UserError, match="unknown normalisation"):
        normalise(s, "softmax")


def test_title_key_and_paper_keys():
    assert title_key("Attention Is All You Need!") == title_key("attention is all you need") == "attentionisallyouneed"
    assert title_key("Caf\u00e9 R\u00e9sum\u00e9 Retrieval") == "caferesumeretrieval"
    assert title_key("Introduction") == ""  # too short to identify a paper
    assert paper_keys("1706.03762", "Attention Is All You Need", "10.5555/ABC") == {
        "id:1706.03762", "doi:10.5555/abc", "title:attentionisallyouneed"}
    assert paper_keys("local:ab", None, "") == {"id:local:ab"}


def test_merge_orders_by_normalised_score_and_names_indexes():
    a = IndexAnswer("arxiv", [res("a1", 0.9), res("a2", 0.5)])
    b = IndexAnswer("library", [res("b1", 0.7), res("b2", 0.6)])
    out = merge([a, b], k=3, method="raw")
    assert [(r.paper_id, r.index, r.rank) for r in out] == [("a1", "arxiv", 1), ("b1", "library", 2), ("b2", "library", 3)]
    assert "index_score" not in out[0].signals
    # minmax: each index's best gets 1 (ties: the first index first), its worst 0
    out = merge([a, b], k=4, method="minmax")
    assert [r.paper_id for r in out] == ["a1", "b1", "a2", "b2"]
    assert [r.score for r in out] == [1.0, 1.0, 0.0, 0.0]
    assert out[0].signals["index_score"] == 0.9
    assert a.results[0].index is None and a.results[0].rank == 0  # the inputs are left as they were


def test_merge_shows_a_paper_once_by_id_doi_or_title():
    same_id = [IndexAnswer("x", [res("1706.03762", 0.9)]), IndexAnswer("y", [res("1706.03762", 0.95)])]
    out = merge(same_id, k=10)
    assert [(r.index, r.also_in) for r in out] == [("y", ["x"])]  # the better-scored copy is kept
    by_doi = [IndexAnswer("x", [res("p", 0.9)], {"p": "10.1/a"}), IndexAnswer("y", [res("local:q", 0.8)], {"local:q": "10.1/a"})]
    assert [(r.paper_id, r.also_in) for r in merge(by_doi, k=10)] == [("p", ["y"])]
    by_title = [IndexAnswer("x", [res("p", 0.9, "Deep Residual Learning for Image Recognition")]),
                IndexAnswer("y", [res("local:q", 0.8, "Deep residual learning for image recognition.")])]
    assert [r.paper_id for r in merge(by_title, k=10)] == ["p"]
    # within one index, two papers of the same title stay two papers
    one = [IndexAnswer("x", [res("p", 0.9, "Editorial on Retrieval Matters"), res("q", 0.8, "Editorial on Retrieval Matters")])]
    assert [r.paper_id for r in merge(one, k=10)] == ["p", "q"]
    # a duplicate below the cut still names its index on the kept result
    deep = [IndexAnswer("x", [res("p", 0.9), res("z", 0.1)]), IndexAnswer("y", [res("w", 0.5), res("p", 0.05)])]
    out = merge(deep, k=2)
    assert [(r.paper_id, r.also_in) for r in out] == [("p", ["y"]), ("w", None)]


def test_run_docid_and_names():
    r = res("cisi:12", 1.0, ext="12")
    assert run_docid(r) == "12"
    r.index = "cran"
    assert run_docid(r, "cisi") == "cran:12" and run_docid(r, "cran") == "12"
    assert index_names([(None, "wh"), (None, "wh"), ("lib", "x")]) == ["wh", "wh-2", "lib"]
    with pytest.raises(UserError, match="named 'a'"):
        index_names([("a", "x"), ("a", "y")])
    assert split_spec("lib=/data/lib") == ("lib", "/data/lib")
    assert split_spec("/data/lib") == (None, "/data/lib")
    assert split_spec("20260101T000000Z") == (None, "20260101T000000Z")


# ---- real snapshots ------------------------------------------------------------------------------------
def _snapshot_dir(settings):
    from pipeline import snapshots

    return snapshots.resolve(settings)


def _live_leases(snapshot: Path) -> set[Path]:
    """The lease files that pin ``snapshot`` now. Other tests' readers may still hold (or, when the garbage
    collector frees them, drop) their own pins on these shared snapshots, so tests compare lease sets."""
    from pipeline import pins

    return {lease.path for lease in pins.leases(snapshot.parent, snapshot.name) if lease.stale_reason() is None}


def test_merged_search_over_cisi_and_cranfield(cisi_snapshot, cranfield_snapshot):
    from pipeline.query.multi import open_multi

    cisi, cran = _snapshot_dir(cisi_snapshot), _snapshot_dir(cranfield_snapshot)
    before = {p: _live_leases(p) for p in (cisi, cran)}
    with open_multi(cisi_snapshot, [f"cisi={cisi}", str(cranfield_snapshot.warehouse)]) as ms:
        assert ms.names == ["cisi", "warehouse"]
        # each index holds its own pin while it is open
        ours = {p: _live_leases(p) - before[p] for p in (cisi, cran)}
        assert {p: len(new) for p, new in ours.items()} == {cisi: 1, cran: 1}
        # one query encoder for both (same model): the second shares the first's
        assert ms.searchers[1].shares_encoder_with is ms.searchers[0]
        resp = ms.search("library catalogue classification schemes", k=40)
        assert [r.index for r in resp.results[:5]] == ["cisi"] * 5  # a library-science query: CISI's papers first
        assert all(r.paper_id.startswith("cisi:") == (r.index == "cisi") for r in resp.results)
        assert [r.rank for r in resp.results] == list(range(1, len(resp.results) + 1))
        scores = [r.score for r in resp.results]
        assert scores == sorted(scores, reverse=True)
        d = resp.to_dict()
        assert d["snapshot_id"] == f"{cisi.name}+{cran.name}" and d["normalisation"] == "raw"
        assert [ix["index"] for ix in d["indexes"]] == ["cisi", "warehouse"]
        assert all("index" in r and "also_in" in r for r in d["results"])
        # an aeronautics query ranks Cranfield's papers first
        top = ms.search("heat transfer in hypersonic boundary layers", k=5)
        assert [r.index for r in top.results] == ["warehouse"] * 5
    assert all(not (new & _live_leases(p)) for p, new in ours.items())  # unpinned on close


def test_same_collection_twice_shows_each_paper_once(cisi_snapshot):
    from pipeline.query.multi import open_multi

    cisi = _snapshot_dir(cisi_snapshot)
    with open_multi(cisi_snapshot, [f"a={cisi}", f"b={cisi}"], normalisation="minmax") as ms:
        resp = ms.search("the use of citation indexes in science", k=20)
        ids = [r.paper_id for r in resp.results]
        assert len(ids) == 20 and len(set(ids)) == 20
        assert all(r.also_in == ["b"] and r.index == "a" for r in resp.results)


def test_cli_one_snapshot_unchanged_and_several(cisi_snapshot, cranfield_snapshot, capsys):
    from pipeline.cli import main
    from pipeline.query import Searcher, open_snapshot

    def run(*args):
        code = main(["--warehouse", str(cisi_snapshot.warehouse), "search", *args])
        out = capsys.readouterr()
        assert code == 0, out.err
        return out.out

    q = "computerized information retrieval systems"
    one = json.loads(run(q, "--json", "-k", "5", "--snapshot", _snapshot_dir(cisi_snapshot).name))
    with Searcher(open_snapshot(cisi_snapshot), cisi_snapshot, one_shot=True) as s:  # as the CLI opens it
        direct = s.search(q, k=5).to_dict()
    for d in (one, direct):
        d.pop("took_ms")
    assert one.pop("cited_works") == []  # (the CLI's: CISI's works are its papers, none outside to name)
    assert one == direct  # the same answer, field for field: no index fields
    assert "indexes" not in one and all("index" not in r for r in one["results"])
    both = json.loads(run(q, "--json", "-k", "5", "--snapshot", f"cisi={_snapshot_dir(cisi_snapshot)}",
                          "--snapshot", f"cran={cranfield_snapshot.warehouse}", "--normalisation", "zscore"))
    assert [ix["index"] for ix in both["indexes"]] == ["cisi", "cran"] and both["normalisation"] == "zscore"
    assert all(r["index"] in ("cisi", "cran") for r in both["results"]) and len(both["results"]) == 5
    table = run(q, "-k", "3", "--snapshot", f"cisi={_snapshot_dir(cisi_snapshot)}", "--snapshot", f"cran={cranfield_snapshot.warehouse}")
    assert "[cisi] cisi:" in table and "indexes cisi, cran" in table


def test_cli_bad_multi_arguments(cisi_snapshot, capsys):
    from pipeline.cli import main

    for args, msg in ((["--normalisation", "minmax"], "needs several --snapshot"),
                      (["--snapshot", "a=/nowhere", "--snapshot", "b=/nowhere"], "not a snapshot id"),
                      (["--snapshot", f"a={cisi_snapshot.warehouse}", "--snapshot", f"a={cisi_snapshot.warehouse}"],
                       "named 'a'"),
                      (["--snapshot", str(cisi_snapshot.warehouse), "--snapshot", str(cisi_snapshot.warehouse),
                        "--normalisation", "softmax"], "unknown normalisation")):
        assert main(["--warehouse", str(cisi_snapshot.warehouse), "search", "citation", *args]) == 2
        err = capsys.readouterr().err
        assert msg in err and len(err.strip().splitlines()) == 1, err


def test_serve_searches_several_snapshots(cisi_snapshot, cranfield_snapshot):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from pipeline.serve import create_app

    cisi, cran = _snapshot_dir(cisi_snapshot), _snapshot_dir(cranfield_snapshot)
    before = _live_leases(cran)
    specs = [f"cisi={cisi}", f"cran={cranfield_snapshot.warehouse}"]  # a pinned folder, a warehouse's CURRENT
    with TestClient(create_app(cisi_snapshot, snapshots=specs)) as c:
        ours = _live_leases(cran) - before
        assert len(ours) == 1  # the second index is pinned too
        d = c.get("/api/search", params={"q": "heat transfer in hypersonic boundary layers", "k": 5}).json()
        assert d["snapshot_id"] == f"{cisi.name}+{cran.name}" and d["normalisation"] == "raw"
        assert [ix["index"] for ix in d["indexes"]] == ["cisi", "cran"]
        assert [r["index"] for r in d["results"]] == ["cran"] * 5
        d = c.get("/api/search", params={"q": "library catalogue classification schemes", "k": 5}).json()
        assert [r["index"] for r in d["results"]] == ["cisi"] * 5
        # each result's card comes from its own index's catalog
        assert all("citation_count" in r for r in d["results"])
        assert c.get("/api/health").json()["snapshot_id"] == cisi.name  # the first index answers the rest
        assert c.get("/api/papers/cisi:1").status_code == 200
        page = c.get("/static/search.js").text
        assert "r.index" in page
    assert not (ours & _live_leases(cran))


def test_mcp_search_spans_several_snapshots(cisi_snapshot, cranfield_snapshot):
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client

    from pipeline.agents.server import build_server

    cisi, cran = _snapshot_dir(cisi_snapshot), _snapshot_dir(cranfield_snapshot)
    settings = cisi_snapshot.model_copy(update={"serve_snapshots": f"cisi={cisi},cran={cranfield_snapshot.warehouse}"})

    async def scenario():
        async with Client(build_server(settings)) as c:
            d = (await c.call_tool("search", {"query": "heat transfer in hypersonic boundary layers", "k": 3})).structured_content
            assert d["snapshot_id"] == f"{cisi.name}+{cran.name}"
            assert [ix["index"] for ix in d["indexes"]] == ["cisi", "cran"]
            assert [h["index"] for h in d["results"]] == ["cran"] * 3
            d = (await c.call_tool("search", {"query": "library catalogue classification schemes", "k": 3})).structured_content
            assert [h["index"] for h in d["results"]] == ["cisi"] * 3
            paper = (await c.call_tool("get_paper", {"paper_id": d["results"][0]["paper_id"]})).structured_content
            assert paper["snapshot_id"] == cisi.name  # the other tools read the first index

    anyio.run(scenario)


def test_eval_scores_the_merged_ranking(cisi_snapshot, cranfield_snapshot, shared_data, tmp_path, capsys):
    """`paperkb eval` over CISI and Cranfield: the qrels judge CISI's papers, Cranfield's are in the run under
    their index's name (never judged), and CISI's nDCG@10 stays within 0.01 of CISI alone (the target)."""
    from pipeline.cli import main

    cisi = shared_data / "collections" / "cisi"

    def run(*args):
        code = main(["--warehouse", str(cisi_snapshot.warehouse), "eval", "--queries", str(cisi / "CISI.QRY"),
                     "--qrels", str(cisi / "CISI.REL"), "--json", *args])
        out = capsys.readouterr()
        assert code == 0, out.err
        return json.loads(out.out)

    alone = run("--run-dir", str(tmp_path / "alone"))
    both = run("--snapshot", f"cisi={_snapshot_dir(cisi_snapshot)}", "--snapshot", f"cran={cranfield_snapshot.warehouse}",
               "--run-dir", str(tmp_path / "both"))
    assert [ix["index"] for ix in both["indexes"]] == ["cisi", "cran"] and both["normalisation"] == "raw"
    default = {s["snapshot_id"]: next(r for r in s["rows"] if r["name"] == "default")["measures"]["nDCG@10"]
               for s in (alone, both)}
    assert abs(default[both["snapshot_id"]] - default[alone["snapshot_id"]]) <= 0.01
    docids = [line.split()[2] for line in (tmp_path / "both" / "default.trec").read_text().splitlines()]
    assert any(d.startswith("cran:") for d in docids) and all(d.isdigit() or d.startswith("cran:") for d in docids)
