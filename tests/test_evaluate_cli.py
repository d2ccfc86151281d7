"""``paperkb eval`` end to end on the published CISI snapshot (the shared ``cisi_snapshot`` fixture)."""

from __future__ import annotations

import json

import pytest

from pipeline.cli import main
from pipeline.evaluation.evaluate import MEASURE_NAMES, score_run
from pipeline.evaluation.trec import read_trec_run
from pipeline.evaluation.qrels import read_qrels

pytestmark = pytest.mark.slow


def _eval(settings, capsys, *args) -> tuple[int, str, str]:
    code = main(["--warehouse", str(settings.warehouse), "eval", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_eval_default_beats_bm25_and_dense_on_cisi(cisi_snapshot, shared_data, tmp_path, capsys):
    d = shared_data / "collections" / "cisi"
    code, out, err = _eval(cisi_snapshot, capsys, "--queries", str(d / "CISI.QRY"), "--qrels", str(d / "CISI.REL"),
                           "--run-dir", str(tmp_path / "runs"), "--json")
    assert code == 0, err
    summary = json.loads(out)
    qrels = read_qrels(d / "CISI.REL")
    assert summary["queries"] == len(qrels) == 76
    rows = {r["name"]: r for r in summary["rows"]}
    assert list(rows) == ["default", "bm25 only", "dense only"]
    for name, row in rows.items():
        assert set(row["measures"]) == set(MEASURE_NAMES), name
        assert all(0.0 < v < 1.0 for v in row["measures"].values()), (name, row["measures"])
        # the TREC run on disk re-scores to the reported numbers (docids are CISI document numbers)
        run = read_trec_run(row["run_path"])
        assert set(run) <= set(qrels)
        assert all(docid.isdigit() and 1 <= int(docid) <= 1460 for docs in run.values() for docid in docs)
        assert score_run(qrels, run) == pytest.approx(row["measures"], abs=1e-9)
    nd = {n: r["measures"]["nDCG@10"] for n, r in rows.items()}
    # measured: default 0.46-0.47, dense 0.42, BM25 0.41 (margin ~0.04, deterministic embeddings)
    assert nd["default"] > max(nd["bm25 only"], nd["dense only"]) + 0.01, nd


def test_eval_ablations_table_with_trec_topics(cisi_snapshot, shared_data, tmp_path, capsys):
    """TREC-format queries/qrels (written from the real CISI files) and the full ablation table."""
    from pipeline.evaluation.trec import write_trec_qrels
    from pipeline.evaluation.qrels import read_queries

    d = shared_data / "collections" / "cisi"
    qrels = read_qrels(d / "CISI.REL")
    queries = read_queries(d / "CISI.QRY")
    some = [q for q in queries if q in qrels][:8]
    qfile = tmp_path / "topics.tsv"
    qfile.write_text("".join(f"{q}\t{queries[q]}\n" for q in some))
    rfile = write_trec_qrels({q: qrels[q] for q in some}, tmp_path / "qrels.trec")
    code, out, err = _eval(cisi_snapshot, capsys, "--queries", str(qfile), "--qrels", str(rfile), "--format", "trec",
                           "--ablations", "--run-dir", str(tmp_path / "runs"))
    assert code == 0, err
    for row in ("default", "bm25 only", "dense only", "fusion only", "seed formula", "- ck", "expansion off",
                "title boosts on", "nDCG@10", "MAP", "R@100"):
        assert row in out, row
    assert "8 judged queries" in " ".join(out.split())
    assert (tmp_path / "runs" / "default.trec").is_file() and (tmp_path / "runs" / "qrels.trec").is_file()


def test_eval_bad_input_is_one_line_error(cisi_snapshot, shared_data, tmp_path, capsys):
    d = shared_data / "collections" / "cisi"
    code, out, err = _eval(cisi_snapshot, capsys, "--queries", str(tmp_path / "nope.qry"), "--qrels", str(d / "CISI.REL"))
    assert code == 2 and err.strip().count("\n") == 0 and "file not found" in err
    code, out, err = _eval(cisi_snapshot, capsys, "--queries", str(d / "CISI.QRY"), "--qrels", str(d / "CISI.REL"),
                           "--snapshot", "no-such-snapshot")
    assert code == 2 and "Traceback" not in err
