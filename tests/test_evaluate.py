"""Evaluation: measures on hand-made runs, TREC/SMART readers on the real collections (fast)."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.errors import UserError
from pipeline.evaluation.evaluate import MEASURE_NAMES, ablations, relative_to, score_run
from pipeline.evaluation.trec import ranked_run, read_trec_run, write_trec_qrels, write_trec_run
from pipeline.evaluation.qrels import align_query_ids, detect_format, read_qrels, read_queries

# ---- measures on a tiny hand-made run, against values computed here from the definitions --------

QRELS = {
    "1": {"a": 2, "b": 1, "x": 0, "z": 1},  # 3 relevant (graded), x judged non-relevant
    "2": {"c": 1},
    "3": {"q": 1},  # judged, but the run has no line for query 3: counts 0
}
RANKED = {
    "1": [("a", 9.0), ("x", 8.0), ("b", 7.0), ("y", 6.0)],  # z never retrieved
    "2": [("d", 3.0), ("c", 2.0)],
}


def _dcg(gains):
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains))


def _expected():
    # query 1: gains by rank [2, 0, 1, 0]; ideal [2, 1, 1]
    ndcg1 = _dcg([2, 0, 1, 0]) / _dcg([2, 1, 1])
    ap1 = (1 / 1 + 2 / 3) / 3
    r1 = 2 / 3
    # query 2: relevant at rank 2
    ndcg2 = _dcg([0, 1]) / _dcg([1])
    ap2 = 1 / 2
    r2 = 1.0
    n = 3  # query 3 answered nothing
    return {"nDCG@10": (ndcg1 + ndcg2) / n, "AP": (ap1 + ap2) / n, "R@100": (r1 + r2) / n}


def test_measures_match_hand_computed_values():
    got = score_run(QRELS, ranked_run(RANKED))
    want = _expected()
    assert set(got) == set(MEASURE_NAMES)
    for name in MEASURE_NAMES:
        assert got[name] == pytest.approx(want[name], abs=1e-9), name


def test_measures_agree_with_ir_measures_on_trec_files(tmp_path):
    """Round trip through TREC files; ir-measures reading the files itself gives the same per-query values."""
    import ir_measures

    run = ranked_run(RANKED)
    run_path = write_trec_run(run, tmp_path / "run.trec", tag="hand made")
    qrels_path = write_trec_qrels(QRELS, tmp_path / "qrels.trec")
    lines = run_path.read_text().splitlines()
    assert lines[0].split() == ["1", "Q0", "a", "1", "9.0", "hand_made"]
    assert [ln.split()[3] for ln in lines] == ["1", "2", "3", "4", "1", "2"]
    assert read_qrels(qrels_path, "trec") == QRELS
    back = read_trec_run(run_path)
    assert {q: list(d) for q, d in back.items()} == {q: list(d) for q, d in run.items()}

    measures = [ir_measures.parse_measure(m) for m in MEASURE_NAMES]
    qrels_ir = list(ir_measures.read_trec_qrels(str(qrels_path)))
    run_ir = list(ir_measures.read_trec_run(str(run_path)))
    per_q = {(str(m.measure), m.query_id): m.value for m in ir_measures.iter_calc(measures, qrels_ir, run_ir)}
    ours = score_run(read_qrels(qrels_path, "trec"), read_trec_run(run_path))
    for name in MEASURE_NAMES:
        # ir-measures skips unanswered query 3; we count it as 0 (trec_eval -c)
        assert ours[name] == pytest.approx((per_q[(name, "1")] + per_q[(name, "2")]) / 3, abs=1e-6)


_DOCS = [f"d{i}" for i in range(12)] + ["D1", "d1x", "é", "z"]  # docids whose byte order breaks ties


@given(qrels=st.dictionaries(st.sampled_from(["1", "2", "3", "q4"]),
                             st.dictionaries(st.sampled_from(_DOCS), st.integers(-1, 3), max_size=10), min_size=1),
       run=st.dictionaries(st.sampled_from(["1", "2", "3", "q5"]),
                           st.dictionaries(st.sampled_from(_DOCS), st.sampled_from([0.0, 0.5, 1.0, 2.0, -1.0, 3.25]),
                                           min_size=1), min_size=1))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_measures_are_those_of_ir_measures_and_trec_eval(qrels, run):
    """paperkb eval computes the measures itself (the base install has no ir-measures, whose pytrec_eval needs SciPy):
    per query, the same values as ir-measures on any judgements (graded, negative, unjudged documents) and any run
    (tied scores, broken by docid as trec_eval breaks them; queries judged or run only)."""
    import ir_measures

    from pipeline.evaluation.measures import per_query

    measures = [ir_measures.parse_measure(m) for m in MEASURE_NAMES]
    theirs = {(str(m.measure), m.query_id): m.value for m in ir_measures.iter_calc(measures, qrels, run)}
    ours = {(name, q): v for name, by_q in per_query(MEASURE_NAMES, qrels, run).items() for q, v in by_q.items()}
    assert set(ours) == set(theirs)
    for key, value in theirs.items():
        assert ours[key] == pytest.approx(value, abs=1e-12), key


def test_ties_keep_our_order():
    """Equal scores would be re-ordered by docid in trec_eval; ranked_run keeps the ranking as given."""
    run = ranked_run({"1": [("zz", 1.0), ("aa", 1.0), ("mm", float("nan")), ("zz", 0.5)]})
    order = sorted(run["1"], key=lambda d: -run["1"][d])
    assert order == ["zz", "aa", "mm"]  # duplicate zz dropped
    qrels = {"1": {"zz": 1}}
    assert score_run(qrels, run)["AP"] == pytest.approx(1.0)


def test_no_relevant_judgement_is_a_user_error():
    with pytest.raises(UserError):
        score_run({"1": {"a": 0}}, {"1": {"a": 1.0}})


def test_ablation_rows_cover_the_issue():
    names = [a.name for a in ablations(["ck", "doc", "abs", "fig", "pr", "bm25"])]
    assert names[:3] == ["default", "bm25 only", "dense only"]
    for n in ("fusion only", "seed formula", "- ck", "- bm25", "expansion off", "expansion prf", "expansion rm3", "title boosts on",
              "title boosts off"):
        assert n in names
    assert [a.name for a in ablations(["ck"], full=False)] == ["default", "bm25 only", "dense only"]
    summary = {"rows": [{"name": "default", "measures": {"nDCG@10": 0.5}}, {"name": "bm25 only", "measures": {"nDCG@10": 0.4}},
                        {"name": "dense only", "measures": {"nDCG@10": 0.25}}]}
    assert relative_to(summary) == pytest.approx(1.25)


# ---- SMART and TREC readers on the real collections -------------------------------------------


def _smart_ids(path):
    return [str(int(m)) for m in re.findall(r"^\.I\s+(\d+)", path.read_text(errors="replace"), flags=re.M)]


def test_cisi_queries_and_qrels(shared_data):
    d = shared_data / "collections" / "cisi"
    queries = read_queries(d / "CISI.QRY")
    assert list(queries) == _smart_ids(d / "CISI.QRY")
    assert queries["1"].startswith("What problems and concerns are there in making up descriptive titles?")
    assert "\n" not in queries["1"] and "  " not in queries["1"]
    qrels = read_qrels(d / "CISI.REL")
    lines = [ln.split() for ln in (d / "CISI.REL").read_text().splitlines() if ln.strip()]
    assert sum(len(v) for v in qrels.values()) == len({(f[0], f[1]) for f in lines})
    assert {g for v in qrels.values() for g in v.values()} == {1}
    assert qrels["1"]["28"] == 1
    aligned, note = align_query_ids(queries, qrels)
    assert note is None and aligned is queries and set(qrels) <= set(queries)
    assert detect_format(d / "CISI.QRY") == "smart" and detect_format(d / "CISI.REL") == "smart"


def test_cranfield_grades_and_positional_query_ids(shared_data):
    d = shared_data / "collections" / "cranfield"
    queries = read_queries(d / "cran.qry")
    file_ids = _smart_ids(d / "cran.qry")
    assert list(queries) == file_ids and file_ids[2] == "4"  # 001 002 004: gaps
    qrels = read_qrels(d / "cranqrel")
    raw = [ln.split() for ln in (d / "cranqrel").read_text().splitlines() if ln.strip()]
    for qid, docid, grade in raw[:60]:
        g = int(grade)
        assert qrels[qid][docid] == (5 - g if g > 0 else 4)
    assert qrels["1"]["486"] == 4  # grade -1: the paper query 1 was written from
    aligned, note = align_query_ids(queries, qrels)
    assert note and "position" in note
    assert len(aligned) == len(file_ids) and set(qrels) <= set(aligned)
    assert aligned["3"] == queries["4"]  # third query in the file
    assert aligned[str(len(file_ids))] == list(queries.values())[-1]


def test_trec_query_files(tmp_path):
    tsv = tmp_path / "q.tsv"
    tsv.write_text("# comment\n1\tlibrary automation\n002\t  citation   analysis \n")
    assert detect_format(tsv) == "trec"
    assert read_queries(tsv) == {"1": "library automation", "2": "citation   analysis"}
    topics = tmp_path / "topics.txt"
    topics.write_text("<top>\n<num> Number: 51\n<title> Topic: airbus subsidies\n<desc> Description:\nx\n</top>\n"
                      "<top>\n<num> 52\n<title> south african sanctions\n</top>\n")
    assert read_queries(topics, "trec") == {"51": "airbus subsidies", "52": "south african sanctions"}


def test_bad_inputs_are_one_line_user_errors(tmp_path):
    with pytest.raises(UserError, match="file not found"):
        read_queries(tmp_path / "missing.qry")
    bad = tmp_path / "bad.rel"
    bad.write_text("1 2 3 4 5 6 7\n")
    with pytest.raises(UserError, match="line 1"):
        read_qrels(bad, "smart")
    empty = tmp_path / "empty.tsv"
    empty.write_text("\n")
    with pytest.raises(UserError):
        read_queries(empty, "trec")
    q = tmp_path / "q.tsv"
    q.write_text("1\ta\n")
    r = tmp_path / "r.trec"
    r.write_text("9 0 d1 1\n")
    with pytest.raises(UserError, match="not found in the query file"):
        align_query_ids(read_queries(q), read_qrels(r))


def test_long_queries_are_clipped_at_a_word_boundary():
    from pipeline.evaluation.evaluate import clip_queries

    out, cut = clip_queries({"1": "short query", "2": "word " * 300}, 1000)
    assert cut == ["2"] and out["1"] == "short query"
    assert len(out["2"]) <= 1000 and out["2"].endswith("word") and out["2"] == " ".join(["word"] * (len(out["2"]) // 5 + 1))
