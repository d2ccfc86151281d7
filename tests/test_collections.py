"""Collection importers (SMART, JSONL) and the graph step on real CACM citation links."""

from __future__ import annotations

import json
import re

import duckdb
import numpy as np
import pytest

from pipeline.sources.smart import iter_smart_records
from pipeline.sources.local_corpus import (cacm_citations, has_typed_links, import_collection, parse_smart_date,
                                  smart_paper)
from pipeline.errors import UserError


def _con(settings):
    return duckdb.connect(str(settings.db_path), read_only=True)


def _count_records(path) -> int:
    return sum(1 for line in path.read_bytes().decode("utf-8", "replace").splitlines() if re.match(r"^\.I\s+\S", line))


# -- parsing (pure) ---------------------------------------------------------------------------
def test_smart_parser_fields_dates_and_repeated_markers():
    text = (".I 7\r\n.T\r\nA Title\r\n.A\r\nDoe, J.\r\n.A\r\nRoe, R.\r\n.B\r\nCACM March, 1962\r\n"
            ".W\r\nFirst line\r\n.B\r\nstray line\r\n.X\r\n3\t5\t7\r\n3\t5\t7\r\n.I 8\r\n.T\r\nNo abstract\r\n")
    recs = list(iter_smart_records(text))
    assert [r.docno for r in recs] == ["7", "8"]
    p = smart_paper(recs[0])
    assert p["authors"] == ["Doe, J.", "Roe, R."]  # CISI repeats .A per author
    assert p["abstract"] == "First line stray line"  # a repeated .B inside the abstract stays text
    assert p["published"].isoformat() == "1962-03-01" and p["year"] == 1962
    assert p["links"] == [("3", 5, "7"), ("3", 5, "7")]
    q = smart_paper(recs[1])
    assert q["abstract"] is None and q["authors"] == [] and q["year"] is None
    assert parse_smart_date("j. ae. scs. 25, 1958, 324.") == (None, 1958)


def test_cacm_direction_from_dates_then_numbers():
    papers = [
        {"docno": "1", "published": parse_smart_date("CACM December, 1958")[0], "links": [("5", 5, "1"), ("1", 5, "1")]},
        {"docno": "5", "published": parse_smart_date("CACM March, 1960")[0], "links": [("1", 5, "5"), ("9", 5, "5")]},
        {"docno": "9", "published": parse_smart_date("CACM March, 1960")[0], "links": [("5", 5, "9"), ("77", 5, "9"), ("1", 6, "9")]},
    ]
    assert has_typed_links(papers)
    assert not has_typed_links([{"links": [("92", 1, "1"), ("1", 5, "1"), ("152", 2, "2")]}])  # CISI: counts
    edges, stats = cacm_citations(papers)
    assert edges == [("5", "1"), ("9", "5")]  # later cites earlier; same month: higher number cites lower
    assert stats["self_links"] == 1 and stats["dangling"] == 1 and stats["by_date"] == 1 and stats["by_number"] == 1


