"""pipeline.snapshots: resolving CURRENT or a pinned id, listing, manifests, checksums (no models needed),
plus the shared CISI snapshot that query and serve tests read."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline import snapshots
from pipeline.errors import UserError


def _fake_snapshot(root, sid, created="2026-01-01T00:00:00+00:00", payload=b"data"):
    """A minimal well-formed snapshot folder (the real layout is exercised in test_publish)."""
    d = root / sid
    (d / "lancedb").mkdir(parents=True)
    (d / "lancedb" / "f.bin").write_bytes(payload)
    (d / "catalog.duckdb").write_bytes(b"catalog")
    files = {rel: snapshots.sha256_file(d / rel) for rel in snapshots.snapshot_files(d)}
    (d / "manifest.json").write_text(json.dumps({"snapshot_id": sid, "created_at": created, "files": files,
                                                 "counts": {"papers": 1}, "model": {"name": "m", "dim": 3}}))
    return d


def test_resolve_current_and_pinned(settings):
    root = settings.snapshots_dir
    with pytest.raises(UserError, match="no published snapshot"):
        snapshots.resolve(settings)
    a = _fake_snapshot(root, "A", "2026-01-01T00:00:00+00:00")
    b = _fake_snapshot(root, "B", "2026-01-02T00:00:00+00:00")
    snapshots.write_current(settings, "B")
    assert snapshots.resolve(settings) == b
    assert snapshots.resolve(settings, "A") == a
    assert snapshots.resolve(settings.warehouse) == b  # a warehouse folder works too
    assert snapshots.resolve(root) == b
    for bad in ("nope", "../A", "A.tmp"):
        with pytest.raises(UserError):
            snapshots.resolve(settings, bad)
    with pytest.raises(UserError):
        snapshots.write_current(settings, "nope")
    assert snapshots.current_id(settings) == "B"


def test_list_ignores_tmp_and_incomplete_folders(settings):
    root = settings.snapshots_dir
    _fake_snapshot(root, "A", "2026-01-02T00:00:00+00:00")
    _fake_snapshot(root, "B.tmp")
    (root / "C").mkdir()  # no manifest: not a snapshot
    _fake_snapshot(root, "Z", "2026-01-01T00:00:00+00:00")
    snapshots.write_current(settings, "A")
    listed = snapshots.list_snapshots(settings)
    assert [s["snapshot_id"] for s in listed] == ["Z", "A"]  # by creation time
    assert [s["current"] for s in listed] == [False, True]


def test_verify_detects_changes(settings):
    d = _fake_snapshot(settings.snapshots_dir, "A")
    assert snapshots.verify(settings, "A") == []
    (d / "lancedb" / "f.bin").write_bytes(b"dat4")
    (d / "catalog.duckdb").unlink()
    assert snapshots.verify(settings, "A") == ["missing file catalog.duckdb", "checksum mismatch lancedb/f.bin"]


def test_bad_manifest_is_a_user_error(tmp_path):
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        snapshots.read_manifest(tmp_path)
    with pytest.raises(UserError, match="no manifest"):
        snapshots.read_manifest(tmp_path / "missing")


def test_snapshots_module_is_light():
    """Readers (query, serve, downstream apps) import it without pulling in torch or LanceDB."""
    code = ("import sys, pipeline.snapshots; "
            "print(sorted(m for m in ('torch', 'lancedb', 'duckdb', 'sentence_transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _catalog_with_views(folder: Path, outside: Path) -> None:
    """A catalog as a store could supply one: a table's view over its own Parquet files, and views over other files."""
    import duckdb

    (folder / "catalog" / "t").mkdir(parents=True)
    duckdb.connect().execute(f"COPY (SELECT range AS a FROM range(3)) TO '{folder}/catalog/t/p.parquet' (FORMAT parquet)")
    duckdb.connect().execute(f"COPY (SELECT 9 AS a) TO '{outside}/outside.parquet' (FORMAT parquet)")
    (outside / "catalog").mkdir()
    (outside / "catalog" / "only_here.csv").write_text("a\n42\n")
    cwd = os.getcwd()
    os.chdir(folder)  # the views' relative paths bind against the snapshot folder, as publish writes them
    try:
        with duckdb.connect(str(folder / snapshots.CATALOG)) as con:
            con.execute("CREATE VIEW t AS SELECT * FROM read_parquet('catalog/t/*.parquet')")
            con.execute("CREATE VIEW leak AS SELECT * FROM read_csv('/etc/passwd', header = false, sep = ':')")
            con.execute(f"CREATE VIEW up AS SELECT * FROM read_parquet('{outside}/outside.parquet')")
            con.execute("CREATE VIEW up_relative AS SELECT * FROM read_parquet('../outside/outside.parquet')")
    finally:
        os.chdir(cwd)


