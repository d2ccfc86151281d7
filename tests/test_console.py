"""A quiet console that fits 80 columns: progress reporting, wrapping, and every read command's output on a
real CACM snapshot with COLUMNS=80 (no line longer than 80 characters, nothing on stderr)."""

from __future__ import annotations

import io
import logging
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import SNAPSHOT_BACKEND
from pipeline import progress
from pipeline.cli.console import RichReporter, short, wrap


REPO_ROOT = Path(__file__).resolve().parents[1]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_") or k == "PAPERKB_SHARED_DATA"}
    env.update(PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", COLUMNS="80", **extra)
    return env


def _cli(warehouse: Path, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "--warehouse", str(warehouse), *args], capture_output=True,
                          text=True, env=_env(**env), cwd=cwd or REPO_ROOT, timeout=600)


def _too_wide(text: str, width: int = 80) -> list[str]:
    return [line for line in text.splitlines() if len(line) > width]


# ---- pure parts ----------------------------------------------------------------------------------------
def test_wrap_keeps_short_lines_and_indents_continuations():
    assert wrap("short line", 80) == "short line"
    long = "graph: " + " ".join(f"word{i}" for i in range(40))
    lines = wrap(long, 40).splitlines()
    assert all(len(x) <= 40 for x in lines) and len(lines) > 3
    assert all(x.startswith("  ") for x in lines[1:]) and " ".join(x.strip() for x in lines) == long
    nested = wrap("    cites   " + "x " * 50, 30).splitlines()
    assert all(x.startswith("      ") for x in nested[1:])  # the line's own indentation plus two
    assert all(x.startswith(" " * 12) for x in wrap("a " * 60, 30, indent=" " * 12).splitlines()[1:])
    assert max(len(x) for x in wrap("x" * 200, 50).splitlines()) <= 50  # a word longer than the line is cut


def test_short_cuts_between_words():
    assert short("a  b\nc", 10) == "a b c"
    assert short("alpha beta gamma delta", 14) == "alpha beta \u2026"
    assert len(short("x" * 100, 20)) <= 20


def test_describe_and_duration():
    assert progress.duration(42) == "42s" and progress.duration(185) == "3m05s" and progress.duration(3720) == "1h02m"
    line = progress.describe("embed: encoding", 1024, 3013, "texts", 70)
    assert line.startswith("embed: encoding: 1,024/3,013 texts (34%), 1m10s, about 2m16s left")
    assert progress.describe("publish: verifying", 0, None, "", 3) == "publish: verifying: 3s"


def test_line_reporter_prints_periodic_lines_and_the_end():
    lines: list[str] = []
    with progress.reporting(progress.LineReporter(lines.append, interval_s=0.0)):
        with progress.task("fulltext: PDFs", total=4, unit="papers") as bar:
            bar.advance(2)
            bar.stage("fulltext: merging")
    assert len(lines) == 2 and lines[0].startswith("fulltext: PDFs: 2/4 papers (50%)")
    assert lines[1].startswith("fulltext: merging: ")  # and no "done" line repeating it: nothing changed since
    quiet: list[str] = []
    with progress.reporting(progress.LineReporter(quiet.append, interval_s=3600)):
        with progress.task("graph", total=10) as bar:
            bar.advance(10)
    assert quiet == []  # a task shorter than the interval prints nothing: the step's summary says enough