# -- real collections ---------------------------------------------------------------------------
def test_cisi_and_cranfield_import_counts_match_files(settings, shared_data):
    for folder, docs, name in (("cisi", "CISI.ALL", "cisi"), ("cranfield", "cran.all.1400", "cranfield")):
        path = shared_data / "collections" / folder
        s = import_collection(settings, path, fmt="smart")
        expected = _count_records(path / docs)
        assert s["collection"] == name and s["papers"] == expected and s["rejected"] == 0
        with _con(settings) as con:
            assert con.execute("SELECT count(*) FROM papers WHERE source = ?", [name]).fetchone()[0] == expected
            assert con.execute("SELECT count(*) FROM works WHERE work_id LIKE ? AND paper_id = work_id", [f"{name}:%"]).fetchone()[0] == expected
            assert con.execute("SELECT count(*) FROM citations WHERE source = ?", [name]).fetchone()[0] == 0
    assert expected == 1400
    with _con(settings) as con:
        assert con.execute("SELECT count(*) FROM papers WHERE source = 'cisi'").fetchone()[0] == 1460
        row = con.execute("SELECT title, abstract FROM papers WHERE paper_id = 'cisi:1'").fetchone()
        assert row[0] == "18 Editions of the Dewey Decimal Classifications" and row[1].startswith("The present study")
        authors = con.execute("SELECT name FROM paper_authors WHERE paper_id = 'cranfield:1' ORDER BY position").fetchall()
        assert authors == [("brenckman,m.",)]
        assert con.execute("SELECT year FROM papers WHERE paper_id = 'cranfield:1'").fetchone()[0] == 1958
        ext = {r[0] for r in con.execute("SELECT external_id FROM papers WHERE source = 'cranfield'").fetchall()}
    # the judgments line up with the imported document numbers (cranqrel maps queries by position)
    from pipeline.evaluation.qrels import align_query_ids, read_qrels, read_queries

    cran = shared_data / "collections" / "cranfield"
    queries, _ = align_query_ids(read_queries(cran / "cran.qry", "smart"), read_qrels(cran / "cranqrel", "smart"))
    qrels = read_qrels(cran / "cranqrel", "smart")
    assert len(queries) == 225 and set(qrels) <= set(queries)
    assert {d for q in qrels.values() for d in q} <= ext
    # rerun: nothing changes
    s2 = import_collection(settings, shared_data / "collections" / "cranfield" / "cran.all.1400", fmt="smart")
    assert s2["collection"] == "cranfield"
    assert all(v["inserted"] == 0 and v["updated"] == 0 for v in s2["upserts"].values())


@pytest.fixture
def cacm(settings, shared_data):
    s = import_collection(settings, shared_data / "collections" / "cacm", fmt="smart")
    return settings, s, shared_data / "collections" / "cacm" / "cacm.all"


def test_cacm_imports_with_type5_citations(cacm):
    settings, s, path = cacm
    # independent count from the file: unordered pairs of type-5 links between different documents
    pairs = set()
    for line in path.read_text(errors="replace").splitlines():
        m = re.match(r"^(\d+)\s+5\s+(\d+)\s*$", line)
        if m and m.group(1) != m.group(2):
            pairs.add(tuple(sorted((int(m.group(1)), int(m.group(2))))))
    assert s["papers"] == _count_records(path) == 3204
    assert s["citations"] == len(pairs) > 2000
    with _con(settings) as con:
        assert con.execute("SELECT count(*) FROM citations WHERE source = 'cacm'").fetchone()[0] == len(pairs)
        # direction: the citing paper is never published before the cited one; same month -> higher number cites
        bad = con.execute("""
            SELECT count(*) FROM citations c
            JOIN papers a ON a.paper_id = c.citing_work_id JOIN papers b ON b.paper_id = c.cited_work_id
            WHERE a.published < b.published
               OR (a.published = b.published AND a.external_id::INT < b.external_id::INT)""").fetchone()[0]
        assert bad == 0
        n_auth = con.execute("SELECT count(*) FROM paper_authors WHERE paper_id = 'cacm:1'").fetchone()[0]
        assert n_auth == 2
        got = con.execute("SELECT published, year, title FROM papers WHERE paper_id = 'cacm:1'").fetchone()
        assert got[0].isoformat() == "1958-12-01" and got[1] == 1958 and got[2].startswith("Preliminary Report")


