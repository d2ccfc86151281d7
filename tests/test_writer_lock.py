"""One writer at a time per warehouse (pipeline/writer_lock.py): refusal, stale locks, Airflow waiting,
reentrancy, and the fan-out tasks that must not take the lock."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# A process that takes the writer lock for STEP and holds it until it is killed or its time is up.
HOLDER = textwrap.dedent("""
    import sys, time
    from pipeline import writer_lock
    warehouse, step, seconds, marker = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    with writer_lock.hold(warehouse, step):
        open(marker, "w").write("held")
        time.sleep(seconds)
""")


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", **extra)
    return env


class Holder:
    """Another process holding the writer lock of ``warehouse`` (as step ``step``) for ``seconds``."""

    def __init__(self, warehouse: Path, step: str, seconds: float, tmp: Path):
        marker = tmp / f"held-{step}-{time.monotonic_ns()}"
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(warehouse), step, str(seconds), str(marker)],
                                     cwd=REPO, env=_env(), stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while not marker.exists():
            assert self.proc.poll() is None, self.proc.stderr.read().decode()[-2000:]
            assert time.time() < deadline, "the holder never took the lock"
            time.sleep(0.05)
        self.pid = self.proc.pid

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()


def _cli(*args: str, warehouse: Path, timeout: float = 300, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "--warehouse", str(warehouse), *args], cwd=REPO,
                          env=_env(**env), capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("command", [["graph"], ["embed"], ["publish"], ["import-collection", "nowhere"]])
def test_second_writer_is_refused_with_one_line(settings, tmp_path, command):
    with Holder(settings.warehouse, "embed", 120, tmp_path) as h:
        t0 = time.time()
        res = _cli(*command, warehouse=settings.warehouse)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "is being written by `embed`" in lines[0] and f"pid {h.pid} on host " in lines[0]
    assert f"try `{command[0]}` again when it ends" in lines[0]
    assert time.time() - t0 < 60  # refused at once, not after loading a model


def test_refusal_names_the_step_a_refresh_is_running(settings, tmp_path):
    script = textwrap.dedent("""
        import sys, time
        from pipeline import writer_lock
        from pipeline.settings import Settings
        s = Settings(warehouse=sys.argv[1])

        @writer_lock.writes("embed")
        def inner(settings):
            open(sys.argv[2], "w").write("held")
            time.sleep(120)

        with writer_lock.hold(s.warehouse, "refresh"):
            inner(s)
    """)
    marker = tmp_path / "inner"
    proc = subprocess.Popen([sys.executable, "-c", script, str(settings.warehouse), str(marker)], cwd=REPO, env=_env())
    try:
        deadline = time.time() + 60
        while not marker.exists():
            assert proc.poll() is None and time.time() < deadline
            time.sleep(0.05)
        res = _cli("graph", warehouse=settings.warehouse)
    finally:
        proc.kill()
        proc.wait()
    assert res.returncode == 2
    assert f"being written by `refresh`, now `embed` (pid {proc.pid}" in res.stderr


def test_stale_lock_of_a_killed_process_is_taken_over(settings, tmp_path, caplog):
    from pipeline import writer_lock

    with Holder(settings.warehouse, "embed", 120, tmp_path) as h:
        pass  # SIGKILLed while holding: its record stays in the file, the kernel dropped its flock
    stale = writer_lock.read_holder(writer_lock.lock_path(settings.warehouse))
    assert stale["step"] == "embed" and stale["pid"] == h.pid

    with caplog.at_level(logging.INFO, logger="pipeline.writer_lock"):
        with writer_lock.hold(settings.warehouse, "graph") as rec:
            assert rec["pid"] == os.getpid()
            assert writer_lock.read_holder(writer_lock.lock_path(settings.warehouse))["step"] == "graph"
    assert f"taking over from `embed` (pid {h.pid}" in caplog.text
    # released cleanly: the record is gone, the next writer takes over nothing
    assert writer_lock.read_holder(writer_lock.lock_path(settings.warehouse)) == {}


def test_a_stale_lock_does_not_stop_the_cli(settings, tmp_path, shared_data):
    with Holder(settings.warehouse, "publish", 120, tmp_path):
        pass
    coll = shared_data / "collections" / "cisi"
    res = _cli("import-collection", str(coll), warehouse=settings.warehouse)
    assert res.returncode == 0, res.stderr
    assert "import-collection cisi: 1460 papers" in res.stdout


def test_reentrant_in_one_process(settings):
    from pipeline import writer_lock

    calls = []

    @writer_lock.writes("embed")
    def step(s):
        calls.append(writer_lock.read_holder(writer_lock.lock_path(s.warehouse)))

    with writer_lock.hold(settings.warehouse, "refresh"):
        step(settings)
        step(settings)
        assert writer_lock.is_held_here(settings.warehouse)
    assert [c["step"] for c in calls] == ["refresh", "refresh"] and calls[0]["doing"] == "embed"
    assert not writer_lock.is_held_here(settings.warehouse)


def test_run_refresh_holds_the_lock_once_across_its_steps(settings, monkeypatch):
    from pipeline.steps import embed, enrich, fulltext, graph, harvest, publish, refresh
    from pipeline import writer_lock

    seen = []

    def fake(name):
        @writer_lock.writes(name)  # the real steps take the lock themselves: nested, so reentrant
        def run(s, *a, **kw):
            seen.append((name, writer_lock.read_holder(writer_lock.lock_path(s.warehouse))))
            return {"snapshot_id": "x"} if name == "publish" else {}
        return run

    monkeypatch.setattr(harvest, "run_harvest", fake("harvest"))
    monkeypatch.setattr(enrich, "run_enrich", fake("enrich"))
    monkeypatch.setattr(fulltext, "plan_fulltext_batches", lambda s, replay=False: {"download": [], "in_raw": []})
    monkeypatch.setattr(fulltext, "merge_fulltext", fake("fulltext"))
    monkeypatch.setattr(graph, "run_graph", fake("graph"))
    monkeypatch.setattr(embed, "plan_shards", lambda s, n: [])
    monkeypatch.setattr(embed, "merge_embeddings", fake("embed"))
    monkeypatch.setattr(publish, "run_publish", fake("publish"))
    # the fakes write no papers: let the refresh go on to publish as it does over a non-empty warehouse
    monkeypatch.setattr(publish, "empty_warehouse_reason", lambda s, replay=False: None)
    out = refresh.run_refresh(settings)
    assert out["snapshot_id"] == "x"
    assert [n for n, _ in seen] == list(refresh.STEP_ORDER)
    assert {r["pid"] for _, r in seen} == {os.getpid()} and {r["step"] for _, r in seen} == {"refresh"}
    assert [r["doing"] for _, r in seen] == list(refresh.STEP_ORDER)


def test_airflow_task_waits_for_the_lock_then_proceeds(settings, tmp_path, caplog):
    """The DAG's tasks run with ``lock_queue`` (dags/paperkb_nightly.py ``_settings``): a step queues."""
    from pipeline import writer_lock

    ran = {}

    @writer_lock.writes("graph")
    def fake_graph(s):
        ran["holder"] = writer_lock.read_holder(writer_lock.lock_path(s.warehouse))
        ran["at"] = time.time()
        return {"ok": True}

    h = Holder(settings.warehouse, "embed", 3, tmp_path)  # releases after 3 s
    try:
        t0 = time.time()
        with caplog.at_level(logging.INFO, logger="pipeline.writer_lock"):
            assert fake_graph(settings.model_copy(update={"lock_queue": True})) == {"ok": True}
    finally:
        h.kill()
    assert ran["at"] - t0 >= 1.5  # it queued behind the holder instead of failing
    assert ran["holder"]["step"] == "graph" and ran["holder"]["pid"] == os.getpid()
    assert f"waiting for the warehouse lock held by `embed` (pid {h.pid}" in caplog.text


