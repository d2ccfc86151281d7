"""Snapshots on an S3-compatible store (pipeline.store), against a real S3 server on loopback (moto's server
mode) with dummy credentials: publish, a second night, servers following CURRENT, a publisher killed between
uploads, two publishers racing for CURRENT, retention with a pin, `paperkb search` from the store, and
one-line errors for bad URLs and unreachable endpoints."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from embed_helpers import clone_settings, import_cisi_subset

pytest.importorskip("boto3")
pytest.importorskip("moto.server")

REPO = Path(__file__).resolve().parent.parent
AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_EC2_METADATA_DISABLED": "true"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3_endpoint():
    """A real S3-compatible server (moto) on a free loopback port."""
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request in the test's log
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def store_url(s3_endpoint, monkeypatch, tmp_path) -> str:
    """A fresh bucket on the server, the AWS settings pointing at it (no other credentials): s3://bucket/nightly."""
    import boto3

    for k, v in AWS_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    bucket = f"paperkb-{uuid.uuid4().hex[:10]}"
    boto3.client("s3").create_bucket(Bucket=bucket)
    return f"s3://{bucket}/nightly"


@pytest.fixture
def wh(cisi30_embedded, tmp_path, store_url):
    return clone_settings(cisi30_embedded, tmp_path, snapshot_store=store_url, snapshot_keep=5, snapshot_min_age_h=0,
                          snapshot_cache=tmp_path / "cache", snapshot_store_poll_s=0)


def _night(s, shared_data, n: int) -> dict:
    """A night: the first ``n`` CISI papers imported (the new ones embedded), then a publish."""
    from pipeline.steps.embed import run_embed
    from pipeline.steps.publish import run_publish

    import_cisi_subset(s, shared_data, n)
    run_embed(s)
    return run_publish(s)


def _store(url: str):
    from pipeline.store.s3 import S3Store

    return S3Store(url)


def _shas(folder) -> set[str]:
    from pipeline import snapshots

    return set(snapshots.read_manifest(folder)["files"].values())


def _sizes(folder) -> dict[str, int]:
    from pipeline import snapshots

    m = snapshots.read_manifest(folder)
    return {m["files"][rel]: size for rel, size in m["sizes"].items()}


def test_publish_uploads_the_snapshot_and_a_reader_opens_it(wh, store_url):
    from pipeline import snapshots
    from pipeline.query import open_snapshot
    from pipeline.steps.publish import run_publish
    from pipeline.store.leases import read_pins

    r = run_publish(wh)
    sid, folder = r["snapshot_id"], Path(r["path"])
    up = r["store"]
    store = _store(store_url)
    assert store.current()[0] == sid and store.snapshot_ids() == [sid]
    shas = _shas(folder)
    assert store.object_names() == shas  # content-addressed: one object per distinct content
    assert up["objects_uploaded"] == up["objects"] == len(shas) and up["objects_skipped"] == 0
    assert up["bytes_uploaded"] == sum(_sizes(folder).values())
    ops = up["requests_by_operation"]  # a GET of CURRENT, two LISTs, a PUT per object (multipart past 64 MiB)
    assert ops["GetObject"] == 1 and ops["ListObjectsV2"] == 2  # ... the manifest and CURRENT
    assert ops["PutObject"] + ops.get("CreateMultipartUpload", 0) == len(shas) + 2
    assert up["requests"] == sum(ops.values())
    # a reader elsewhere: the store's CURRENT, materialised in its cache, verified and pinned in the store
    snap = open_snapshot(wh, store_url)
    try:
        assert snap.snapshot_id == sid and snap.path.is_relative_to(wh.snapshot_cache)
        assert snapshots.verify(None, path=snap.path) == []
        live, _ = read_pins(store)
        assert list(live) == [sid]
    finally:
        snap.close()
    assert read_pins(store)[0] == {}  # released
    # the same snapshot by id
    with open_snapshot(wh, f"{store_url}@{sid}") as again:
        assert again.path == snap.path