def test_graph_on_cacm_every_paper_gets_metrics_and_related_share_something(cacm):
    import igraph as ig

    from pipeline.steps.graph import run_graph

    settings, _, _ = cacm
    s = run_graph(settings)
    assert s["works"] == 3204 and s["corpus_papers"] == 3204 and s["citations"] > 2000
    with _con(settings) as con:
        assert con.execute("SELECT count(*) FROM paper_metrics WHERE paper_id LIKE 'cacm:%'").fetchone()[0] == 3204
        assert con.execute("SELECT sum(pagerank) FROM paper_metrics").fetchone()[0] == pytest.approx(1.0)
        # PageRank equals igraph's reference call on the same edges
        ids = [r[0] for r in con.execute("SELECT work_id FROM paper_metrics ORDER BY work_id").fetchall()]
        vid = {w: i for i, w in enumerate(ids)}
        edges = [(vid[a], vid[b]) for a, b in con.execute("SELECT citing_work_id, cited_work_id FROM citations").fetchall()]
        ref = ig.Graph(n=len(ids), edges=edges, directed=True).pagerank(damping=0.85)
        ours = [r[0] for r in con.execute("SELECT pagerank FROM paper_metrics ORDER BY work_id").fetchall()]
        assert np.allclose(ours, ref, atol=1e-12)
        fit = con.execute("SELECT status, xmin, alpha, ks_d, loglikelihood_ratio, p_value FROM powerlaw_fits").fetchall()
        assert len(fit) == 1 and fit[0][0] == "ok" and fit[0][2] > 1
        w = con.execute("SELECT citation_count, weight FROM paper_metrics ORDER BY citation_count, weight DESC").fetchall()
        assert all(0 <= x[1] <= 1 for x in w) and all(w[i][1] >= w[i + 1][1] - 1e-12 for i in range(len(w) - 1))
        # every related pair shares a reference or a citer, or is a direct citation (checked on `citations`)
        unrelated = con.execute("""
            SELECT count(*) FROM related r WHERE NOT (
                EXISTS (SELECT 1 FROM citations c WHERE (c.citing_work_id = r.paper_id AND c.cited_work_id = r.related_work_id)
                                                     OR (c.citing_work_id = r.related_work_id AND c.cited_work_id = r.paper_id))
             OR EXISTS (SELECT 1 FROM citations x JOIN citations y ON x.cited_work_id = y.cited_work_id
                        WHERE x.citing_work_id = r.paper_id AND y.citing_work_id = r.related_work_id)
             OR EXISTS (SELECT 1 FROM citations x JOIN citations y ON x.citing_work_id = y.citing_work_id
                        WHERE x.cited_work_id = r.paper_id AND y.cited_work_id = r.related_work_id))""").fetchone()[0]
        assert unrelated == 0
        n_rel, n_papers, max_rank = con.execute("SELECT count(*), count(DISTINCT paper_id), max(rank) FROM related").fetchone()
        assert n_rel == s["related"] and n_papers > 1000 and max_rank <= settings.graph_top_k
        # papers with any link get related works; those without get none
        linked = con.execute("SELECT count(*) FROM paper_metrics WHERE in_degree + out_degree > 0").fetchone()[0]
        assert n_papers == linked
        assert con.execute("SELECT count(*) FROM most_central_papers").fetchone()[0] == 3204
        top = con.execute("SELECT shared_citers FROM strongest_cocitation_pairs LIMIT 1").fetchone()
        assert top is not None and top[0] >= 1
        assert con.execute("SELECT count(*) FROM related WHERE paper_id = related_work_id").fetchone()[0] == 0
    # a rerun replaces paper_metrics (same numbers, new run id) and adds a second fit row; this one computes PageRank
    # in a child process (as graphs of 2M citations or more do), and its values are the same (up to PRPACK's own
    # run-to-run rounding: its OpenMP sums are unordered)
    assert s["pagerank"]["process"] == "this"
    with _con(settings) as con:
        first_pr = con.execute("SELECT work_id, pagerank FROM paper_metrics ORDER BY work_id").fetchall()
    s2 = run_graph(settings.model_copy(update={"graph_pagerank_process_edges": 0}))
    assert s2["pagerank"]["process"] == "child" and s2["pagerank"]["pagerank_s"] >= 0
    assert s2["related"] == s["related"] and s2["run_id"] != s["run_id"]
    with _con(settings) as con:
        again = con.execute("SELECT work_id, pagerank FROM paper_metrics ORDER BY work_id").fetchall()
        assert [w for w, _ in again] == [w for w, _ in first_pr]
        assert np.allclose([p for _, p in again], [p for _, p in first_pr], rtol=1e-9, atol=0)
        # nothing changed: no list recomputed (the sweep follows the change; no new paper added an entry to read)
        runs = dict(con.execute("SELECT run_id, count(DISTINCT paper_id) FROM related GROUP BY ALL").fetchall())
        assert set(runs) == {s["run_id"]} and s2["related_changed"] == 0 and s2["related_papers"] == 0
        assert con.execute("SELECT count(*) FROM powerlaw_fits").fetchone()[0] == 2
        # the tables are created again from their DDL (not emptied row by row): their primary keys still hold
        keys = dict(con.execute("SELECT table_name, constraint_column_names FROM duckdb_constraints() "
                                "WHERE constraint_type = 'PRIMARY KEY' AND table_name IN ('related', 'paper_metrics')").fetchall())
        assert keys == {"related": ["paper_id", "rank"], "paper_metrics": ["work_id"]}
        assert con.execute("SELECT count(*) FROM paper_metrics").fetchone()[0] == s2["metrics"]


