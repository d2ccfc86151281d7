"""Every error a user can cause or meet is one line on stderr (exit 2 for user and environment errors,
1 for a failed step) and ``-v`` shows the traceback: a warehouse that is a file, a read-only warehouse,
a second writer while DuckDB's lock is held, damaged JSON, LanceDB I/O. Also what a new user sees first:
the results table at 80 columns, and ``refresh`` on an empty source."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import describe_error, main

REPO = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


def _cli(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True,
                          env=_env(), cwd=REPO, timeout=timeout)


def _error_line(stderr: str) -> str:
    """The one ``paperkb: error:`` line, asserting that nothing else on stderr is an error or a traceback."""
    assert "Traceback" not in stderr, stderr
    lines = [ln for ln in stderr.splitlines() if ln.startswith("paperkb: error:")]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture(scope="module")
def tiny_warehouse(tmp_path_factory) -> Path:
    """A published warehouse of six papers (a DuckDB warehouse, a working LanceDB, one snapshot)."""
    from pipeline.sources.local_corpus import import_collection
    from pipeline.steps.embed import run_embed
    from pipeline.steps.graph import run_graph
    from pipeline.steps.publish import run_publish
    from pipeline.settings import Settings

    root = tmp_path_factory.mktemp("tiny")
    docs = root / "tiny.jsonl"
    topics = ["hash tables and collision resolution", "sorting algorithms on tapes", "compilers for ALGOL",
              "information retrieval evaluation", "operating system paging", "matrix inversion numerics"]
    docs.write_text("".join(json.dumps({"id": str(i), "title": t.title(), "abstract": f"A paper about {t}.",
                                        "year": 1970 + i, "references": [str(i - 1)] if i else []}) + "\n"
                            for i, t in enumerate(topics)))
    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.startswith("PAPERKB_") and key not in ("PAPERKB_SHARED_DATA", "PAPERKB_SERVE_ALLOWED_HOSTS"):
                mp.delenv(key, raising=False)
        settings = Settings.load(warehouse=root / "warehouse")
    import_collection(settings, docs, fmt="jsonl")
    run_graph(settings)
    run_embed(settings)
    run_publish(settings)
    return settings.warehouse


# ---- --warehouse pointing at a file ----------------------------------------------------------------------
@pytest.mark.parametrize("args", [["graph"], ["search", "hash tables"], ["snapshots", "list"], ["publish"],
                                  ["import-pdfs", "."]])
def test_warehouse_that_is_a_file_is_one_line_exit_2(args, tmp_path, capsys):
    f = tmp_path / "not-a-dir"
    f.write_text("x")
    assert main(["--warehouse", str(f), *args]) == 2
    err = capsys.readouterr().err
    assert _error_line(err) == (f"paperkb: error: the warehouse {f} is a file, not a directory: point --warehouse "
                                "at a directory (a new one is created)")


def test_a_file_where_a_directory_is_expected_inside_the_warehouse(tmp_path, capsys):
    wh = tmp_path / "wh"
    wh.mkdir()
    (wh / "snapshots").write_text("a file where the snapshots folder belongs")
    assert main(["--warehouse", str(wh), "search", "hash tables"]) == 2
    line = _error_line(capsys.readouterr().err)
    assert str(wh / "snapshots") in line


# ---- a read-only warehouse -------------------------------------------------------------------------------
def _run_read_only(warehouse: Path, *args: str) -> subprocess.CompletedProcess:
    """``paperkb --warehouse W ARGS`` with W read-only: chmod for a normal user; as root (whom chmod does
    not stop) a read-only bind mount of W inside a private mount namespace (nothing leaks outside it)."""
    cmd = [sys.executable, "-m", "pipeline.cli", "--warehouse", str(warehouse), *args]
    if os.geteuid() != 0:
        subprocess.run(["chmod", "-R", "a-w", str(warehouse)], check=True)
        try:
            return subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=REPO, timeout=300)
        finally:
            subprocess.run(["chmod", "-R", "u+w", str(warehouse)], check=True)
    if not shutil.which("unshare") or subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode:
        pytest.skip("running as root, where chmod does not make a directory read-only, and `unshare -m` "
                    "(for a read-only bind mount) is not permitted here")
    script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    return subprocess.run(["unshare", "-m", "sh", "-c", script, str(warehouse), *cmd], capture_output=True,
                          text=True, env=_env(), cwd=REPO, timeout=300)


def test_read_only_warehouse_steps_fail_with_one_line_and_search_still_works(tiny_warehouse):
    graph = _run_read_only(tiny_warehouse, "graph")
    assert graph.returncode == 2, graph.stderr
    assert "read-only file system" in _error_line(graph.stderr)  # the writer lock's check, before DuckDB

    publish = _run_read_only(tiny_warehouse, "publish")
    assert publish.returncode == 2, publish.stderr
    assert "read-only file system" in _error_line(publish.stderr)

    embed = _run_read_only(tiny_warehouse, "embed")
    assert embed.returncode == 2, embed.stderr
    assert "read-only file system" in _error_line(embed.stderr)

    found = _run_read_only(tiny_warehouse, "search", "hash tables", "-k", "2", "--json")
    assert found.returncode == 0, found.stderr  # reading a snapshot needs no write access
    assert json.loads(found.stdout)["results"][0]["paper_id"] == "tiny:0"


# ---- a second writer while DuckDB's lock is held ---------------------------------------------------------
def test_second_writer_gets_one_line_naming_the_holder(tiny_warehouse):
    import duckdb

    con = duckdb.connect(str(tiny_warehouse / "warehouse.duckdb"))  # as a running `paperkb graph` holds it
    try:
        second = _cli("--warehouse", str(tiny_warehouse), "graph")
        verbose = _cli("--warehouse", str(tiny_warehouse), "-v", "graph")
    finally:
        con.close()
    assert second.returncode == 2
    line = _error_line(second.stderr)
    assert "is in use by another process" in line and f"(PID {os.getpid()})" in line, line
    assert verbose.returncode == 2
    assert "Traceback" in verbose.stderr and verbose.stderr.strip().splitlines()[-1] == line


# ---- the families, one by one ----------------------------------------------------------------------------
def _raise_reading(path: str):
    text = Path(path).read_text()
    return json.loads(text)


def test_describe_error_families(tmp_path):
    bad = tmp_path / "manifest.json"
    bad.write_text('{"snapshot_id": "x", ')
    try:
        _raise_reading(str(bad))
    except json.JSONDecodeError as exc:
        code, line = describe_error(exc)
    assert code == 2 and line.startswith(f"{bad} is damaged (not valid JSON")

    assert describe_error(OSError(errno.EADDRINUSE, "Address already in use"))[0] == 2
    code, line = describe_error(PermissionError(errno.EACCES, "Permission denied", "/srv/wh/snapshots/.publish.lock"))
    assert code == 2 and "/srv/wh/snapshots/.publish.lock" in line
    code, line = describe_error(OSError('lance error: LanceError(IO): Read-only file system (os error 30) at path '
                                        '"/wh/lancedb/chunks.lance/x", ~/.cargo/registry/src/lance-io/src/a.rs:10:3'))
    assert code == 2 and line == ('LanceDB cannot write its files: Read-only file system (os error 30) at path '
                                  '"/wh/lancedb/chunks.lance/x": check the permissions of the warehouse (--warehouse)')
    code, line = describe_error(RuntimeError("lance error: Not found: /wh/lancedb/chunks.lance/data/a.lance\nmore"))
    assert code == 2 and "\n" not in line
    code, line = describe_error(ValueError("something broke\nsecond line"))
    assert (code, line) == (1, "ValueError: something broke")


def test_a_failed_step_is_one_line_exit_1_and_v_shows_the_traceback(tmp_path, monkeypatch, capsys):
    import pipeline.steps.graph

    def broken(settings, **options):
        raise ValueError("igraph said no\nsecond line")

    monkeypatch.setattr(pipeline.steps.graph, "run_graph", broken)
    assert main(["--warehouse", str(tmp_path / "wh"), "graph"]) == 1
    err = capsys.readouterr().err
    assert _error_line(err) == "paperkb: error: ValueError: igraph said no (paperkb -v ... shows the traceback)"
    assert main(["-v", "--warehouse", str(tmp_path / "wh"), "graph"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1] == "paperkb: error: ValueError: igraph said no"


# ---- first impressions: the results table at 80 columns ------------------------------------------------
def test_search_table_is_readable_at_80_columns(cisi_snapshot, monkeypatch, capsys):
    query = "information retrieval evaluation of search systems"
    wh = str(cisi_snapshot.warehouse)
    assert main(["--warehouse", wh, "search", query, "-k", "5", "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["--warehouse", wh, "search", query, "-k", "5"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert not re.search(r"\w\u2026", out), out  # no cell cut short like "Li…" or "1.…"
    flat = " ".join(out.split())
    for r in results:
        assert r["paper_id"] in out and f"{r['score']:.3f}" in out
        for name, value in r["signals"].items():
            assert f"{name}={value:.3f}" in out
        assert " ".join(r["title"].split()[:4]) in flat

    assert main(["--warehouse", wh, "search", query, "-k", "2", "--wide"]) == 0
    wide = capsys.readouterr().out
    header = next(line for line in wide.splitlines() if "score" in line)
    assert all(f" {name} " in header for name in results[0]["signals"])
    assert not re.search(r"\w\u2026", wide)

    pid = results[0]["paper_id"]
    assert main(["--warehouse", wh, "related", pid, "-k", "5", "--json"]) == 0
    related = json.loads(capsys.readouterr().out)["related"]
    assert main(["--warehouse", wh, "related", pid, "-k", "5"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80
    assert not re.search(r"\w\u2026", out), out
    for r in related:
        assert (r["paper_id"] or r["work_id"]) in out and f"{r['score']:.3f}" in out and f"sem={r['semantic']:.3f}" in out


# ---- refresh on an empty source --------------------------------------------------------------------------
def test_refresh_on_an_empty_source_warns_and_keeps_current(tiny_warehouse, tmp_path, capsys):
    wh = tmp_path / "wh"
    shutil.copytree(tiny_warehouse / "snapshots", wh / "snapshots")
    before = (wh / "snapshots" / "CURRENT").read_text()
    folders = sorted(p.name for p in (wh / "snapshots").iterdir())
    assert main(["--warehouse", str(wh), "refresh", "--replay"]) == 0
    out, err = capsys.readouterr()
    warnings = [ln for ln in err.splitlines() if ln.startswith("paperkb: warning:")]
    assert len(warnings) == 1 and "holds no papers" in warnings[0] and before.strip() in warnings[0], err
    assert out.strip().splitlines()[-1].endswith("nothing published")
    assert (wh / "snapshots" / "CURRENT").read_text() == before
    assert sorted(p.name for p in (wh / "snapshots").iterdir()) == folders


def test_a_search_whose_filters_match_no_paper_says_so(cisi_snapshot, capsys):
    """``paperkb search Q --author NAME`` with an author no paper has ended in "TypeError: unsupported format string
    passed to NoneType.__format__": that search returned before it timed itself."""
    wh = str(cisi_snapshot.warehouse)
    for verbose in ([], ["-v"]):
        assert main([*verbose, "--warehouse", wh, "search", "information retrieval", "--author", "Nobody Atall"]) == 0
        captured = capsys.readouterr()
        assert "0 papers" in captured.out and "no paper matches the filters" in captured.out
        assert "Traceback" not in captured.err and "error" not in captured.err
    assert main(["--warehouse", wh, "search", "information retrieval", "--year-from", "2100", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["results"] == [] and got["took_ms"] >= 0 and "no paper matches the filters" in got["notes"]
