"""`paperkb extract FILE.pdf --json` and `paperkb fulltext` through the real CLI entry point."""

from __future__ import annotations

import json

from fulltext_sources import read_pdf_table

from pipeline.cli import main


def test_extract_json_prints_pages_sections_chunks_figures(shared_data, settings, capsys, tmp_path):
    facts = {f.paper_id: f for f in read_pdf_table(shared_data / "arxiv" / "SOURCES.md")}
    pdf = shared_data / "arxiv" / "pdf" / "1512.03385.pdf"
    rc = main(["--warehouse", str(tmp_path / "wh"), "extract", str(pdf), "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["paper_id"] == "1512.03385" and out["n_pages"] == facts["1512.03385"].pages
    assert len(out["pages"]) == out["n_pages"] and all({"page", "char_start", "char_end"} <= set(p) for p in out["pages"])
    assert [s["title"] for s in out["sections"]][:2] == ["1. Introduction", "2. Related Work"]
    assert len(out["figures"]) == facts["1512.03385"].figures
    assert out["figures"][0]["figure_id"] == "1512.03385#fig1" and out["figures"][0]["label"] == "Figure 1"
    assert out["chunks"] and set(out["chunks"][0]) >= {"chunk_id", "section", "page_start", "page_end", "char_start",
                                                      "char_end", "text", "n_tokens", "content_hash"}
    assert out["abstract"].startswith("Deeper neural networks")


def test_extract_missing_or_bad_file_is_a_user_error(tmp_path, capsys):
    assert main(["extract", str(tmp_path / "nope.pdf")]) == 2
    assert "no such PDF file" in capsys.readouterr().err
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"<html>not a pdf</html>")
    assert main(["extract", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "not_pdf" in err and err.count("\n") == 1  # one line, no traceback


def test_fulltext_command_on_an_empty_warehouse(tmp_path, capsys, settings):
    rc = main(["--warehouse", str(tmp_path / "wh"), "fulltext"])
    assert rc == 0
    assert capsys.readouterr().out.startswith("fulltext: 0 papers in, 0 extracted")