def test_airflow_task_gives_up_after_lock_wait_s(settings, tmp_path):
    from pipeline.steps import graph
    from pipeline.writer_lock import WarehouseLocked

    s = settings.model_copy(update={"lock_wait_s": 1.0, "lock_queue": True})
    with Holder(settings.warehouse, "publish", 120, tmp_path) as h:
        t0 = time.time()
        with pytest.raises(WarehouseLocked) as err:
            graph.run_graph(s)
    assert 0.9 <= time.time() - t0 < 30
    msg = str(err.value)
    assert "\n" not in msg and f"`publish` (pid {h.pid}" in msg and "PAPERKB_LOCK_WAIT_S" in msg


def test_fan_out_tasks_take_no_lock(settings, tmp_path, shared_data):
    """embed_shard / plan_* run in parallel in Airflow: they read DuckDB read-only and write staging only."""
    from embed_helpers import import_cisi_subset

    from pipeline.steps import embed, fulltext

    import_cisi_subset(settings, shared_data, 5)
    with Holder(settings.warehouse, "graph", 120, tmp_path):
        shards = embed.plan_shards(settings, settings.embed_shards)
        out = [embed.embed_shard(settings, sh) for sh in shards]
        assert sum(o["encoded"] for o in out) == 5
        assert fulltext.plan_fulltext_batches(settings, replay=True) == {"download": [], "in_raw": []}