def test_graph_without_citations_gives_unit_weights(settings, shared_data, capsys, monkeypatch):
    from pipeline.cli import main
    from pipeline.steps.graph import run_graph

    empty = run_graph(settings)  # a warehouse without works: nothing to do, no error
    assert empty["works"] == 0 and empty["related"] == 0 and empty["powerlaw"]["status"] == "too_few"
    monkeypatch.setenv("PAPERKB_WAREHOUSE", str(settings.warehouse))
    assert main(["import-collection", "--format", "smart", str(shared_data / "collections" / "cisi" / "CISI.ALL")]) == 0
    assert "import-collection cisi: 1460 papers" in capsys.readouterr().out
    monkeypatch.setenv("COLUMNS", "1000")  # the summary whole on one line (80 columns wraps it)
    assert main(["graph"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith("graph: 1460 works, 0 citations, 1460 corpus papers") and "too_few" in out[0]
    with _con(settings) as con:
        assert con.execute("SELECT min(weight), max(weight), count(*) FROM paper_metrics").fetchone() == (1.0, 1.0, 1460)
        assert con.execute("SELECT max(pagerank) - min(pagerank) FROM paper_metrics").fetchone()[0] == pytest.approx(0, abs=1e-15)


# -- JSONL ------------------------------------------------------------------------------------
def test_jsonl_import_references_external_works_rejects_and_reimport(settings, tmp_path):
    f = tmp_path / "mini.jsonl"
    lines = [
        {"id": "a", "title": "Alpha", "abstract": "x", "authors": ["Ann One", "Bob Two"], "year": 2001, "references": ["b", "ext1"]},
        {"id": "b", "title": "Beta", "abstract": "y", "references": ["ext1"]},
        {"id": "c", "title": "Gamma", "abstract": "z"},
    ]
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n{not json\n")
    s = import_collection(settings, f, fmt="jsonl")
    assert (s["collection"], s["papers"], s["works"], s["citations"], s["rejected"]) == ("mini", 3, 4, 3, 1)
    with _con(settings) as con:
        assert con.execute("SELECT paper_id, citation_count FROM works WHERE work_id = 'mini:ext1'").fetchone() == (None, 2)
        assert con.execute("SELECT count(*) FROM rejects WHERE reason = 'bad_jsonl_line'").fetchone()[0] == 1
        assert con.execute("SELECT name FROM paper_authors WHERE paper_id = 'mini:a' ORDER BY position").fetchall() == [("Ann One",), ("Bob Two",)]
        assert con.execute("SELECT year FROM papers WHERE paper_id = 'mini:a'").fetchone()[0] == 2001
    # the file changes: b drops its reference, a loses an author -> edge and author row removed
    lines[1]["references"] = []
    lines[0]["authors"] = ["Ann One"]
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    s2 = import_collection(settings, f, fmt="jsonl", name="mini")
    assert s2["citations"] == 2 and s2["upserts"]["citations"]["deleted"] == 1
    assert s2["upserts"]["paper_authors"]["deleted"] == 1
    with _con(settings) as con:
        assert con.execute("SELECT count(*) FROM citations WHERE source = 'mini'").fetchone()[0] == 2
    from pipeline.steps.graph import run_graph

    g = run_graph(settings)
    assert g["works"] == 4 and g["corpus_papers"] == 3


def test_user_errors_and_cli(settings, tmp_path, capsys, monkeypatch):
    from pipeline.cli import main

    with pytest.raises(UserError):
        import_collection(settings, tmp_path / "missing", fmt="smart")
    with pytest.raises(UserError):
        import_collection(settings, tmp_path, fmt="xml")
    with pytest.raises(UserError):
        import_collection(settings, tmp_path, fmt="smart")  # folder without a .ALL file
    monkeypatch.setenv("PAPERKB_WAREHOUSE", str(settings.warehouse))
    assert main(["import-collection", "--format", "smart", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such file or folder" in err[0]
    assert main(["import-collection", "--format", "csv", str(tmp_path)]) == 2
    assert "unknown collection format" in capsys.readouterr().err
