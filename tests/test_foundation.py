"""Raw zone, warehouse upsert/run log/watermarks, and the CLI's error contract."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pyarrow as pa
import pytest

from pipeline.raw import RawZone
from pipeline.warehouse import Warehouse


def test_raw_zone_is_byte_exact_with_manifest(settings, shared_data):
    body = (shared_data / "arxiv/oai/saelim2015_ListRecordsResponse.xml").read_bytes()
    rz = RawZone(settings.raw_dir)
    entry = rz.write("arxiv", "oai/test/page-00001.xml", body, url="http://x/oai", params={"verb": "ListRecords"})
    assert rz.read(entry) == body
    assert entry.sha256 == hashlib.sha256(body).hexdigest()
    lines = rz.manifest_path("arxiv").read_text().splitlines()
    rec = json.loads(lines[-1])
    assert rec["path"] == "arxiv/oai/test/page-00001.xml" and rec["params"] == {"verb": "ListRecords"}
    assert rec["status"] == 200 and rec["fetched_at"]
    assert [e.path for e in rz.entries("arxiv")] == [entry.path]
    assert rz.verify(entry)
    rz.path(entry).write_bytes(body[:-10])
    assert not rz.verify(entry)


def test_upsert_is_idempotent_and_updates_changed_rows(settings):
    wh = Warehouse(settings)
    wh.con.execute("CREATE TABLE t (k VARCHAR PRIMARY KEY, v INTEGER, tags VARCHAR[])")
    data = pa.table({"k": ["a", "b"], "v": [1, 2], "tags": [["x"], []]})
    s1 = wh.upsert("t", data, keys=["k"])
    assert (s1.inserted, s1.updated, s1.unchanged) == (2, 0, 0)
    s2 = wh.upsert("t", data, keys=["k"])
    assert (s2.inserted, s2.updated, s2.unchanged) == (0, 0, 2)
    s3 = wh.upsert("t", pa.table({"k": ["b", "c"], "v": [20, 3], "tags": [["y"], None]}), keys=["k"])
    assert (s3.inserted, s3.updated, s3.unchanged) == (1, 1, 0)
    assert wh.con.execute("SELECT k, v, tags FROM t ORDER BY k").fetchall() == [
        ("a", 1, ["x"]), ("b", 20, ["y"]), ("c", 3, None)]


def test_run_log_records_failures_and_watermark_moves_only_when_set(settings):
    wh = Warehouse(settings).init()
    with pytest.raises(RuntimeError):
        with wh.run("demo") as run:
            run.count("in", 3)
            raise RuntimeError("boom")
    status, counts, message = wh.con.execute("SELECT status, counts, message FROM run_log").fetchone()
    assert status == "failed" and json.loads(counts) == {"in": 3} and "boom" in message
    assert wh.get_watermark("arxiv") is None
    wh.set_watermark("arxiv", "2024-01-02")
    wh.set_watermark("arxiv", "2024-01-03")
    assert wh.get_watermark("arxiv") == "2024-01-03"


def test_run_ids_sort_by_time_within_one_second(settings):
    """The related lists' sweep takes the oldest list by its run id: runs started in the same second must sort in the
    order they ran (a random suffix alone swapped them), and an id of an older version (no microseconds) sorts
    before every new id of its second."""
    wh = Warehouse(settings).init()
    ids = []
    for _ in range(20):
        with wh.run("graph") as run:
            ids.append(run.run_id)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    second = ids[0][len("graph-"):len("graph-") + 15]  # YYYYmmddTHHMMSS
    assert f"graph-{second}-ffffff" < ids[0]


def test_cli_help_and_user_error_exit_code(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pipeline.cli", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "paperkb" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "pipeline.cli", "no-such-command"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