def test_warehouse_that_is_a_file_is_one_line(tmp_path):
    f = tmp_path / "not-a-folder"
    f.write_text("x")
    res = _cli("graph", warehouse=f)
    assert res.returncode == 2
    [line] = res.stderr.strip().splitlines()
    assert line.startswith("paperkb: error: ") and str(f) in line and "not a directory" in line and "--warehouse" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere: no read-only warehouse to meet")
def test_read_only_warehouse_is_one_line(tmp_path):
    wh = tmp_path / "ro"
    wh.mkdir()
    wh.chmod(0o555)
    try:
        res = _cli("graph", warehouse=wh)
    finally:
        wh.chmod(0o755)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1
    assert "not writable" in res.stderr


@pytest.mark.parametrize("error, words", [(PermissionError(13, "Permission denied"), "is not writable by this user"),
                                          (OSError(30, "Read-only file system"), "is on a read-only file system")])
def test_unwritable_warehouse_is_one_line_user_error(settings, monkeypatch, error, words):
    """A read-only warehouse (issue 17: `OSError ... .publish.lock` traceback) is refused with one line."""
    from pipeline import writer_lock
    from pipeline.errors import UserError

    settings.warehouse.mkdir(parents=True)
    real_open = os.open

    def deny(path, *a, **k):
        if str(path).endswith(writer_lock.LOCK_NAME):
            raise error
        return real_open(path, *a, **k)

    monkeypatch.setattr(writer_lock.os, "open", deny)
    with pytest.raises(UserError) as err:
        with writer_lock.hold(settings.warehouse, "publish"):
            pytest.fail("writing without the lock")
    assert str(err.value) == f"warehouse {settings.warehouse} {words}" + (
        ": cannot take its writer lock .writer.lock" if "writable" in words else ": steps that write need a writable one")


def test_rollback_is_refused_while_a_writer_runs(settings, tmp_path):
    """`snapshots rollback` swaps CURRENT: while a publish (or any writer) runs, it is refused with one line
    rather than racing the publish's own swap."""
    with Holder(settings.warehouse, "publish", 120, tmp_path) as h:
        res = _cli("snapshots", "rollback", "20260101T000000Z-0000", warehouse=settings.warehouse)
    assert res.returncode == 2, res.stderr
    [line] = res.stderr.strip().splitlines()
    assert "is being written by `publish`" in line and f"pid {h.pid}" in line and "try `rollback` again" in line


def test_the_dag_publish_task_skips_an_empty_warehouse(settings):
    """The nightly DAG's publish over a warehouse with no papers publishes nothing (the task is skipped)."""
    from pipeline import snapshots
    from pipeline.steps import publish
    from pipeline.warehouse import Warehouse

    with Warehouse(settings) as wh:
        wh.init()
    out = publish.publish_unless_empty(settings)
    assert "holds no papers" in out["skipped"]
    assert snapshots.current_id(settings) is None and not list(settings.snapshots_dir.glob("*T*Z-*"))
