"""Fault injection: rounds of kill -9 at random moments of `paperkb embed` and `paperkb publish`, two
writers at once, and files deleted from the published snapshot, on real CISI documents. After every round
the warehouse is either serving a verified CURRENT or refusing with one line, and running `embed` and
`publish` again always ends with a verified CURRENT: never a broken warehouse.

The kill moments are drawn from a seeded generator (the seed is in the test id), spread over the measured
duration of the step, so the kills land anywhere: model loading, encoding, LanceDB sync, index builds,
copying, verification, the CURRENT swap, retention.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from embed_helpers import import_cisi_subset, make_settings

REPO = Path(__file__).resolve().parent.parent
SEED = 20261123
ROUNDS = 8

pytestmark = pytest.mark.slow


def _env(settings) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", PAPERKB_WAREHOUSE=str(settings.warehouse),
               PAPERKB_SNAPSHOT_KEEP="3", PAPERKB_SNAPSHOT_MIN_AGE_H="0")
    if settings.embed_cache_dir:
        env["PAPERKB_EMBED_CACHE_DIR"] = str(settings.embed_cache_dir)
    return env


def _start(settings, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pipeline.cli", *args], cwd=REPO, env=_env(settings),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run(settings, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], cwd=REPO, env=_env(settings),
                          capture_output=True, text=True, timeout=600)


def _timed(settings, *args: str) -> float:
    t0 = time.monotonic()
    res = _run(settings, *args)
    assert res.returncode == 0, res.stderr[-2000:]
    return time.monotonic() - t0


def _kill_after(proc: subprocess.Popen, seconds: float) -> bool:
    """SIGKILL ``proc`` after ``seconds`` unless it ended first; True when it was killed."""
    try:
        proc.wait(timeout=seconds)
        return False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True


def _one_line_refusal(res: subprocess.CompletedProcess) -> str:
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and lines[0].startswith("paperkb: error: "), res.stderr[-2000:]
    return lines[0]


def _serving_state(settings) -> str:
    """'verified' (CURRENT passes the full verification and answers a search), 'refused' (a one-line
    refusal, exit 2) or 'none' (nothing published)."""
    from pipeline import snapshots

    current = snapshots.current_id(settings)
    found = _run(settings, "search", "information retrieval evaluation", "-k", "3", "--expand", "off", "--json")
    if current is None:
        _one_line_refusal(found)
        return "none"
    if found.returncode == 0:
        assert snapshots.verify(settings, current) == [], current
        return "verified"
    _one_line_refusal(found)
    return "refused"


def _repair_and_verify(settings, damaged: set[str]) -> str:
    """What an operator does after any failure: run the steps again. They must succeed."""
    from pipeline import snapshots

    for step in ("embed", "publish"):
        res = _run(settings, step)
        assert res.returncode == 0, (step, res.stderr[-3000:])
    current = snapshots.current_id(settings)
    assert current and snapshots.verify(settings, current) == []
    assert _serving_state(settings) == "verified"
    for s in snapshots.list_snapshots(settings):  # every kept snapshot is intact, but those damaged by hand
        assert s.get("status", "ok") == "ok" or s["snapshot_id"] in damaged, s
    return current


@pytest.fixture(scope="module")
def warehouse(shared_data, tmp_path_factory):
    settings = make_settings(tmp_path_factory.mktemp("faults"),
                             embed_cache_dir=tmp_path_factory.mktemp("faults-cache"))
    import_cisi_subset(settings, shared_data, 60)
    return settings


def test_kill_minus_nine_concurrent_writers_and_deleted_files_never_break_the_warehouse(warehouse, shared_data):
    rng = random.Random(SEED)
    settings = warehouse
    embed_s = _timed(settings, "embed")  # first embed: encodes 60 abstracts
    _timed(settings, "publish")  # the first publish also exports the query encoder into the cache
    publish_s = _timed(settings, "publish")  # what every later publish costs: the kills are drawn within it
    assert _serving_state(settings) == "verified"
    grown = 60
    log: list[tuple] = []
    damaged: set[str] = set()
    for round_no in range(ROUNDS):
        action = ("kill-embed", "kill-publish", "two-publishes", "two-embeds", "delete-file")[round_no % 5]
        if action in ("kill-embed", "two-embeds"):  # new documents, so embed has work to do
            grown += 20
            import_cisi_subset(settings, shared_data, grown)
        if action == "kill-embed":
            delay = rng.uniform(0.5, 0.7 * embed_s)
            killed = _kill_after(_start(settings, "embed"), delay)
        elif action == "kill-publish":
            delay = rng.uniform(0.5, 0.9 * publish_s)
            killed = _kill_after(_start(settings, "publish"), delay)
        elif action in ("two-publishes", "two-embeds"):
            step = {"two-publishes": "publish", "two-embeds": "embed"}[action]
            procs = [_start(settings, step) for _ in range(2)]
            outs = [p.communicate(timeout=600) for p in procs]
            codes = sorted(p.returncode for p in procs)
            # both ran one after the other, or the second was refused with one line naming the first
            assert codes in ([0, 0], [0, 2]), (codes, [o[1][-2000:] for o in outs])
            for p, (_, err) in zip(procs, outs):
                if p.returncode == 2:
                    [line] = err.strip().splitlines()
                    assert "is being written by" in line, line
            delay, killed = 0.0, False
        else:  # delete-file: a reader's file under the published CURRENT disappears
            from pipeline import snapshots

            current = snapshots.resolve(settings)
            files = sorted(p for p in (current / "lancedb").rglob("*") if p.is_file())
            victim = files[rng.randrange(len(files))]
            victim.unlink()
            damaged.add(current.name)
            delay, killed = 0.0, False
            assert _serving_state(settings) == "refused", victim  # opening stats every listed file
        state = _serving_state(settings)
        assert state in ("verified", "refused", "none"), state
        current = _repair_and_verify(settings, damaged)
        log.append((round_no, action, round(delay, 2), killed, state, current))
    # the kills landed: at least one of each kind really cut its step short
    assert any(k for _, a, _, k, _, _ in log if a == "kill-embed"), log
    assert any(k for _, a, _, k, _, _ in log if a == "kill-publish"), log
    print("\n".join(map(str, log)))