def test_a_second_night_uploads_only_what_changed(wh, store_url, shared_data, tmp_path):
    from pipeline.store.materialise import materialise

    r1 = _night(wh, shared_data, 30)
    store = _store(store_url)
    cache = tmp_path / "reader-cache"
    materialise(store, r1["snapshot_id"], cache)
    r2 = _night(wh, shared_data, 33)  # 3 new papers
    old, new = _shas(Path(r1["path"])), _shas(Path(r2["path"]))
    changed = new - old
    up = r2["store"]
    assert 0 < up["objects_uploaded"] == len(changed) < len(new)
    assert up["objects_skipped"] == len(new) - len(changed)
    assert up["bytes_uploaded"] == sum(_sizes(Path(r2["path"]))[sha] for sha in changed)
    assert store.current()[0] == r2["snapshot_id"]
    # a reader holding night 1 downloads only the new objects
    _, cost = materialise(store, r2["snapshot_id"], cache)
    assert cost["objects_downloaded"] == len(changed)


def test_two_servers_follow_the_stores_current(wh, store_url, shared_data, tmp_path):
    """Two serve holders (each its own cache, as on two hosts) switch to the new snapshot after a publish."""
    from pipeline.serve.holder import SnapshotHolder
    from pipeline.store.leases import read_pins

    r1 = _night(wh, shared_data, 30)
    readers = [wh.model_copy(update={"snapshot_cache": tmp_path / f"host{i}", "warehouse": tmp_path / f"host{i}-wh"})
               for i in (1, 2)]
    holders = [SnapshotHolder(s, pinned=store_url) for s in readers]
    try:
        assert [h.get().snapshot_id for h in holders] == [r1["snapshot_id"]] * 2
        assert len(read_pins(_store(store_url))[0][r1["snapshot_id"]]) == 2
        r2 = _night(wh, shared_data, 33)
        opened = [h.get() for h in holders]
        assert [o.snapshot_id for o in opened] == [r2["snapshot_id"]] * 2
        assert opened[0].searcher.search("information retrieval").results
        live = read_pins(_store(store_url))[0]
        assert len(live[r2["snapshot_id"]]) == 2 and r1["snapshot_id"] not in live  # the old pins released
    finally:
        for h in holders:
            h.close()


def test_a_publisher_killed_between_uploads_leaves_current_and_the_next_completes(wh, store_url, shared_data):
    from pipeline.store.push import push

    r1 = _night(wh, shared_data, 30)
    local = wh.model_copy(update={"snapshot_store": None})
    r2 = _night(local, shared_data, 33)
    folder = Path(r2["path"])
    changed = _shas(folder) - _shas(Path(r1["path"]))
    assert len(changed) >= 2

    def killed(key, size):
        raise KeyboardInterrupt("killed after one upload")

    with pytest.raises(KeyboardInterrupt):
        push(wh, folder, on_upload=killed)
    store = _store(store_url)
    assert store.current()[0] == r1["snapshot_id"]  # readers still see night 1
    assert store.snapshot_ids() == [r1["snapshot_id"]]  # and no manifest of the half-uploaded night
    up = push(wh, folder)
    assert up["objects_uploaded"] == len(changed) - 1  # the object uploaded before the kill is not sent again
    assert store.current()[0] == r2["snapshot_id"]


