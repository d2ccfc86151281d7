"""The README's "For analysts: DuckDB" section, run as written against a real CACM snapshot.

The section's ``bash analyst`` block runs line by line in one ``bash`` session, from a folder laid out like a
fresh clone after ``make run`` (``warehouse/`` holding the snapshot, ``.venv/`` the environment these tests
run in): every command must succeed, print nothing on stderr, and every file it writes must hold rows. Its
``sql analyst`` blocks run through ``paperkb sql -f`` and every statement must return rows on CACM;
``sql analyst=arxiv`` blocks must run (they return rows on arXiv papers only)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import readme_deploy

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
SECTION = "## For analysts: DuckDB"
BLOCK = re.compile(r"^```(bash|sql) (analyst(?:=[\w-]+)?)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


def section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(SECTION)
    nxt = re.search(r"^#{1,2} ", text[start + len(SECTION):], re.M)
    return text[start:start + len(SECTION) + nxt.start()] if nxt else text[start:]


def blocks(kind: str) -> list[tuple[str, str]]:
    """``(marker, body)`` of the section's fenced blocks of ``kind`` (bash or sql) marked ``analyst...``."""
    return [(marker, body) for k, marker, body in BLOCK.findall(section()) if k == kind]


def json_results(text: str) -> list[list[dict]]:
    dec, i, out = json.JSONDecoder(), 0, []
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        value, i = dec.raw_decode(text, i)
        out.append(value)


@pytest.fixture(scope="module")
def clone(cacm_snapshot, tmp_path_factory) -> Path:
    """A folder like a fresh clone after ``make run``: ``warehouse`` (the CACM snapshot's) and ``.venv``."""
    root = tmp_path_factory.mktemp("clone")
    (root / "warehouse").symlink_to(cacm_snapshot.warehouse, target_is_directory=True)
    venv = Path(sys.prefix)
    if (venv / "bin" / "activate").is_file() and (venv / "bin" / "paperkb").is_file():
        (root / ".venv").symlink_to(venv, target_is_directory=True)
    else:  # not run from a virtual environment: an activate script that puts this Python's paperkb first
        bin_dir = root / ".venv" / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "paperkb").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pipeline.cli "$@"\n')
        (bin_dir / "paperkb").chmod(0o755)
        (bin_dir / "activate").write_text(f'export PATH="{bin_dir}:$PATH"\n')
    return root


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env.update(PYTHONPATH=str(REPO_ROOT), HF_HUB_OFFLINE="1", COLUMNS="80")
    return env


def test_the_section_has_its_blocks():
    assert [m for m, _ in blocks("bash")] == ["analyst"]
    markers = [m for m, _ in blocks("sql")]
    assert "analyst" in markers and "analyst=arxiv" in markers
    assert "duckdb -readonly" not in section()


def test_the_commands_run_as_written(clone):
    [(_, block)] = blocks("bash")
    commands = readme_deploy.commands(block)
    assert commands[0].startswith(". .venv/bin/activate") and any(c.startswith("paperkb sql") for c in commands)
    before = set(clone.iterdir())
    for command in commands[1:]:  # the activation is the only state a line leaves for the next ones
        script = f"set -euo pipefail\n{commands[0]}\n{command}\n"
        res = subprocess.run(["bash", "-c", script], cwd=clone, env=_env(), capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, (command, res.stderr[-2000:])
        assert res.stderr == "", (command, res.stderr)
        assert not re.search(r"(^|\s)0 rows|^\[\]$", res.stdout, re.M), (command, res.stdout)
        assert max((len(x) for x in res.stdout.splitlines()), default=0) <= 80, (command, res.stdout)
    written = set(clone.iterdir()) - before
    assert written, "the block writes its examples' files (a CSV, a script)"
    for f in written:
        assert len(f.read_text(encoding="utf-8").splitlines()) > 1, f


@pytest.mark.parametrize("marker", ["analyst", "analyst=arxiv"])
def test_the_sql_examples_run(clone, marker):
    bodies = [body for m, body in blocks("sql") if m == marker]
    assert bodies
    for body in bodies:
        n_statements = len([s for s in body.split(";") if re.sub(r"--[^\n]*", "", s).strip()])
        res = subprocess.run([str(clone / ".venv" / "bin" / "paperkb"), "sql", "--format", "json"], input=body,
                             cwd=clone, env=_env(), capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr
        results = json_results(res.stdout)
        assert len(results) == n_statements, res.stdout[:2000]
        if marker == "analyst":  # CACM has citations, PageRank, related rows: every example returns rows
            assert all(results), [len(r) for r in results]
