"""``paperkb show``, ``papers`` and ``author`` on the CACM snapshot (real papers, authors and citation links):
what they print is checked against the catalog queried directly, and every line fits 80 columns."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cacm(cacm_snapshot):
    from pipeline.snapshots import open_catalog, resolve

    con = open_catalog(resolve(cacm_snapshot, None))
    yield cacm_snapshot, con
    con.close()


def _run(settings, capsys, *args):
    from pipeline.cli import main

    code = main(["--warehouse", str(settings.warehouse), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_show_lists_authors_links_and_the_most_cited_references_and_citers(cacm, capsys):
    settings, con = cacm
    code, out, err = _run(settings, capsys, "show", "cacm:1785", "--json", "--top", "3")
    assert code == 0 and err == ""
    d = json.loads(out)
    title, abstract = con.execute("SELECT title, abstract FROM papers WHERE paper_id = 'cacm:1785'").fetchone()
    assert d["paper"]["title"] == title and d["paper"]["abstract"] == abstract
    names = [n for (n,) in con.execute("SELECT name FROM paper_authors WHERE paper_id = 'cacm:1785' ORDER BY position").fetchall()]
    assert [b["name"] for b in d["facts"]["bylines"]] == names == ["Morris, R."]
    works = "(SELECT work_id FROM works WHERE paper_id = 'cacm:1785')"
    n_refs = con.execute(f"SELECT count(DISTINCT cited_work_id) FROM citations WHERE citing_work_id IN {works}").fetchone()[0]
    n_cites = con.execute(f"SELECT count(DISTINCT citing_work_id) FROM citations WHERE cited_work_id IN {works}").fetchone()[0]
    assert n_cites > 3 and (d["facts"]["reference_count"], d["facts"]["cited_by_count"]) == (n_refs, n_cites)
    assert len(d["cited_by"]) == 3
    counts = [c["citation_count"] or 0 for c in d["cited_by"]]
    assert counts == sorted(counts, reverse=True)
    pr = con.execute("SELECT max(pagerank) FROM paper_metrics WHERE paper_id = 'cacm:1785'").fetchone()[0]
    assert d["metrics"]["pagerank"] == pytest.approx(pr) and 1 <= d["metrics"]["pagerank_rank"] <= d["metrics"]["ranked"]

    code, text, err = _run(settings, capsys, "show", "1785")  # the docno names the same paper
    assert code == 0 and err == ""
    assert title.split()[0] in text and "Morris, R." in text and f"Cited by: {n_cites}" in text
    assert max(map(len, text.splitlines())) <= 80


def test_papers_sorts_and_filters_like_the_catalog(cacm, capsys):
    settings, con = cacm
    code, out, _ = _run(settings, capsys, "papers", "--sort", "citations", "--limit", "5", "--json")
    assert code == 0
    page = json.loads(out)
    assert page["total"] == con.execute("SELECT count(*) FROM papers").fetchone()[0]
    counts = [p["citation_count"] or 0 for p in page["items"]]
    best = con.execute("SELECT max(citation_count) FROM paper_metrics WHERE paper_id IS NOT NULL").fetchone()[0]
    assert len(counts) == 5 and counts == sorted(counts, reverse=True) and counts[0] == best

    code, out, _ = _run(settings, capsys, "papers", "--author", "wirth", "--sort", "date", "--json", "--limit", "50")
    page = json.loads(out)
    n = con.execute("SELECT count(DISTINCT paper_id) FROM paper_authors WHERE name ILIKE '%wirth%'").fetchone()[0]
    assert code == 0 and page["total"] == n == len(page["items"]) > 3
    assert all(any("wirth" in a.lower() for a in p["authors"]) for p in page["items"])

    code, text, err = _run(settings, capsys, "papers", "--limit", "7")
    assert code == 0 and err == "" and "1-7 shown" in text and "   7. " in text
    assert max(map(len, text.splitlines())) <= 80


def test_author_profile_counts_papers_and_coauthors(cacm, capsys):
    settings, con = cacm
    code, out, _ = _run(settings, capsys, "author", "naur, p.", "--json")  # case and spacing do not matter
    assert code == 0
    prof = json.loads(out)
    pids = {p for (p,) in con.execute("SELECT paper_id FROM paper_authors WHERE name = 'Naur, P.'").fetchall()}
    assert prof["name"] == "Naur, P." and prof["paper_count"] == len(pids) == 19
    assert {p["paper_id"] for p in prof["papers"]} <= pids and len(prof["papers"]) == min(20, len(pids))
    years = con.execute("SELECT min(year), max(year) FROM papers WHERE paper_id IN (SELECT unnest(?::VARCHAR[]))",
                        [sorted(pids)]).fetchone()
    assert (prof["first_year"], prof["last_year"]) == years
    code, text, err = _run(settings, capsys, "author", "Naur, P.")
    assert code == 0 and err == "" and "19 paper(s)" in text and "h-index" in text
    assert max(map(len, text.splitlines())) <= 80
    code, text, err = _run(settings, capsys, "author", "Peter Naur")  # as people say it: the one Naur
    assert code == 0 and err == "" and text.splitlines()[:2] == ["Naur, P.", "(the only author 'Peter Naur' names)"]
    assert "19 paper(s)" in text
    code, out, err = _run(settings, capsys, "author", "Perlis")  # two authors: both named, exit 2
    assert code == 2 and out == "" and err.strip().count("\n") == 0
    assert "'Perlis' names 2 authors: Perlis, A. J. (10 papers), Perlis, J. A. (1 paper)" in err


def test_unknown_ids_names_and_bad_options_are_one_line_exit_2(cacm, capsys):
    settings, _ = cacm
    for args, words in ((("show", "cacm:999999"), "cacm:999999"), (("author", "Nobody, Q."), "Nobody"),
                        (("papers", "--sort", "fame"), "sort"), (("papers", "--limit", "0"), "limit")):
        code, out, err = _run(settings, capsys, *args)
        assert code == 2 and out == "" and words in err and err.strip().count("\n") == 0, (args, err)


def test_author_lists_cut_to_a_width_keep_whole_names_and_count_the_rest():
    """``paperkb ask`` printed "Dzmitry Bahdanau, KyungHyun… + 0 more" for a paper of three authors."""
    from pipeline.cli.paper_views import _authors

    bahdanau = ["Dzmitry Bahdanau", "KyungHyun Cho", "Yoshua Bengio"]
    assert _authors(bahdanau, 40) == "Dzmitry Bahdanau, KyungHyun Cho + 1 more"
    assert _authors(bahdanau, 60) == "Dzmitry Bahdanau, KyungHyun Cho, Yoshua Bengio"
    assert _authors(bahdanau, 20) == "Dzmitry Ba… + 2 more"
    eight = ["Ashish Vaswani", "Noam Shazeer", "Niki Parmar", "Jakob Uszkoreit", "Llion Jones", "Aidan N. Gomez",
             "Lukasz Kaiser", "Illia Polosukhin"]
    assert _authors(eight, 40) == "Ashish Vaswani, Noam Shazeer + 6 more"
    assert _authors([], 40) == "(authors unknown)"
    for cols in range(12, 90):
        assert len(_authors(eight, cols)) <= cols and "+ 0 more" not in _authors(eight, cols)
