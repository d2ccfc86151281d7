"""Shared fixtures: the real data beside the checkout, isolated settings, offline models."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Starlette's TestClient sends ``Host: testserver``; the server answers loopback names only by default.
TEST_HOSTS = '["localhost", "127.0.0.1", "::1", "testserver"]'
os.environ.setdefault("PAPERKB_SERVE_ALLOWED_HOSTS", TEST_HOSTS)
# Exported models (above all the default openvino int8 one, whose quantization costs ~10 s of CPU) are made once per
# test session in one temporary model cache, shared by every warehouse and vector cache the tests make and by the
# subprocesses that inherit the environment (those that drop PAPERKB_* use the user's ~/.cache/paperkb/models:
# once per host). The rename into place and a file lock keep concurrent exporters from reading half a folder.
_MODEL_CACHE = tempfile.mkdtemp(prefix="paperkb-test-models-")
atexit.register(shutil.rmtree, _MODEL_CACHE, True)
os.environ.setdefault("PAPERKB_MODEL_CACHE_DIR", _MODEL_CACHE)
KEEP_ENV = ("PAPERKB_SHARED_DATA", "PAPERKB_SERVE_ALLOWED_HOSTS", "PAPERKB_MODEL_CACHE_DIR")

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = Path(os.environ.get("PAPERKB_SHARED_DATA", REPO_ROOT.parent / "shared" / "data"))


# The files that take longest (minutes each: a Celery cluster, an Airflow scheduler, model exports, a kill -9 loop,
# fresh virtualenvs), longest first, are handed out first, so that under ``make test``'s two workers (--dist loadfile)
# the deployment starts at once, the other worker takes the rest, and the run ends on short files on both workers
# rather than one worker alone on a long one (the order: the slowest files of a full run, 8 Dec; pytest-xdist would
# sort them by their number of tests instead, which pytest_configure below turns off).
LONGEST_FIRST = ("test_deployment.py", "test_airflow_e2e.py", "test_embed_backends.py", "test_snapshot_store.py",
                 "test_packaging.py", "test_feeds.py", "test_fault_injection.py", "test_embed_crash.py", "test_embed.py",
                 "test_ask.py", "test_unreachable.py")


def pytest_configure(config):
    # pytest-xdist (3.x) hands out --dist loadfile/loadscope units sorted by their number of tests unless told not to
    # (--no-loadscope-reorder): that order put the 6-test deployment file near the end of the run, not first
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data``: the recorded responses, PDFs and test collections."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real test data not found at {SHARED_DATA} (expected ../shared/data beside the checkout)")
    return SHARED_DATA


@pytest.fixture
def settings(tmp_path, monkeypatch):
    """Settings with a fresh warehouse under tmp_path and no politeness delays (tests only)."""
    for key in list(os.environ):
        if key.startswith("PAPERKB_") and key not in KEEP_ENV:
            monkeypatch.delenv(key, raising=False)
    monkeypatch.delenv("S2_API_KEY", raising=False)
    from pipeline.settings import Settings

    return Settings.load(warehouse=tmp_path / "warehouse", arxiv_delay_s=0.0, s2_delay_s=0.0, retry_max_backoff_s=0.05)


def isolated_settings(warehouse: Path, **overrides):
    """``Settings`` for ``warehouse`` that ignore the caller's PAPERKB_* environment (but the kept ones)."""
    from pipeline.settings import Settings

    with pytest.MonkeyPatch.context() as mp:
        for key in list(os.environ):
            if key.startswith("PAPERKB_") and key not in KEEP_ENV:
                mp.delenv(key, raising=False)
        return Settings.load(warehouse=warehouse, **overrides)


# The shared snapshots embed with torch fp32, not the CPU default (openvino: fp32 here, bf16 on a CPU with native
# bfloat16): the search, evaluation and query encoder tests that read them were written against torch fp32's vectors
# (exact scores, nDCG margins, an ONNX fp32 query export) on whatever CPU runs them, and their vectors stay cached
# under .pytest_cache across sessions. The default's own vectors are tested in
# test_embed.py and test_embed_backends.py (and every test warehouse that embeds with the `settings` fixture).
SNAPSHOT_BACKEND = "torch"