def test_open_catalog_reads_the_snapshots_files_and_nothing_else(tmp_path, monkeypatch):
    """Issue 64: a catalog's views are whatever its file says (a snapshot store can supply it). Opened by
    open_catalog (serve, MCP, feeds, the API, paperkb sql) it reads its own Parquet files, and nothing else: not a
    file a view names, not a relative path DuckDB would find in the working directory, no COPY ... TO, no ATTACH,
    no setting changed back. Many threads opening it at once all get it configured."""
    import threading

    import duckdb

    folder, outside = tmp_path / "snap", tmp_path / "outside"
    folder.mkdir()
    outside.mkdir()
    _catalog_with_views(folder, outside)
    monkeypatch.chdir(outside)  # holds catalog/only_here.csv: DuckDB falls back to the working directory
    con = snapshots.open_catalog(folder)
    try:
        assert con.execute("SELECT sum(a) FROM t").fetchall() == [(3,)]
        assert con.cursor().execute("SELECT count(*) FROM t").fetchall() == [(3,)]
        for sql in ("SELECT * FROM leak", "SELECT * FROM up", "SELECT * FROM up_relative",
                    "SELECT * FROM read_csv('catalog/only_here.csv')", "SELECT * FROM read_csv('/etc/passwd')",
                    f"COPY (SELECT 1) TO '{tmp_path}/x.csv'", f"ATTACH '{tmp_path}/x.duckdb' AS x"):
            with pytest.raises(duckdb.PermissionException):
                con.execute(sql).fetchall()
        with pytest.raises(duckdb.InvalidInputException, match="locked"):
            con.execute("SET enable_external_access = true")
        again = snapshots.open_catalog(folder)  # the same database, already configured
        assert again.execute("SELECT count(*) FROM t").fetchall() == [(3,)]
        again.close()
    finally:
        con.close()

    errors: list[BaseException] = []

    def read() -> None:
        try:
            c = snapshots.open_catalog(folder)
            try:
                assert c.execute("SELECT count(*) FROM t").fetchall() == [(3,)]
            finally:
                c.close()
        except BaseException as exc:
            errors.append(exc)

    for _ in range(5):  # each round opens the database afresh (every connection closed), from 8 threads at once
        threads = [threading.Thread(target=read) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert errors == []


def test_cisi_snapshot_fixture(cisi_snapshot):
    """The shared fixture: all of CISI's 1,460 abstracts embedded and published, vectors from the model."""
    import lancedb
    import numpy as np

    from pipeline.embedding.encoders import get_encoder

    folder = snapshots.resolve(cisi_snapshot)
    m = snapshots.read_manifest(folder)
    assert m["counts"]["papers"] == 1460 and m["counts"]["lancedb.papers"] == 1460
    assert m["counts"]["lancedb.chunks"] == 1460  # one abstract passage each: CISI has no PDFs
    assert snapshots.verify(cisi_snapshot) == []
    papers = lancedb.connect(str(folder / "lancedb")).open_table("papers")
    row = papers.search().where("paper_id = 'cisi:1'").limit(1).to_list()[0]
    q = get_encoder(cisi_snapshot).encode_queries([f"{row['title']}. {row['abstract']}"])[0]
    assert float(np.dot(q, row["abs_vector"])) > 0.99
    hit = papers.search(q, vector_column_name="abs_vector").metric("cosine").limit(1).to_list()[0]
    assert hit["paper_id"] == "cisi:1"


# ---- pins: leases that keep a snapshot from retention (issue 17) ------------------------------------------
PIN_AND_DIE = """
import sys, time
from pipeline import pins
held = pins.pin(sys.argv[1], sys.argv[2], who="doomed reader")
print("pinned", flush=True)
time.sleep(600)
"""


def test_pin_writes_a_lease_and_release_removes_it(settings):
    from pipeline import pins

    root = settings.snapshots_dir
    _fake_snapshot(root, "A")
    p = pins.pin(root, "A", who="paperkb serve")
    files = list((root / ".pins").iterdir())
    assert [f.name for f in files] == [p.path.name] and p.path.name.startswith("A@")
    info = json.loads(p.path.read_text())
    assert info["snapshot_id"] == "A" and info["who"] == "paperkb serve" and info["pid"] == os.getpid()
    assert info["locked"] is True and info["host"]
    assert pins.holders(root, "A") == [f"paperkb serve pid {os.getpid()}"]
    assert pins.holders(root, "B") == []
    p.release()
    p.release()  # idempotent
    assert not p.path.exists() and pins.holders(root, "A") == []


def test_lease_of_a_killed_process_is_stale(settings):
    """A reader SIGKILLed while it holds a lease: its flock dies with it, retention ignores and removes it."""
    from pipeline import pins

    root = settings.snapshots_dir
    _fake_snapshot(root, "A")
    proc = subprocess.Popen([sys.executable, "-c", PIN_AND_DIE, str(root), "A"], stdout=subprocess.PIPE, text=True,
                            cwd=Path(__file__).resolve().parent.parent)
    try:
        assert proc.stdout.readline().strip() == "pinned"
        assert pins.holders(root, "A") == [f"doomed reader pid {proc.pid}"]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    (lease,) = pins.leases(root, "A")
    assert lease.stale_reason() == "its holder is gone (lock released)"
    assert pins.holders(root, "A", clean=True) == [] and pins.leases(root, "A") == []


def test_lease_files_written_by_outside_apps(settings):
    """The documented format: any JSON object (or an empty file) named <id>@<anything>."""
    import socket
    from datetime import datetime, timedelta, timezone

    from pipeline import pins

    root = settings.snapshots_dir
    d = root / ".pins"
    d.mkdir(parents=True)
    now = datetime.now(timezone.utc)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    cases = {
        "A@touched": ("", True),
        "B@nightly-report": (json.dumps({"who": "report job", "expires_at": (now + timedelta(hours=1)).isoformat()}), True),
        "C@old-report": (json.dumps({"who": "report job", "expires_at": (now - timedelta(hours=1)).isoformat()}), False),
        "D@dead-local": (json.dumps({"who": "app", "pid": int(dead), "host": socket.gethostname()}), False),
        "E@other-host": (json.dumps({"who": "app", "pid": int(dead), "host": "elsewhere.example"}), True),
        "F@garbled": ("{not json", True),
        ".G@being-written": ("", None),
    }
    for name, (text, _) in cases.items():
        (d / name).write_text(text)
    for name, (_, held) in cases.items():
        sid = name.split("@")[0]
        assert bool(pins.holders(root, sid)) is bool(held), name
    assert pins.holders(root, "E") == ["app pid %d on host elsewhere.example" % int(dead)]
    assert "unreadable" in pins.holders(root, "F")[0]
    assert sorted(pins.clean_stale(root)) == ["C@old-report", "D@dead-local"]


def test_retention_skips_pinned_snapshots_and_says_so(settings, caplog):
    import logging
    from datetime import datetime, timezone

    from pipeline import pins
    from pipeline.steps.publish import apply_retention

    root = settings.snapshots_dir
    for i in range(1, 5):
        _fake_snapshot(root, f"s{i}", f"2026-01-0{i}T00:00:00+00:00")
    snapshots.write_current(root, "s4")
    held = pins.pin(root, "s1", who="paperkb serve")
    kept: dict = {}
    with caplog.at_level(logging.INFO, logger="pipeline.steps.publish"):
        assert apply_retention(root, keep=1, min_age_h=0, kept=kept) == ["s2", "s3"]
    assert kept == {"s1": f"pinned by paperkb serve pid {os.getpid()}"}
    assert f"kept s1: pinned by paperkb serve pid {os.getpid()}" in caplog.text
    listed = {s["snapshot_id"]: s for s in snapshots.list_snapshots(root)}
    assert sorted(listed) == ["s1", "s4"] and listed["s1"]["pinned_by"] == [f"paperkb serve pid {os.getpid()}"]
    held.release()
    assert apply_retention(root, keep=1, min_age_h=0, now=datetime.now(timezone.utc)) == ["s1"]


def test_retention_puts_back_a_snapshot_pinned_while_it_looked(settings, monkeypatch):
    """A reader pins between retention's look at the pins and its rename: retention sees the pin after the
    rename and renames the snapshot back; the reader's own check finds it where it was."""
    from pipeline import pins
    from pipeline.steps.publish import apply_retention

    root = settings.snapshots_dir
    for i in (1, 2):
        _fake_snapshot(root, f"s{i}", f"2026-01-0{i}T00:00:00+00:00")
    snapshots.write_current(root, "s2")
    real = pins.holders
    late: list = []

    def look_then_pin(r, sid, clean=False):
        found = real(r, sid, clean=clean)
        if sid == "s1" and clean and not late:
            late.append(pins.pin(r, sid, who="late reader"))
        return found

    monkeypatch.setattr(pins, "holders", look_then_pin)
    kept: dict = {}
    assert apply_retention(root, keep=1, min_age_h=0, kept=kept) == []
    assert "late reader" in kept["s1"] and (root / "s1" / "manifest.json").is_file()
    assert not list(root.glob("*.deleting"))


def test_next_publish_puts_back_a_pinned_snapshot_left_half_retired(settings):
    """Retention killed between its rename to <id>.deleting and the rename back: the next publish's clean-up
    restores a pinned one instead of deleting it, and removes an unpinned one."""
    from pipeline import pins
    from pipeline.steps.publish import _remove_abandoned

    root = settings.snapshots_dir
    _fake_snapshot(root, "s1").rename(root / "s1.deleting")
    _fake_snapshot(root, "s2").rename(root / "s2.deleting")
    with pins.pin(root, "s1", who="reader"):
        assert _remove_abandoned(root) == ["s2.deleting"]
    assert (root / "s1" / "manifest.json").is_file() and not (root / "s2.deleting").exists()


def test_open_snapshot_pins_until_closed(settings):
    from pipeline import pins
    from pipeline.query import open_snapshot

    root = settings.snapshots_dir
    _fake_snapshot(root, "A")
    snapshots.write_current(root, "A")
    with open_snapshot(settings, who="my app") as snap:
        assert snap.snapshot_id == "A" and snap.pin.held
        assert pins.holders(root, "A") == [f"my app pid {os.getpid()}"]
    assert pins.holders(root, "A") == []
    unpinned = open_snapshot(settings, pin=False)
    assert unpinned.pin is None and pins.holders(root, "A") == []
    snap = open_snapshot(settings)
    del snap  # garbage collection unpins too
    import gc

    gc.collect()
    assert pins.holders(root, "A") == []


def test_open_snapshot_read_only_folder_opens_unpinned(settings, caplog, monkeypatch):
    """A reader on a read-only mount cannot write a lease: it opens the snapshot anyway, and says so."""
    import errno

    from pipeline import pins
    from pipeline.query import open_snapshot

    root = settings.snapshots_dir
    _fake_snapshot(root, "A")
    snapshots.write_current(root, "A")

    def read_only(*_a, **_k):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(pins, "pin", read_only)
    snap = open_snapshot(settings)
    assert snap.pin is None and "could not pin snapshot A (Read-only file system)" in caplog.text
    snap.close()


# ---- the open check: stat only (issue 17) ----------------------------------------------------------------
def test_check_finds_missing_and_resized_files(settings):
    d = _fake_snapshot(settings.snapshots_dir, "A")
    m = snapshots.read_manifest(d)
    m["sizes"] = {rel: (d / rel).stat().st_size for rel in m["files"]}
    (d / "manifest.json").write_text(json.dumps(m))
    assert snapshots.check(d) == []
    (d / "lancedb" / "f.bin").write_bytes(b"longer data")
    assert snapshots.check(d) == ["file lancedb/f.bin (a snapshot file) is 11 bytes, the manifest says 4"]
    (d / "catalog.duckdb").unlink()
    assert snapshots.check(d)[0] == "missing file catalog.duckdb (the DuckDB catalog)"


@pytest.mark.parametrize("text, expected", [
    ('{"snapshot_id": "A", "files": {"catalog.duckdb": "ab', "manifest.json is not valid JSON (truncated?)"),
    ('["catalog.duckdb"]', "manifest.json holds a JSON list, not an object"),
    ('{"snapshot_id": "A"}', "manifest.json lists no files"),
    ('{"files": ["catalog.duckdb"]}', "manifest.json: 'files' is not an object"),
    ('{"files": {"../../etc/passwd": "x"}}', "manifest.json: bad entry in 'files'"),
    ('{"files": {"catalog.duckdb": "x"}, "counts": [1]}', "manifest.json: 'counts' is a JSON list, not an object"),
])
def test_damaged_manifests_are_refused_and_listed(settings, capsys, text, expected):
    from pipeline.cli import main
    from pipeline.errors import DamagedSnapshot
    from pipeline.query import open_snapshot

    root = settings.snapshots_dir
    d = _fake_snapshot(root, "A")
    snapshots.write_current(root, "A")
    (d / "manifest.json").write_text(text)
    with pytest.raises(DamagedSnapshot, match=re.escape(expected)):
        open_snapshot(settings)
    assert not list((root / ".pins").glob("A@*"))  # a refused open leaves no pin behind
    w = str(settings.warehouse)
    assert main(["--warehouse", w, "snapshots", "list"]) == 0
    out = capsys.readouterr().out
    assert "no snapshots published yet" not in out
    assert out.startswith("* A ") and f"damaged: {expected}" in out
    assert main(["--warehouse", w, "snapshots", "list", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["status"] == "damaged" and row["problems"][0].startswith(expected)
    assert main(["--warehouse", w, "snapshots", "verify"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err
    assert main(["--warehouse", w, "search", "library"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "snapshot A is damaged" in err


def test_the_readme_example_reads_a_snapshot_without_paperkb(cacm_snapshot):
    """The README's snapshot-contract example, run as written from the data root's parent, with paperkb made
    unimportable: a downstream app needs only duckdb and lancedb."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    example = text.split("An app needs\nno Airflow and not even paperkb:", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    code = "import sys\nsys.modules['pipeline'] = None  # no paperkb\n" + example
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-c", code], cwd=cacm_snapshot.warehouse.parent, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    model, count, chunk_id = res.stdout.split(" ", 1)[0], res.stdout.split("[(")[1].split(",")[0], res.stdout.split()[-1]
    assert model and int(count) > 3000 and chunk_id.startswith("cacm:")


def test_a_pin_names_the_command_not_the_warehouse():
    from pipeline.pins import _command_of

    assert _command_of(["--warehouse", "wh", "search", "q"]) == "search"
    assert _command_of(["--warehouse=wh", "-v", "papers"]) == "papers"
    assert _command_of(["-v", "show", "cacm:1"]) == "show" and _command_of([]) == ""