def test_a_killed_publish_process_leaves_current(wh, store_url, shared_data):
    """A `paperkb snapshots push` process SIGKILLed in the middle of its uploads."""
    r1 = _night(wh, shared_data, 30)
    local = wh.model_copy(update={"snapshot_store": None})
    r2 = _night(local, shared_data, 33)
    code = ("import os, signal, sys\n"
            "from pathlib import Path\n"
            "from pipeline.settings import Settings\n"
            "from pipeline.store.push import push\n"
            "def die(key, size): os.kill(os.getpid(), signal.SIGKILL)\n"
            "push(Settings.load(), Path(sys.argv[1]), on_upload=die)\n")
    env = dict(os.environ, PYTHONPATH=str(REPO), PAPERKB_WAREHOUSE=str(wh.warehouse), PAPERKB_SNAPSHOT_STORE=store_url)
    p = subprocess.run([sys.executable, "-c", code, r2["path"]], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == -9, p.stderr
    store = _store(store_url)
    assert store.current()[0] == r1["snapshot_id"]
    p = subprocess.run([sys.executable, "-m", "pipeline.cli", "snapshots", "push", r2["snapshot_id"]], env=env,
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    assert p.returncode == 0, p.stderr
    assert store.current()[0] == r2["snapshot_id"]
    p = subprocess.run([sys.executable, "-m", "pipeline.cli", "snapshots", "list", "--store", store_url, "--json"],
                       env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    rows = json.loads(p.stdout)
    assert [(r["snapshot_id"], r["current"], r["status"]) for r in rows] == [
        (r1["snapshot_id"], False, "ok"), (r2["snapshot_id"], True, "ok")]


def test_two_publishers_only_one_wins_current(wh, store_url, shared_data):
    from pipeline.errors import UserError
    from pipeline.store.push import push
    from pipeline.store.s3 import CurrentMoved

    local = wh.model_copy(update={"snapshot_store": None})
    a = Path(_night(local, shared_data, 30)["path"])
    b = Path(_night(local, shared_data, 33)["path"])
    won = {}

    def other_publisher_meanwhile(key, size):  # B publishes while A uploads its first object
        if not won:
            won["b"] = push(wh, b)

    with pytest.raises(CurrentMoved) as lost:
        push(wh, a, on_upload=other_publisher_meanwhile)
    assert isinstance(lost.value, UserError) and "\n" not in str(lost.value)
    assert f"another publisher moved CURRENT to {b.name}" in str(lost.value)
    store = _store(store_url)
    assert store.current()[0] == b.name == won["b"]["snapshot_id"]
    # once CURRENT exists (If-Match on its ETag): A publishes a third night while B publishes b again. CURRENT
    # names b before and after B's write, yet A's read of it is stale: A loses
    c = Path(_night(local, shared_data, 36)["path"])
    won.clear()
    with pytest.raises(CurrentMoved):
        push(wh, c, on_upload=other_publisher_meanwhile)
    assert store.current()[0] == b.name
    assert push(wh, c)["snapshot_id"] == store.current()[0] == c.name  # and wins when it publishes again


def test_retention_keeps_a_pinned_snapshot_and_its_objects(wh, store_url, shared_data):
    from pipeline.query import open_snapshot
    from pipeline.store.retention import apply_store_retention

    s = wh.model_copy(update={"snapshot_keep": 1})
    r1 = _night(s, shared_data, 30)
    night1 = _shas(Path(r1["path"]))  # (retention deletes the local copy: keep 1)
    reader = open_snapshot(s, f"{store_url}@{r1['snapshot_id']}")  # a reader on night 1 pins it in the store
    r2 = _night(s, shared_data, 33)
    store = _store(store_url)
    assert r2["store"]["retention"]["kept_pinned"].keys() == {r1["snapshot_id"]}
    assert set(store.snapshot_ids()) == {r1["snapshot_id"], r2["snapshot_id"]}
    assert night1 <= store.object_names()
    reader.close()
    # an expired lease (a reader killed long ago) holds nothing
    stale = {"snapshot_id": r2["snapshot_id"], "expires_at": (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat()}
    store.put_bytes(store.pin_key(f"{r1['snapshot_id']}@gone-host@1@dead.json"), json.dumps(stale).encode())
    out = apply_store_retention(store, keep=1, grace_s=0)
    assert out["removed"] == [r1["snapshot_id"]] and out["pins_expired"] == 1
    assert store.snapshot_ids() == [r2["snapshot_id"]]
    only_night1 = night1 - _shas(Path(r2["path"]))
    assert out["objects_deleted"] == len(only_night1) > 0
    assert store.object_names() == _shas(Path(r2["path"]))  # garbage collected: exactly the kept manifest's
    assert list(store.listing("pins")) == []


def test_retention_leaves_young_unreferenced_objects_to_a_running_publisher(wh, store_url, shared_data):
    from pipeline.store.retention import apply_store_retention

    r1 = _night(wh, shared_data, 30)
    store = _store(store_url)
    store.put_bytes(store.object_key("0" * 64), b"uploaded by a publisher that has not written its manifest yet")
    assert apply_store_retention(store, keep=1, grace_s=3600)["objects_deleted"] == 0
    assert "0" * 64 in store.object_names() and store.current()[0] == r1["snapshot_id"]
    # past the grace it goes; a key under objects/ that is not a sha256 is not retention's to delete
    store.put_bytes(store.url.key("objects", "notes.txt"), b"put there by hand")
    assert apply_store_retention(store, keep=1, grace_s=0)["objects_deleted"] == 1
    assert "0" * 64 not in store.object_names() and store.get_bytes(store.url.key("objects", "notes.txt"))


def _cli(*args: str, env: dict, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True,
                          env=dict(env, PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1"),
                          cwd=REPO, timeout=timeout)


def _one_error(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("paperkb: error:")]
    assert len(lines) == 1, p.stderr
    return lines[0]


def test_cli_search_from_the_store_answers_as_the_local_snapshot(wh, store_url, tmp_path):
    import re

    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    p = _cli("--warehouse", str(wh.warehouse), "publish", env=dict(env, PAPERKB_SNAPSHOT_STORE=store_url))
    assert p.returncode == 0, p.stderr
    out = " ".join(p.stdout.split())  # (wrapped to the terminal's width)
    sid = re.search(r"publish: snapshot (\S+) is CURRENT", out).group(1)
    assert f"CURRENT in {store_url} too: uploaded" in out
    env["PAPERKB_SNAPSHOT_CACHE"] = str(tmp_path / "cli-cache")
    answers = []
    for where in (sid, store_url):
        p = _cli("--warehouse", str(wh.warehouse), "search", "information retrieval systems", "--json",
                 "--snapshot", where, env=env)
        assert p.returncode == 0, p.stderr
        r = json.loads(p.stdout)
        answers.append((r["snapshot_id"], [(x["paper_id"], round(x["score"], 6)) for x in r["results"]]))
    assert answers[0] == answers[1] and answers[0][1]
    assert (tmp_path / "cli-cache").is_dir()
    # commands that never close their snapshot leave no lease in the store when they end (it held 15 minutes)
    paper = answers[0][1][0][0]
    p = _cli("--warehouse", str(wh.warehouse), "export", paper, "--snapshot", store_url, env=env)
    assert p.returncode == 0 and "@" in p.stdout, p.stderr
    p = _cli("--warehouse", str(wh.warehouse), "related", paper, "--json", "--snapshot", store_url, env=env)
    assert p.returncode == 0 and json.loads(p.stdout)["snapshot_id"] == sid, p.stderr
    p = _cli("--warehouse", str(wh.warehouse), "ask", "information retrieval", "--no-llm", "--json", "--snapshot",
             store_url, env=env)
    assert p.returncode == 0, p.stderr
    assert [o.key for o in _store(store_url).listing("pins")] == []


def test_bad_store_urls_and_unreachable_endpoints_are_one_line_errors(wh, store_url, tmp_path):
    from pipeline.steps.publish import run_publish

    run_publish(wh)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env["PAPERKB_SNAPSHOT_CACHE"] = str(tmp_path / "cache")
    wh_args = ("--warehouse", str(wh.warehouse))
    bucket = store_url.split("/")[2]
    assert "not an S3 bucket name" in _one_error(_cli(*wh_args, "search", "x", "--snapshot", "s3://Bad_Bucket/p", env=env))
    assert "no bucket 'no-such-bucket-here'" in _one_error(
        _cli(*wh_args, "search", "x", "--snapshot", "s3://no-such-bucket-here/p", env=env))
    assert "no published snapshot in" in _one_error(
        _cli(*wh_args, "search", "x", "--snapshot", f"s3://{bucket}/empty-prefix", env=env))
    assert "not found in" in _one_error(
        _cli(*wh_args, "search", "x", "--snapshot", f"{store_url}@20200101T000000Z-dead", env=env))
    assert "PAPERKB_SNAPSHOT_STORE" in _one_error(
        _cli(*wh_args, "publish", env=dict(env, PAPERKB_SNAPSHOT_STORE="https://example.org/bucket")))
    t0 = time.monotonic()
    closed = f"http://127.0.0.1:{_free_port()}"
    line = _one_error(_cli(*wh_args, "search", "x", "--snapshot", store_url, env=dict(env, AWS_ENDPOINT_URL=closed)))
    assert "cannot reach" in line and "AWS_ENDPOINT_URL" in line
    assert time.monotonic() - t0 < 60
    # publish: the snapshot is published here, the store's failure is the one line
    line = _one_error(_cli(*wh_args, "publish", env=dict(env, AWS_ENDPOINT_URL=closed, PAPERKB_SNAPSHOT_STORE=store_url)))
    assert "is published here but not in the store" in line and "paperkb snapshots push" in line
    no_creds = {k: v for k, v in env.items() if not k.startswith("AWS_ACCESS") and not k.startswith("AWS_SECRET")}
    assert "no AWS credentials" in _one_error(_cli(*wh_args, "search", "x", "--snapshot", store_url, env=no_creds))


def _health(base: str) -> dict | None:
    import urllib.request

    try:
        with urllib.request.urlopen(f"{base}/api/health", timeout=30) as r:
            return json.loads(r.read())
    except OSError:
        return None


def _wait_for(check, what: str, timeout: float = 300.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_two_serve_processes_follow_the_stores_current(wh, store_url, shared_data, tmp_path):
    """Two `paperkb serve --snapshot s3://...` processes, each with its own cache and no warehouse (two hosts)."""
    from pipeline.store.leases import read_pins

    r1 = _night(wh, shared_data, 30)
    procs, bases = [], []
    try:
        for i in (1, 2):
            port = _free_port()
            env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
            env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                       PAPERKB_SNAPSHOT_CACHE=str(tmp_path / f"host{i}"), PAPERKB_SNAPSHOT_STORE_POLL_S="0",
                       PAPERKB_WAREHOUSE=str(tmp_path / f"host{i}-warehouse"))
            procs.append(subprocess.Popen([sys.executable, "-m", "pipeline.cli", "serve", "--port", str(port),
                                           "--snapshot", store_url], env=env, cwd=REPO,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
            bases.append(f"http://127.0.0.1:{port}")
        for base, p in zip(bases, procs):
            h = _wait_for(lambda p=p, base=base: p.poll() is None and _health(base) or (p.poll() is not None and {"exit": p.poll()}),
                          f"{base} to serve")
            assert h.get("snapshot_id") == r1["snapshot_id"], (h, p.stderr.read() if p.poll() is not None else "")
        r2 = _night(wh, shared_data, 33)
        for base in bases:
            _wait_for(lambda base=base: (_health(base) or {}).get("snapshot_id") == r2["snapshot_id"], f"{base} to switch")
        live = read_pins(_store(store_url))[0]
        assert len(live.get(r2["snapshot_id"], [])) == 2 and r1["snapshot_id"] not in live
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_serve_snapshots_accepts_store_urls(tmp_path):
    """PAPERKB_SERVE_SNAPSHOTS: s3://bucket/prefix follows the store's CURRENT, s3://bucket/prefix@id holds one
    (parsed without asking the store); a bad URL is one line."""
    from pipeline.errors import UserError
    from pipeline.serve.multi_holder import spec_holder
    from pipeline.settings import Settings

    s = Settings(warehouse=tmp_path / "wh")
    follow, name = spec_holder(s, "s3://my-bucket/team/papers")
    assert follow.store is not None and follow.pinned is None and name == "papers"
    one, name = spec_holder(s, "s3://my-bucket@20261126T010000Z-ab12")
    assert one.pinned == "20261126T010000Z-ab12" and name == "my-bucket"
    with pytest.raises(UserError, match="not an S3 bucket name"):
        spec_holder(s, "s3://x/p")


# ---- issue 64: what a store may make a reader do ---------------------------------------------------------------
def _sha(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _put_manifest(store, sid: str, files: dict[str, str], **more) -> None:
    store.put_bytes(store.manifest_key(sid), json.dumps({"snapshot_id": sid, "files": files, **more}).encode())


def test_a_manifest_naming_files_outside_the_cache_is_refused(store_url, tmp_path):
    """A manifest uploaded to the store whose digests are paths (/etc/passwd, ../../proc/self/environ) or whose
    names leave the snapshot folder is refused with one line, and nothing outside the cache lands in a snapshot."""
    from pipeline.errors import UserError
    from pipeline.store.materialise import materialise

    store = _store(store_url)
    good = b"an honest file\n"
    store.put_bytes(store.object_key(_sha(good)), good, "application/octet-stream")
    cache = tmp_path / "cache"
    environ = "../" * 12 + "proc/self/environ"
    for sid, files, says in [
        ("20990101T000000Z-0001", {"a.txt": _sha(good), "feeds/leak.md": "/etc/passwd"}, "'feeds/leak.md'"),
        ("20990101T000000Z-0002", {"a.txt": _sha(good), "feeds/env.md": environ}, "'feeds/env.md'"),
        ("20990101T000000Z-0003", {"a.txt": _sha(good).upper()}, "not a sha256"),
        ("20990101T000000Z-0004", {"a.txt": _sha(good), "": _sha(good)}, "''"),
        ("20990101T000000Z-0005", {"a.txt": _sha(good), "a.txt/b": _sha(good)}, "'a.txt/b'"),
        ("20990101T000000Z-0006", {"./a.txt": _sha(good)}, "'./a.txt'"),
        ("20990101T000000Z-0007", {"x/..\\..\\..\\y": _sha(good)}, "not a relative path"),
    ]:
        _put_manifest(store, sid, files)
        with pytest.raises(UserError) as refused:
            materialise(store, sid, cache)
        line = str(refused.value)
        assert "\n" not in line and len(line) < 400 and says in line, line
        assert not (cache / store.url.bucket / "nightly" / "snapshots" / sid).exists()
    # nothing of /etc/passwd or of this process's environment was copied or linked anywhere into the cache
    secret = os.environ["AWS_SECRET_ACCESS_KEY"].encode()
    for f in cache.rglob("*"):
        if f.is_file():
            data = f.read_bytes()
            assert b"root:" not in data and b"AWS_SECRET_ACCESS_KEY=" + secret not in data, f


def test_a_cached_object_is_verified_before_it_is_linked(store_url, tmp_path):
    """An object already in the cache counts only when its sha256 is right and it is a plain file of the cache:
    a tampered copy or a symbolic link to a file elsewhere is replaced by the store's object."""
    from pipeline.store.materialise import cache_root, materialise

    store = _store(store_url)
    one, two = b"first object\n", b"second object\n"
    for data in (one, two):
        store.put_bytes(store.object_key(_sha(data)), data, "application/octet-stream")
    objects = cache_root(tmp_path / "cache", store.url) / "objects"
    objects.mkdir(parents=True)
    (objects / _sha(one)).write_bytes(b"tampered in the cache\n")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"a file outside the cache\n")
    (objects / _sha(two)).symlink_to(outside)
    sid = "20990101T000000Z-0010"
    _put_manifest(store, sid, {"one.txt": _sha(one), "two.txt": _sha(two)})
    folder, cost = materialise(store, sid, tmp_path / "cache")
    assert (folder / "one.txt").read_bytes() == one and (folder / "two.txt").read_bytes() == two
    assert cost["objects_downloaded"] == 2
    assert not (objects / _sha(two)).is_symlink() and outside.read_bytes() == b"a file outside the cache\n"


def test_a_snapshot_materialised_before_the_checks_is_checked_again(store_url, tmp_path):
    """A cached snapshot whose manifest lists a file by a path, not a digest (materialised by an older
    version), is refused, not opened."""
    from pipeline.errors import UserError
    from pipeline.store.materialise import cache_root, materialise

    store = _store(store_url)
    sid = "20990101T000000Z-0020"
    folder = cache_root(tmp_path / "cache", store.url) / "snapshots" / sid
    (folder / "feeds").mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"snapshot_id": sid, "files": {"feeds/leak.md": "/etc/passwd"}}))
    (folder / "feeds" / "leak.md").write_text("root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(UserError, match="feeds/leak.md"):
        materialise(store, sid, tmp_path / "cache")


def test_current_and_error_lines_quote_at_most_a_little(store_url):
    """A 1 MB CURRENT is refused without being read whole, and the error line quotes no more than 80 characters
    of what the store holds."""
    from pipeline.errors import UserError
    from pipeline.store.materialise import materialise, resolve_id

    store = _store(store_url)
    store.put_bytes(store.url.key("CURRENT"), b"x" * 1_000_000, "text/plain")
    with pytest.raises(UserError) as refused:
        resolve_id(store)
    assert "CURRENT" in str(refused.value) and len(str(refused.value)) < 300, str(refused.value)[:500]
    store.put_bytes(store.url.key("CURRENT"), b"y" * 2000 + b"\n", "text/plain")  # small enough, yet no id
    with pytest.raises(UserError) as refused:
        resolve_id(store)
    assert len(str(refused.value)) < 300, str(refused.value)[:500]
    sid = "20990101T000000Z-0030"
    _put_manifest(store, sid, {"a.txt": "z" * 100_000})
    with pytest.raises(UserError) as refused:
        materialise(store, sid, None)
    assert len(str(refused.value)) < 400, str(refused.value)[:500]


def test_a_cold_read_of_large_objects_discards_no_connection(store_url, tmp_path, caplog):
    """Eight objects past boto3's multipart threshold downloaded side by side, each in ranges: the client has a
    connection for every thread (urllib3 warned "Connection pool is full, discarding connection" otherwise)."""
    from pipeline.store.materialise import materialise

    store = _store(store_url)
    files = {}
    for i in range(8):
        data = bytes([i]) * ((32 << 20) + 1)  # 5 ranges (of 8 MiB): 40 GETs at once
        store.client.put_object(Bucket=store.url.bucket, Key=store.object_key(_sha(data)), Body=data)
        files[f"big/{i}.bin"] = _sha(data)
    sid = "20990101T000000Z-0040"
    _put_manifest(store, sid, files)
    with caplog.at_level(logging.WARNING, logger="urllib3"):
        folder, cost = materialise(_store(store_url), sid, tmp_path / "cache")
    assert cost["objects_downloaded"] == 8 and (folder / "big" / "7.bin").stat().st_size == (32 << 20) + 1
    assert not [r.getMessage() for r in caplog.records if "pool is full" in r.getMessage()]


def _reader(wh, tmp_path, host: str):
    """Settings of a reader on another host: its own cache, no warehouse."""
    return wh.model_copy(update={"snapshot_cache": tmp_path / host, "warehouse": tmp_path / f"{host}-warehouse"})


def test_serve_answers_no_file_outside_the_cache(wh, store_url, tmp_path):
    """The issue's reproduction: a manifest uploaded to the store lists feeds whose digests are /etc/passwd and
    ../../proc/self/environ; a server holding that snapshot answers 503 with the reason, never the files."""
    from fastapi.testclient import TestClient

    from pipeline.serve.app import create_app
    from pipeline.steps.publish import run_publish

    r1 = run_publish(wh)
    store = _store(store_url)
    m = store.manifest(r1["snapshot_id"])
    index = json.dumps({"feeds": {"leak": {}, "env": {}}}).encode()
    store.put_bytes(store.object_key(_sha(index)), index)
    m["files"].update({"feeds/index.json": _sha(index), "feeds/leak.md": "/etc/passwd",
                       "feeds/env.md": "../" * 12 + "proc/self/environ"})
    poisoned = m["snapshot_id"] = "29991231T235959Z-bad1"
    store.put_bytes(store.manifest_key(poisoned), json.dumps(m).encode())
    with TestClient(create_app(_reader(wh, tmp_path, "host1"), f"{store_url}@{poisoned}")) as c:
        for feed in ("leak", "env"):
            r = c.get(f"/api/feeds/{feed}", params={"format": "md"})
            assert r.status_code == 503, r.text[:300]
            assert "root:" not in r.text and "AWS_SECRET_ACCESS_KEY" not in r.text
            assert "not a sha256" in r.json()["detail"] and poisoned in r.json()["detail"]


def _publish_damaged_copy(store, of: str, new_id: str) -> str:
    """A snapshot ``new_id`` made CURRENT: ``of``'s manifest with one file whose object in the store is damaged
    (its content is not what its sha256 says). Returns that sha256."""
    m = store.manifest(of)
    rel = sorted(m["files"])[0]
    bad = m["files"][rel] = _sha(b"the bytes that were published")
    store.put_bytes(store.object_key(bad), b"other bytes: damaged in the store", "application/octet-stream")
    m["snapshot_id"] = new_id
    store.put_bytes(store.manifest_key(new_id), json.dumps(m).encode())
    prev, etag = store.current()
    store.swap_current(new_id, etag, prev)
    return bad


def test_a_damaged_snapshot_in_the_store_leaves_the_last_good_one_served(wh, store_url, tmp_path, caplog, monkeypatch):
    """CURRENT moved to a snapshot with a damaged object: a running server goes on serving the snapshot it served,
    /api/health says why (200, "degraded"), the damaged object is downloaded once, not per request, and
    /api/snapshots lists the store's snapshots (that one damaged). A server started afterwards on the same host
    serves the snapshot of its cache. CURRENT moved back: "ok" again; the store unreachable: "degraded" again."""
    from fastapi.testclient import TestClient

    from pipeline.serve.app import create_app
    from pipeline.steps.publish import run_publish

    good = run_publish(wh)["snapshot_id"]
    store = _store(store_url)
    reader = _reader(wh, tmp_path, "host1")
    with TestClient(create_app(reader, store_url)) as c:
        assert c.get("/api/health").json() == {"status": "ok", "snapshot_id": good}
        bad_id = "29991231T235959Z-bad2"
        bad_sha = _publish_damaged_copy(store, good, bad_id)
        with caplog.at_level(logging.INFO, logger="werkzeug"):  # the S3 server's log: a line per request
            answers = [c.get("/api/health") for _ in range(3)]
            answers.append(c.get("/api/search", params={"q": "information retrieval"}))
            answers.append(c.get("/api/health"))
        assert [a.status_code for a in answers] == [200] * 5, answers[0].text
        h = answers[0].json()
        assert h["status"] == "degraded" and h["snapshot_id"] == good, h
        assert bad_id in h["detail"] and "damaged in the store" in h["detail"] and f"still serving {good}" in h["detail"]
        assert "\n" not in h["detail"]
        assert answers[3].json()["snapshot_id"] == good and answers[3].json()["results"]
        gets = [r.getMessage() for r in caplog.records if "GET " in r.getMessage() and f"/objects/{bad_sha}" in r.getMessage()]
        assert len(gets) == 1, gets  # backed off: not downloaded again per request
        listed = c.get("/api/snapshots").json()
        assert listed["current"] == bad_id and listed["serving"] == good
        rows = {s["snapshot_id"]: s for s in listed["snapshots"]}
        assert rows[good]["status"] == "ok" and rows[bad_id]["status"] == "damaged"
        assert "damaged in the store" in rows[bad_id]["problems"][0]
    with TestClient(create_app(reader, store_url)) as c:  # restarted: the cache's snapshot, not 503
        h = c.get("/api/health").json()
        assert h["status"] == "degraded" and h["snapshot_id"] == good and bad_id in h["detail"], h
        _, etag = store.current()
        store.swap_current(good, etag, bad_id)  # (what `paperkb snapshots rollback` would do in the store)
        assert c.get("/api/health").json() == {"status": "ok", "snapshot_id": good}
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{_free_port()}")  # the store unreachable
        h = c.get("/api/health").json()
        assert h["status"] == "degraded" and h["snapshot_id"] == good and "cannot reach" in h["detail"], h


def test_the_next_publish_aborts_a_killed_publishers_multipart_upload(wh, store_url):
    """A publisher killed during a multipart upload (past 64 MiB) leaves its parts in the store, stored and billed:
    the next publish's retention aborts every such upload under its prefix begun more than the lease time ago
    (moto dates every upload in 2010), and leaves other prefixes alone."""
    from pipeline.steps.publish import run_publish
    from pipeline.store.push import push

    r1 = run_publish(wh)
    store = _store(store_url)
    c, bucket = store.client, store.url.bucket
    left = {}
    for key in (store.object_key("1" * 64), f"elsewhere/objects/{'1' * 64}"):
        up = c.create_multipart_upload(Bucket=bucket, Key=key)
        c.upload_part(Bucket=bucket, Key=key, UploadId=up["UploadId"], PartNumber=1, Body=b"x" * (5 << 20))
        left[key] = up["UploadId"]
    def under(prefix: str) -> list[str]:
        return [u["UploadId"] for u in c.list_multipart_uploads(Bucket=bucket, Prefix=prefix).get("Uploads", [])]

    assert under("nightly/") == [left[store.object_key("1" * 64)]]
    out = push(wh, Path(r1["path"]))  # the next publish
    assert under("nightly/") == []
    assert out["retention"].get("uploads_aborted") == 1
    assert under("elsewhere/") == [left[f"elsewhere/objects/{'1' * 64}"]]
