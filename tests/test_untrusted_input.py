"""Issue 64, the untrusted input beside the PDFs (their time budget: test_pdf_time_budget.py):

- one bad line no longer aborts ``import-collection``: a lone surrogate, a year of 10**30, Infinity, a field of the
  wrong type are each rejected with the field and the reason, and the other lines import;
- what the CLI prints is printable: ESC, NUL, BEL and the bidirectional overrides of a title, or the newline and
  undecodable bytes of a file name, print as escapes (``\\x1b``, ``\\n``, ``\\xff``); a one-line reject stays one line;
  the search, paper, list and author views show a title the same way;
- a symbolic link in an imported folder to a file outside it is skipped with a line saying so, unless
  ``--follow-links``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import duckdb
import pytest

from pipeline.cli import main

ESC_TITLE = "Deep \x1b]0;pwned\x07\x1b[2J\x1b[31mRed\x00 Nets \u202egnp.exe"


def _rows(wh: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(wh / "warehouse.duckdb"), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _no_controls(text: str) -> None:
    bad = [c for c in text if (ord(c) < 0x20 and c not in "\n") or 0x7F <= ord(c) <= 0x9F or 0x202A <= ord(c) <= 0x202E]
    assert not bad, (bad, text)


# ---- import-collection: one bad line ----------------------------------------------------------------------------------
def test_bad_jsonl_lines_are_rejected_with_their_reason_and_the_rest_imports(tmp_path, capsys, settings):
    lines = [
        '{"id": "ok1", "title": "A fine paper", "year": 2001, "authors": ["Ann One"], "references": ["ok2"]}',
        '{"id": "s1", "title": "\\ud800", "year": 2002}',  # the lone surrogate
        '{"id": "y1", "title": "Big year", "year": 1000000000000000000000000000000}',  # the 10**30
        '{"id": "y2", "title": "No year", "year": Infinity}',
        '{"id": "y3", "title": "Year zero", "year": 0}',
        '{"id": "t1", "title": ["not", "text"]}',
        '{"id": "a1", "title": "Author", "authors": ["Bob \\udfff Two"]}',
        '{"id": "r1", "title": "Refs", "references": [{"id": "x"}]}',
        '{"id": {"nested": 1}, "title": "Odd id"}',
        '{"id": "ok2", "title": "' + ESC_TITLE.replace("\x1b", "\\u001b").replace("\x07", "\\u0007").replace("\x00", "\\u0000")
        + '", "year": "1999", "abstract": null}',
    ]
    f = tmp_path / "hostile.jsonl"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main(["--warehouse", str(settings.warehouse), "import-collection", str(f), "--format", "jsonl"]) == 0
    assert capsys.readouterr().out.startswith("import-collection hostile: 2 papers, 1 authors, 2 works, 1 citations, "
                                              "8 rejected")
    wh = settings.warehouse
    assert _rows(wh, "SELECT paper_id, title, year FROM papers ORDER BY 1") == [
        ("hostile:ok1", "A fine paper", 2001), ("hostile:ok2", ESC_TITLE, 1999)]  # stored as it is: it is data
    rejects = dict(_rows(wh, "SELECT record_key, detail FROM rejects WHERE step = 'import-collection' "
                             "AND reason = 'bad_jsonl_line'"))
    assert sorted(rejects) == [f"line {n}" for n in range(2, 10)]
    assert rejects["line 2"].startswith("'title' holds an unpaired surrogate (\\ud800, character 1): ")
    assert rejects["line 3"].startswith("'year' 1000000000000000000000000000000 is not a year from 1 to 9999: ")
    assert rejects["line 4"].startswith("'year' inf is not a year")
    assert rejects["line 5"].startswith("'year' 0 is not a year from 1 to 9999")
    assert rejects["line 6"].startswith("'title' must be text, not list")
    assert rejects["line 7"].startswith("'authors' holds an unpaired surrogate (\\udfff, character 5)")
    assert rejects["line 8"].startswith("'references' must be text or a whole number, not dict")
    assert rejects["line 9"].startswith("'id' must be text or a whole number, not dict")


def test_a_file_of_bad_lines_only_says_why_in_one_line(tmp_path, capsys, settings):
    f = tmp_path / "allbad.jsonl"
    f.write_text('{"id": "1", "title": "\\ud800"}\n', encoding="utf-8")
    assert main(["--warehouse", str(settings.warehouse), "import-collection", str(f), "--format", "jsonl"]) == 2
    err = capsys.readouterr().err
    assert err == (f"paperkb: error: {f}: no jsonl records found (1 rejected, line 1: 'title' holds an unpaired "
                   "surrogate (\\ud800, character 1): {\"id\": \"1\", \"title\": \"\\ud800\"})\n")


# ---- what the CLI prints -----------------------------------------------------------------------------------------
def test_printable_escapes_what_a_terminal_acts_on():
    from pipeline.terminal import printable, storable

    assert printable(ESC_TITLE) == "Deep \\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mRed\\x00 Nets \\u202egnp.exe"
    assert printable("a\tb\nc\rd\x7f\x9b") == "a\tb\nc\\rd\\x7f\\x9b"  # tab and newline kept in a view
    assert printable("a\tb\nc", one_line=True) == "a\\tb\\nc"
    assert printable(os.fsdecode(b"caf\xe9.pdf")) == "caf\\xe9.pdf"  # a Latin-1 file name's byte
    assert printable("Ünïcödé — αβγ 中文 ﬁ") == "Ünïcödé — αβγ 中文 ﬁ"
    assert storable(os.fsdecode(b"caf\xe9\n.pdf")) == "caf\\xe9\n.pdf" and storable("\ud800") == "\\ud800"


def test_file_names_print_one_line_each_and_are_recorded(shared_data, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")
    folder = tmp_path / "pdfs"
    folder.mkdir()
    (folder / "1508.04025.pdf").write_bytes((shared_data / "arxiv" / "pdf" / "1508.04025.pdf").read_bytes())
    names = ["new\nline.pdf", "esc\x1b[2J\x1b]0;pwned\x07.pdf", os.fsdecode(b"latin\xe9.pdf")]
    for name in names:
        (folder / name).write_bytes(b"my notes, not a PDF")
    wh = tmp_path / "wh"
    assert main(["--warehouse", str(wh), "import-pdfs", "--no-lookup", str(folder)]) == 0
    out = capsys.readouterr().out
    _no_controls(out)
    lines = out.splitlines()
    assert len(lines) == 4 and "4 PDF files in, 1 papers" in lines[0] and "3 rejected" in lines[0]
    assert sorted(lines[1:]) == sorted(f"  rejected {folder}/{shown}: not_pdf: no %PDF- header in the first 19 bytes "
                                       "(19 bytes in all)"
                                       for shown in ("new\\nline.pdf", "esc\\x1b[2J\\x1b]0;pwned\\x07.pdf", "latin\\xe9.pdf"))
    # the rows keep the names (the undecodable byte as \xe9: a database holds text)
    assert sorted(r[0] for r in _rows(wh, "SELECT record_key FROM rejects")) == \
        sorted(f"{folder}/{n}" for n in ("new\nline.pdf", "esc\x1b[2J\x1b]0;pwned\x07.pdf", "latin\\xe9.pdf"))


def test_a_library_title_and_an_error_print_as_escapes(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")
    lib = tmp_path / "library.bib"
    lib.write_text("@article{k1,\n  title = {" + ESC_TITLE + "},\n  file = {:" + str(tmp_path / "gone.pdf") + ":PDF}\n}\n",
                   encoding="utf-8")
    assert main(["--warehouse", str(tmp_path / "wh"), "import-pdfs", "--no-lookup", str(lib)]) == 0
    out = capsys.readouterr().out
    _no_controls(out)
    assert "[Deep \\x1b]0;pwned\\x07\\x1b[2J\\x1b[31mRed\\x00 Nets \\u202egnp.exe]" in out
    # an error naming a path with a newline is one line
    assert main(["--warehouse", str(tmp_path / "wh"), "import-pdfs", str(tmp_path / "no\nsuch\x1b[2J")]) == 2
    err = capsys.readouterr().err
    assert err == f"paperkb: error: {tmp_path}/no\\nsuch\\x1b[2J: no such folder\n"


@pytest.fixture(scope="module")
def hostile_snapshot(tmp_path_factory) -> Path:
    """A published warehouse of three papers, one of them titled with terminal escapes, NUL and an override."""
    from conftest import isolated_settings

    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps.embed import run_embed
    from pipeline.steps.graph import run_graph
    from pipeline.steps.publish import run_publish

    root = tmp_path_factory.mktemp("hostile")
    docs = root / "evil.jsonl"
    rows = [{"id": "1", "title": ESC_TITLE, "abstract": "Residual networks for image recognition.", "year": 2015,
             "authors": ["Mallory Evil", "Eve \x1b[31mRed"]},
            {"id": "2", "title": "Attention is all you need", "abstract": "Transformers for translation.", "year": 2017,
             "references": ["1"]},
            {"id": "3", "title": "Batch normalisation", "abstract": "Normalising layer inputs.", "year": 2015,
             "references": ["1"]}]
    docs.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    settings = isolated_settings(root / "warehouse")
    import_collection(settings, docs, fmt="jsonl")
    run_graph(settings)
    run_embed(settings)
    run_publish(settings)
    return settings.warehouse


@pytest.mark.parametrize("args", [["search", "residual networks image recognition"], ["search", "residual", "--wide"],
                                  ["show", "evil:1"], ["papers"], ["author", "Mallory Evil"], ["related", "evil:2"]],
                         ids=["search", "search-wide", "show", "papers", "author", "related"])
def test_views_print_a_hostile_title_as_escapes(hostile_snapshot, capsys, monkeypatch, args):
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["--warehouse", str(hostile_snapshot), *args]) == 0
    out = capsys.readouterr().out
    _no_controls(out)
    assert "\\x1b]0;pwned\\x07" in out or args[0] == "related", out  # (related shows the others: 1 cites none)
    if args[0] == "author":
        assert "Eve \\x1b[31mRed" in out  # a co-author's name


# ---- symbolic links ---------------------------------------------------------------------------------------------------
def test_links_to_files_outside_the_folder_are_skipped_unless_asked(shared_data, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")
    pdfs = shared_data / "arxiv" / "pdf"
    folder = tmp_path / "pdfs"
    (folder / "sub").mkdir(parents=True)
    (folder / "1508.04025.pdf").write_bytes((pdfs / "1508.04025.pdf").read_bytes())
    (folder / "inside.pdf").symlink_to(folder / "1508.04025.pdf")  # within the folder: read (the same paper)
    (folder / "sub" / "outside.pdf").symlink_to(pdfs / "1409.0473.pdf")  # the real file elsewhere
    (folder / "linked-dir").symlink_to(pdfs, target_is_directory=True)  # a folder link is not walked, as before
    wh = tmp_path / "wh"
    assert main(["--warehouse", str(wh), "import-pdfs", "--no-lookup", str(folder)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "2 PDF files in, 1 papers" in lines[0] and "1 links to files outside the folder skipped" in lines[0], lines
    assert lines[1] == "  rejected " + str(folder / "inside.pdf") + ": duplicate_paper: 1508.04025 is also " \
        + str(folder / "1508.04025.pdf")
    assert lines[2] == f"  skipped {folder / 'sub' / 'outside.pdf'}: a link to a file outside the folder (--follow-links reads it)"
    assert [r[0] for r in _rows(wh, "SELECT paper_id FROM papers")] == ["1508.04025"]
    assert main(["--warehouse", str(wh), "import-pdfs", "--no-lookup", "--follow-links", str(folder)]) == 0
    assert "3 PDF files in, 2 papers" in capsys.readouterr().out
    assert sorted(r[0] for r in _rows(wh, "SELECT paper_id FROM papers")) == ["1409.0473", "1508.04025"]
