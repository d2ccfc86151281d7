"""``paperkb search`` as one process, the way a person runs it in a terminal (issue 29).

Behaviour, not timing (timings are in BENCHMARKS.md, "One-shot CLI search"): the search imports neither
torch nor sentence-transformers (the snapshot's own query encoder runs on ONNX Runtime), nor LanceDB (Lance
reads the tables), pandas, FastAPI, Airflow or the HTTP client; stdout has the results and stderr nothing;
``-v`` adds one line of timings on stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NEVER = ("torch", "sentence_transformers", "transformers", "lancedb", "pandas", "fastapi", "airflow", "requests",
         "pipeline.sources", "pipeline.steps")

# the command line, with the names of every module imported dumped at exit
RUN = """
import atexit, json, sys
atexit.register(lambda: open(sys.argv[1], "w").write(json.dumps(sorted(sys.modules))))
from pipeline.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _paperkb(settings, tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    dump = tmp_path / "modules.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", COLUMNS="100")
    p = subprocess.run([sys.executable, "-c", RUN, str(dump), "--warehouse", str(settings.warehouse), *args],
                       capture_output=True, text=True, env=env, timeout=300)
    return p, set(json.loads(dump.read_text())) if dump.is_file() else set()


def _imported(modules: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


@pytest.mark.parametrize("filters", [[], ["--author", "Salton", "--json"]])
def test_search_imports_no_heavy_module_and_prints_only_results(cisi_snapshot, tmp_path, filters):
    q = "information retrieval evaluation" if not filters else "automatic indexing"
    p, modules = _paperkb(cisi_snapshot, tmp_path, "search", q, "-k", "5", *filters)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    if filters:  # the filtered BM25 comes from the in-memory index too (no LanceDB)
        results = json.loads(p.stdout)["results"]
        assert results and all(any("Salton" in a for a in r["authors"]) for r in results)
    else:
        assert "Foundation of Evaluation" in p.stdout and "cisi:" in p.stdout
    assert modules and "onnxruntime" in modules and "tokenizers" in modules and "lance" in modules
    assert [n for n in NEVER if _imported(modules, n)] == []


def test_verbose_search_prints_where_the_time_went(cisi_snapshot, tmp_path):
    p, modules = _paperkb(cisi_snapshot, tmp_path, "-v", "search", "citation analysis", "-k", "3", "--json")
    assert p.returncode == 0, p.stderr
    resp = json.loads(p.stdout)
    timings = [ln for ln in p.stderr.splitlines() if ln.startswith("timings: ")]
    assert len(timings) == 1, p.stderr
    for phase in ("open", "load", "encode", "search", "print", "total"):
        assert f"{phase} " in timings[0], timings[0]
    assert "onnx-fp32 (the snapshot's export)" in timings[0]
    # took_ms is the search alone: well under what loading the snapshot and the encoder took
    assert 0 < resp["took_ms"] < 5000
    assert not _imported(modules, "torch")


def test_a_snapshot_published_before_issue_29_is_searched_with_sentence_transformers(cisi_snapshot_as_before, tmp_path):
    p, modules = _paperkb(cisi_snapshot_as_before, tmp_path, "search", "information retrieval evaluation", "-k", "5")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""  # no INFO lines, no "Loading weights" or "Batches" bars
    assert "Foundation of Evaluation" in p.stdout
    assert _imported(modules, "sentence_transformers") and "onnxruntime" not in modules


@pytest.mark.parametrize("args", [["search", ""], ["search", "x", "-k", "0"]])
def test_bad_input_is_one_line(cisi_snapshot, tmp_path, args):
    p, _ = _paperkb(cisi_snapshot, tmp_path, *args)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and p.stderr.startswith("paperkb: error: ")
