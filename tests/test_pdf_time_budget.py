"""Issue 64: a PDF of a few kilobytes can no longer stall ``import-pdfs``, ``fulltext`` or ``extract``.

- the two hostile ToUnicode maps of the issue (a 1,059-byte PDF that ran 240 s with no end, 20,000 unclosed
  ``beginbfchar`` that cost 23 s to import and 27 s to extract) import and extract in seconds, without a budget;
- each PDF is read in a worker process within ``PAPERKB_PDF_TIMEOUT_S``: a PDF MuPDF and the layout take a minute
  over (a content stream of hundreds of thousands of text operators, 8 to 16 kB) is rejected with reason
  ``timeout`` by all three commands, and the other files are read;
- the worker: a file it dies on is rejected (``crashed``) and the next goes to a new worker; the function's own
  rejection and errors come back as they were raised; its logs are logged in this process.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from pdf_builders import MILLION_CODE_RANGES, UNCLOSED_BFCHAR, pdf_with_tounicode, slow_pdf

from pipeline.cli import main

REPO_ROOT = Path(__file__).resolve().parent.parent
BUDGET_S = "5"


def _rows(wh: Path, sql: str) -> list[tuple]:
    con = duckdb.connect(str(wh / "warehouse.duckdb"), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_") or k == "PAPERKB_MODEL_CACHE_DIR"}
    return {**env, "PYTHONPATH": str(REPO_ROOT), "COLUMNS": "1000", **extra}


def test_the_issue_64_pdfs_import_and_extract_in_seconds(shared_data, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "pdfs"
    folder.mkdir()
    (folder / "ranges.pdf").write_bytes(pdf_with_tounicode(MILLION_CODE_RANGES))
    (folder / "unclosed.pdf").write_bytes(pdf_with_tounicode(UNCLOSED_BFCHAR))
    (folder / "1409.0473.pdf").write_bytes((shared_data / "arxiv" / "pdf" / "1409.0473.pdf").read_bytes())
    wh = tmp_path / "wh"
    # a process of its own, stopped if it runs on (it never ended before); no budget: the maps are read fast
    t0 = time.perf_counter()
    run = subprocess.run([sys.executable, "-m", "pipeline.cli", "--warehouse", str(wh), "import-pdfs", "--no-lookup",
                          str(folder)], env=_env(PAPERKB_PDF_TIMEOUT_S="0"), capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    assert "3 PDF files in, 3 papers (1 arXiv, 2 local" in run.stdout and "0 rejected" in run.stdout, run.stdout
    assert time.perf_counter() - t0 < 120
    monkeypatch.setenv("COLUMNS", "1000")
    monkeypatch.setenv("PAPERKB_PDF_TIMEOUT_S", BUDGET_S)  # and within the budget, in the worker
    assert main(["--warehouse", str(wh), "fulltext"]) == 0
    assert "3 papers in, 3 extracted" in capsys.readouterr().out
    for name in ("ranges.pdf", "unclosed.pdf"):
        assert main(["extract", str(folder / name)]) == 0
        assert capsys.readouterr().out.startswith(f"{name}: 1 pages, ")
    assert sorted(_rows(wh, "SELECT status, count(*) FROM fulltext_docs GROUP BY 1")) == [("ok", 3)]


def test_import_pdfs_rejects_a_pdf_past_the_budget_and_imports_the_others(shared_data, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")
    monkeypatch.setenv("PAPERKB_PDF_TIMEOUT_S", BUDGET_S)
    folder = tmp_path / "pdfs"
    folder.mkdir()
    slow = folder / "slow.pdf"
    slow.write_bytes(slow_pdf(heavy_pages=1, ops=250_000))  # 16 kB; read in-process: 43 s
    assert slow.stat().st_size < 20_000
    for stem in ("1409.0473", "1508.04025"):
        (folder / f"{stem}.pdf").write_bytes((shared_data / "arxiv" / "pdf" / f"{stem}.pdf").read_bytes())
    wh = tmp_path / "wh"
    t0 = time.perf_counter()
    assert main(["--warehouse", str(wh), "import-pdfs", "--no-lookup", str(folder)]) == 0
    took = time.perf_counter() - t0
    lines = capsys.readouterr().out.splitlines()
    assert "3 PDF files in, 2 papers (2 arXiv" in lines[0] and "1 rejected" in lines[0], lines
    assert lines[1] == (f"  rejected {slow}: timeout: not read within 5 s (PAPERKB_PDF_TIMEOUT_S); the worker reading "
                        "it was stopped")
    assert _rows(wh, "SELECT step, record_key, reason FROM rejects") == [("import-pdfs", str(slow), "timeout")]
    assert sorted(r[0] for r in _rows(wh, "SELECT paper_id FROM papers")) == ["1409.0473", "1508.04025"]
    assert took < 40, took  # the budget, a worker started twice, two real PDFs: not the slow file's 43 s


def test_fulltext_and_extract_reject_a_pdf_past_the_budget(shared_data, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")
    monkeypatch.setenv("PAPERKB_PDF_TIMEOUT_S", BUDGET_S)
    folder = tmp_path / "pdfs"
    folder.mkdir()
    late = folder / "late.pdf"  # two pages of text, then ten that take a minute to lay out: import-pdfs reads the two
    late.write_bytes(slow_pdf(heavy_pages=10, light_pages=2, ops=100_000))
    (folder / "1409.0473.pdf").write_bytes((shared_data / "arxiv" / "pdf" / "1409.0473.pdf").read_bytes())
    wh = tmp_path / "wh"
    assert main(["--warehouse", str(wh), "import-pdfs", "--no-lookup", str(folder)]) == 0
    assert "2 papers" in capsys.readouterr().out
    assert main(["--warehouse", str(wh), "fulltext"]) == 0
    out = capsys.readouterr().out
    assert "2 papers in, 1 extracted" in out and "1 rejected, 0 to retry" in out, out
    docs = _rows(wh, "SELECT paper_id, status, reason FROM fulltext_docs ORDER BY paper_id")
    assert docs[0] == ("1409.0473", "ok", None)
    assert docs[1][0].startswith("local:") and docs[1][1:] == ("rejected", "timeout")
    assert _rows(wh, "SELECT reason, detail FROM rejects WHERE step = 'fulltext'") == \
        [("timeout", "not read within 5 s (PAPERKB_PDF_TIMEOUT_S); the worker reading it was stopped")]
    from pipeline.query.reading import rejection_words

    assert "PAPERKB_PDF_TIMEOUT_S" in rejection_words("timeout")

    assert main(["extract", str(late)]) == 2
    err = capsys.readouterr().err
    assert err == f"paperkb: error: {late} cannot be used: timeout: not read within 5 s (PAPERKB_PDF_TIMEOUT_S); the " \
                  "worker reading it was stopped\n"


def test_the_worker_survives_what_it_reads(shared_data, caplog):
    import signal

    from pipeline.library.pdf_folder import read_pdf
    from pipeline.sources.pdf.text import PdfRejected
    from pipeline.sources.pdf.worker import PdfWorker

    with PdfWorker(30, preload=("pipeline.library.pdf_folder",)) as worker:
        assert worker.call(os.getpid) != os.getpid()
        with pytest.raises(PdfRejected) as rej:  # the worker dies (as on a crash in MuPDF): that file is rejected
            worker.call(signal.raise_signal, signal.SIGKILL)
        assert (rej.value.reason, rej.value.detail) == ("crashed", "the process reading it stopped (killed by signal SIGKILL)")
        assert worker.call(len, b"abc") == 3 and worker.started == 2  # ... and the next one goes to a new worker
        with pytest.raises(PdfRejected) as rej:  # the function's own rejection, as it was raised
            worker.call(read_pdf, b"<html>not a pdf</html>", "x.pdf")
        assert rej.value.reason == "not_pdf" and rej.value.detail.startswith("no %PDF- header")
        with pytest.raises(ValueError, match="invalid literal") as err:  # any other error, with where it was raised
            worker.call(int, "x")
        assert "in the PDF worker process" in err.value.__notes__[0]
        adam = (shared_data / "arxiv" / "pdf" / "1412.6980.pdf").read_bytes()
        with caplog.at_level(logging.INFO, logger="pipeline"):  # what it logs is logged here
            assert worker.call(read_pdf, adam, "1412.6980.pdf").paper_id == "1412.6980"
        assert any(r.name == "pipeline.sources.pdf.tounicode" and "read by the names" in r.getMessage()
                   for r in caplog.records), caplog.text
        assert worker.started == 2
    with PdfWorker(0) as none:  # no budget: in this process
        assert none.call(os.getpid) == os.getpid() and none.started == 0