# ---- embed / publish (issue 6) ------------------------------------------------------------------
@contextmanager
def _once_per_run(tmp_path_factory, name: str) -> Iterator[tuple[Path, bool]]:
    """A folder for a session fixture, and whether it still has to be built.

    Under pytest-xdist (``make test`` runs two workers) the first worker that asks builds it in a folder
    every worker of the run sees (the run's temp root), holding a lock; the others wait for the lock and read
    what it built. A build that failed leaves no ``.built`` mark: the next worker that asks starts over.
    Without xdist it is a fresh temp folder, built by this process."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        yield tmp_path_factory.mktemp(name), True
        return
    import fcntl  # stdlib: a lock file is all this needs (pins.py uses the same flock)

    root = tmp_path_factory.getbasetemp().parent / "shared-fixtures"
    root.mkdir(exist_ok=True)
    folder, mark = root / name, root / f"{name}.built"
    with open(root / f"{name}.lock", "w") as lock:  # closing the file drops the lock, on an error too
        fcntl.flock(lock, fcntl.LOCK_EX)
        if mark.exists():
            yield folder, False
            return
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        yield folder, True
        mark.touch()


def _vector_cache(request) -> Path | None:
    return request.config.cache.mkdir("paperkb-vector-cache") if getattr(request.config, "cache", None) else None


def _snapshot_of(tmp_path_factory, request, shared_data: Path, name: str, collection: str, first: int | None = None):
    """Settings of a warehouse where ``collection`` (its ``first`` records only, when given) was imported, the graph
    computed, embedded (torch fp32, vectors cached under .pytest_cache) and published; built once per test run
    (``_once_per_run``)."""
    with _once_per_run(tmp_path_factory, name) as (folder, build):
        settings = isolated_settings(folder / "warehouse", embed_cache_dir=_vector_cache(request),
                                     embed_backend=SNAPSHOT_BACKEND)
        if build:
            from pipeline.sources.local_corpus import import_collection
            from pipeline.steps.embed import run_embed
            from pipeline.steps.graph import run_graph
            from pipeline.steps.publish import run_publish

            path = shared_data / "collections" / collection
            if first is not None:  # a folder named after the collection, holding its documents' first records
                from embed_helpers import smart_head
                from pipeline.sources.local_corpus import resolve_collection

                path = smart_head(resolve_collection(path, "smart", None)[0], folder / collection, first).parent
            import_collection(settings, path)
            run_graph(settings)
            run_embed(settings)
            run_publish(settings)
    return settings


@pytest.fixture(scope="session")
def cisi_snapshot(shared_data, tmp_path_factory, request):
    """Settings of a warehouse where CISI was imported, the graph computed, embedded with the default model
    and published (``snapshots/CURRENT`` set).

    Session-scoped and shared by query/serve tests (and by the run's xdist workers): treat it as read-only.
    Vectors are cached by (model, content hash) under .pytest_cache, so only the first session pays for
    encoding CISI."""
    return _snapshot_of(tmp_path_factory, request, shared_data, "cisi_snapshot", "cisi")


@pytest.fixture(scope="session")
def cacm_warehouse(shared_data, tmp_path_factory):
    """Settings of a warehouse where CACM (papers, authors, its real citation links) was imported; no
    graph, vectors or snapshot. Session-scoped (shared by the run's xdist workers): treat it as read-only."""
    with _once_per_run(tmp_path_factory, "cacm_warehouse") as (folder, build):
        settings = isolated_settings(folder / "warehouse", embed_backend=SNAPSHOT_BACKEND)
        if build:
            from pipeline.sources.local_corpus import import_collection

            import_collection(settings, shared_data / "collections" / "cacm")
    return settings


@pytest.fixture(scope="session")
def cacm_snapshot(shared_data, tmp_path_factory, request):
    """Settings of a warehouse where CACM (with its real citation links) was imported, the graph
    computed, embedded and published. Session-scoped and read-only, like ``cisi_snapshot``; vectors are
    cached under .pytest_cache, so only the first session pays for encoding CACM."""
    return _snapshot_of(tmp_path_factory, request, shared_data, "cacm_snapshot", "cacm")


@pytest.fixture(scope="session")
def cisi_snapshot_as_before(cisi_snapshot, tmp_path_factory):
    """Settings of a warehouse whose CURRENT is ``cisi_snapshot``'s snapshot as published before issue 29:
    the same files (hard links) without ``query_encoder/`` and ``bm25/``, and a manifest that does not list
    them. Readers must encode queries with sentence-transformers and count BM25 statistics at open."""
    import json
    import shutil

    from pipeline import snapshots

    src = snapshots.resolve(cisi_snapshot)
    wh = tmp_path_factory.mktemp("cisi_before") / "warehouse"
    dst = wh / "snapshots" / src.name
    shutil.copytree(src, dst, copy_function=os.link)
    m = snapshots.read_manifest(dst)
    for key in ("query_encoder", "bm25"):
        rel = (m.get("layout") or {}).pop(key, None)
        if rel:
            target = dst / rel
            shutil.rmtree(target) if target.is_dir() else target.unlink()
            top = rel.split("/")[0]
            shutil.rmtree(dst / top, ignore_errors=True)
            for name in ("files", "sizes"):
                m[name] = {f: v for f, v in m[name].items() if f.split("/")[0] != top}
    (dst / snapshots.MANIFEST).unlink()  # a hard link to the original's manifest: write a new file
    (dst / snapshots.MANIFEST).write_text(json.dumps(m, indent=1), encoding="utf-8")
    (wh / "snapshots" / snapshots.CURRENT).write_text(src.name + "\n", encoding="utf-8")
    return isolated_settings(wh, embed_cache_dir=cisi_snapshot.embed_cache_dir)


# Cranfield's first 200 papers (of 1,400): what the tests of several indexes need is a second collection on another
# subject (aeronautics beside CISI's library science); its quality on the whole collection is the benchmarks'.
CRANFIELD_TEST_PAPERS = 200


@pytest.fixture(scope="session")
def cranfield_snapshot(shared_data, tmp_path_factory, request):
    """Settings of a warehouse where Cranfield's first ``CRANFIELD_TEST_PAPERS`` papers were imported, embedded and
    published (no citation links: the graph gives every paper the same weight). Session-scoped and read-only, like
    ``cisi_snapshot``; vectors cached under .pytest_cache."""
    return _snapshot_of(tmp_path_factory, request, shared_data, "cranfield_snapshot", "cranfield",
                        first=CRANFIELD_TEST_PAPERS)


@pytest.fixture(scope="session")
def pdf_library(shared_data, tmp_path_factory):
    """(settings, graph summary) of a warehouse where the 10 recorded arXiv PDFs were imported as a local library,
    extracted (chunks, figures, reference lists) and the graph computed; no Semantic Scholar, no vectors.
    Session-scoped (shared by the run's xdist workers, built once): treat it as read-only."""
    import json

    with _once_per_run(tmp_path_factory, "pdf_library") as (folder, build):
        settings = isolated_settings(folder / "warehouse")
        if build:
            from pipeline.library.pdf_folder import import_pdfs
            from pipeline.steps.fulltext import run_fulltext
            from pipeline.steps.graph import run_graph

            import_pdfs(settings, shared_data / "arxiv" / "pdf")
            run_fulltext(settings)
            summary = run_graph(settings)
            (folder / "graph.json").write_text(json.dumps(summary, default=str), encoding="utf-8")
    return settings, json.loads((folder / "graph.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def cisi30_embedded(shared_data, tmp_path_factory):
    """Settings of a warehouse of the first 30 real CISI documents, imported and embedded with the default backend
    (no graph, no snapshot). Session-scoped (built once per run): tests that change it work on a copy
    (``embed_helpers.clone_settings``)."""
    from embed_helpers import import_cisi_subset, make_settings

    with _once_per_run(tmp_path_factory, "cisi30_embedded") as (folder, build):
        settings = make_settings(folder)
        if build:
            from pipeline.steps.embed import run_embed

            import_cisi_subset(settings, shared_data, 30)
            run_embed(settings)
    return settings


@pytest.fixture(scope="session")
def paperkb_wheel(tmp_path_factory) -> Path:
    """The wheel a user installs (``pip wheel --no-deps .``), built once per run for the packaging and deployment
    tests (two ``pip wheel`` of the one checkout at once would share its build folders)."""
    import celery_cluster

    with _once_per_run(tmp_path_factory, "paperkb_wheel") as (folder, build):
        if build:
            celery_cluster.build_wheel(folder)
    return max(folder.glob("paperkb-*.whl"))