def test_tasks_count_from_threads():
    seen: list[progress.Task] = []

    class Keep(progress.NullReporter):
        def start(self, task):
            seen.append(task)

    with progress.reporting(Keep()):
        with progress.task("embed: encoding", unit="texts") as bar:
            threads = [threading.Thread(target=lambda: [bar.advance() for _ in range(1000)]) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    assert seen[0].completed == 4000


def test_without_a_reporter_progress_is_logged(caplog):
    """Python and Airflow: no terminal, the logger ``pipeline.progress`` (at most every LOG_INTERVAL_S)."""
    assert isinstance(progress.current(), progress.LineReporter)
    caplog.set_level(logging.INFO, logger="pipeline.progress")
    with progress.reporting(progress.LineReporter(logging.getLogger("pipeline.progress").info, interval_s=0.0)):
        with progress.task("enrich: Semantic Scholar papers", total=3, unit="papers") as bar:
            bar.advance(3)
    assert "enrich: Semantic Scholar papers: 3/3 papers (100%)" in caplog.text


def test_rich_reporter_draws_one_bar_and_leaves_nothing_behind():
    from rich.console import Console

    buf = io.StringIO()
    with progress.reporting(RichReporter(Console(file=buf, force_terminal=True, width=80))):
        with progress.task("embed: encoding", total=300, unit="texts") as bar:
            bar.advance(256)
            bar.update(description="embed: encoding (almost)")
    out = buf.getvalue()
    assert "embed: encoding" in out and "/300 texts" in out
    assert out.rstrip("\r").endswith("\x1b[2K\x1b[?25h")  # transient: the bar's line is cleared at the end


# ---- the CLI on real data --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cacm_cli(cacm_snapshot, tmp_path_factory):
    """The CACM snapshot's warehouse and a folder with the inputs some commands read (queries and
    judgements for eval, a BibTeX library for match-library), made from the collection's own titles."""
    d = tmp_path_factory.mktemp("console")
    (d / "queries.tsv").write_text("q1\thash table storage techniques\nq2\tALGOL language report\n", encoding="utf-8")
    (d / "qrels.txt").write_text("q1 0 1785 1\nq1 0 911 1\nq2 0 1 1\nq2 0 3184 1\n", encoding="utf-8")
    (d / "library.bib").write_text(
        "@article{morris1968, title={Scatter Storage Techniques}, author={Morris, Robert}, year={1968}}\n"
        "@article{nowhere, title={A Study of Something With a Very Long Title That No Collection Holds, Not CACM and "
        "Not CISI Either, So That It Wraps}, year={2001}}\n", encoding="utf-8")
    return cacm_snapshot.warehouse, d


READ_COMMANDS = [
    ("search", "hash table collision resolution"),
    ("search", "hashing", "-k", "3", "--year-from", "1970"),
    ("ask", "How are collisions resolved in hash tables?", "-k", "3"),
    ("related", "cacm:1785", "-k", "5"),
    ("path", "cacm:1785", "cacm:1"),
    ("path", "cacm:1785", "cacm:1", "--max-length", "1"),
    ("recommend", "--pos", "cacm:1785,cacm:1", "-k", "5"),
    ("eval", "--queries", "{d}/queries.tsv", "--qrels", "{d}/qrels.txt"),
    ("export", "cacm:1785", "-o", "{d}/one.bib"),
    ("snapshots", "list"),
    ("snapshots", "verify"),
    ("feeds",),
    ("interests", "list"),
    ("match-library", "{d}/library.bib"),
    ("sql", "FROM most_central_papers LIMIT 30"),
    ("sql", "SELECT paper_id, title, abstract FROM papers LIMIT 3"),
    ("extract", "{shared}/arxiv/pdf/1409.0473.pdf"),
    ("show", "cacm:1785"),
    ("papers", "--sort", "citations"),
    ("author", "Morris, R."),
    ("--help",),
    ("search", "--help"),
    ("sql", "--help"),
]


@pytest.mark.parametrize("args", READ_COMMANDS, ids=lambda a: " ".join(a)[:40])
def test_read_commands_fit_80_columns_and_keep_stderr_empty(cacm_cli, shared_data, args):
    warehouse, d = cacm_cli
    args = tuple(a.format(d=d, shared=shared_data) for a in args)
    res = _cli(warehouse, *args)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip(), args
    assert _too_wide(res.stdout) == [], res.stdout
    assert res.stderr == "", res.stderr  # no INFO lines, no "Loading weights" or "Batches" bars


def test_summaries_print_once_and_fit(shared_data, tmp_path, cacm_snapshot):
    """A step prints its summary once (no INFO line repeating it), wrapped to 80 columns, and refresh one
    summary per step; -v turns the logs on. (``cacm_snapshot``: CACM's vectors are in the run's vector cache.)"""
    wh = tmp_path / "wh"
    res = _cli(wh, "import-collection", str(shared_data / "collections" / "cacm"))
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert res.stdout.startswith("import-collection cacm: 3204 papers") and _too_wide(res.stdout) == []
    graph = _cli(wh, "graph")
    assert graph.returncode == 0 and graph.stderr == "", graph.stderr
    assert graph.stdout.count("graph: ") == 1 and len(graph.stdout.splitlines()) >= 2 and _too_wide(graph.stdout) == []
    # CACM's vectors as cacm_snapshot encoded them (its backend, its cache): the refresh reads them, encodes none
    refresh = _cli(wh, "refresh", "--replay", PAPERKB_EMBED_CACHE_DIR=str(cacm_snapshot.embed_cache_dir or wh / "cache"),
                   PAPERKB_EMBED_BACKEND=SNAPSHOT_BACKEND)
    assert refresh.returncode == 0 and refresh.stderr == "", refresh.stderr
    steps = [line.split()[1] for line in refresh.stdout.splitlines() if line.startswith("[")]
    assert steps == ["harvest", "enrich", "fulltext", "graph", "embed", "publish"] and _too_wide(refresh.stdout) == []
    flat = " ".join(refresh.stdout.split())
    assert "[4/6] graph" in flat and "3204 works, 2720 citations" in flat and "3204 passages, 3204 papers" in flat
    assert refresh.stdout.splitlines()[-1].startswith("refresh: done in")
    verbose = _cli(wh, "-v", "import-collection", str(shared_data / "collections" / "cacm"))
    assert verbose.returncode == 0 and "INFO pipeline.sources.local_corpus: imported cacm" in verbose.stderr


def test_related_says_one_citation_in_the_singular(cacm_cli):
    """`related` prints each work's year and citations: "(1977, 1 citation)", not "1 citations"."""
    warehouse, _d = cacm_cli
    res = _cli(warehouse, "related", "cacm:3075", "-k", "10")
    assert res.returncode == 0, res.stderr[-3000:]
    assert re.search(r"\(\d{4}, 1 citation\)", res.stdout), res.stdout
    assert re.search(r"\(\d{4}, \d+ citations\)", res.stdout), res.stdout  # and the plural for the others
    assert not re.search(r"\b1 citations\b", res.stdout), res.stdout


def test_search_results_name_their_authors_as_a_citation_does(cacm_cli):
    """A result said only ``cacm:1785 (1968)``: it names its authors too (``Morris`` alone, ``A & B``, ``A et al.``)."""
    warehouse, _d = cacm_cli
    res = _cli(warehouse, "search", "scatter storage techniques", "-k", "3")
    assert res.returncode == 0, res.stderr[-3000:]
    assert "cacm:1785 · Morris (1968)" in res.stdout, res.stdout
