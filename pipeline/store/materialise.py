"""A store's snapshot on local disk: a content-addressed cache that the local readers open as they are.

Readers do not read the store in place. LanceDB could (``s3://`` URIs), but DuckDB needs its ``httpfs``
extension, which it downloads from the internet at first use (not possible on closed hosts), and the
store's content-addressed layout (``objects/<sha256>``) is not a Lance directory anyway: a Lance table is
read through its relative paths. So a reader copies the snapshot here once and opens the folder with the
local code (``pipeline.query.open_snapshot``), at local-disk speed::

    <cache>/<bucket>/<prefix>/objects/<sha256>          each object once, verified by its sha256
    <cache>/<bucket>/<prefix>/snapshots/<id>/...         the snapshot's files: hard links to objects/
    <cache>/<bucket>/<prefix>/snapshots/.pins/           local leases of the readers (pipeline.pins)

A night downloads only the objects the cache lacks. Folders appear complete (built under a hidden name,
then renamed). Cached snapshots that no local reader pins are removed when a newer one is materialised,
and then every object no cached snapshot links (link count 1).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pipeline import pins as local_pins
from pipeline import snapshots as snap
from pipeline.errors import UserError
from pipeline.store.s3 import S3Store, StoreError
from pipeline.store.url import StoreURL

log = logging.getLogger(__name__)

KEEP_YOUNGER_S = 600  # a cached snapshot this young is never pruned (another process may be about to open it)


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "paperkb" / "snapshots"


def cache_root(cache: Path | None, url: StoreURL) -> Path:
    return Path(cache or default_cache()).expanduser() / url.bucket / (url.prefix or "_")


def resolve_id(store: S3Store) -> str:
    """The id the store's URL names, else its CURRENT; UserError when there is none."""
    sid = store.url.snapshot_id
    if sid is None:
        sid, _ = store.current()
        if sid is None:
            raise UserError(f"no published snapshot in {store.url.root} (no CURRENT): run `paperkb publish` with "
                            "PAPERKB_SNAPSHOT_STORE set first")
    if not snap.is_snapshot_name(sid) or "/" in sid or "\\" in sid:
        raise StoreError(f"snapshot store {store.url.root}: CURRENT names {sid!r}, not a snapshot id")
    return sid


def materialise(store: S3Store, snapshot_id: str, cache: Path | None = None, *, workers: int = 8) -> tuple[Path, dict]:
    """The local folder of ``snapshot_id`` from ``store`` (downloaded now when not cached) and what it cost
    ({objects_downloaded, bytes_downloaded, seconds})."""
    t0 = time.perf_counter()
    root = cache_root(cache, store.url)
    folder = root / "snapshots" / snapshot_id
    if (folder / snap.MANIFEST).is_file():
        return folder, {"objects_downloaded": 0, "bytes_downloaded": 0, "seconds": 0.0}
    raw = store.get_bytes(store.manifest_key(snapshot_id))
    if raw is None:
        known = store.snapshot_ids()[-5:]
        raise UserError(f"snapshot {snapshot_id} not found in {store.url.root} (latest: {', '.join(known) or 'none'})")
    tmp = root / "snapshots" / f".{snapshot_id}.{uuid.uuid4().hex[:8]}.tmp"
    tmp.mkdir(parents=True)
    (root / "snapshots" / local_pins.PINS_DIR).mkdir(exist_ok=True)  # readers of the cache pin locally
    try:
        (tmp / snap.MANIFEST).write_bytes(raw)
        manifest = snap.read_manifest(tmp)
        problems = snap._shape_problems(manifest)
        if problems:
            raise StoreError(f"snapshot store {store.url.root}: snapshot {snapshot_id}: {problems[0]}")
        files: dict[str, str] = manifest["files"]
        objects = root / "objects"
        objects.mkdir(parents=True, exist_ok=True)
        missing = sorted({sha for sha in files.values() if not (objects / sha).is_file()})
        with ThreadPoolExecutor(max(1, workers)) as pool:
            sizes = list(pool.map(lambda sha: _fetch(store, objects, sha), missing))
        for rel, sha in files.items():
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(objects / sha, dest)
            except OSError:  # a filesystem without hard links
                shutil.copyfile(objects / sha, dest)
        try:
            os.rename(tmp, folder)
        except OSError:  # another process materialised it first
            if not (folder / snap.MANIFEST).is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    cost = {"objects_downloaded": len(missing), "bytes_downloaded": sum(sizes),
            "seconds": round(time.perf_counter() - t0, 2)}
    log.info("store: snapshot %s materialised from %s: %d object(s), %.1f MB downloaded in %.1fs", snapshot_id,
             store.url.root, cost["objects_downloaded"], cost["bytes_downloaded"] / 1e6, cost["seconds"])
    prune(root, keep={snapshot_id})
    return folder, cost


def _fetch(store: S3Store, objects: Path, sha: str) -> int:
    part = objects / f".{sha}.{uuid.uuid4().hex[:8]}.part"
    try:
        size = store.download(store.object_key(sha), part)
        got = snap.sha256_file(part)
        if got != sha:
            raise StoreError(f"snapshot store {store.url.root}: object {sha[:12]}... has the checksum {got[:12]}... "
                             "(damaged in the store)")
        os.replace(part, objects / sha)
        return size
    finally:
        part.unlink(missing_ok=True)


def prune(root: Path, keep: set[str]) -> dict[str, Any]:
    """Remove cached snapshots no local reader pins (but ``keep`` and young ones), then unlinked objects."""
    snaps = root / "snapshots"
    removed = []
    now = time.time()
    for d in snaps.iterdir() if snaps.is_dir() else []:
        if not d.is_dir() or d.name in keep:
            continue
        if d.name.startswith(".") and d.name.endswith(snap.TMP_SUFFIX):
            if now - d.stat().st_mtime > 86400:  # abandoned by a killed reader
                shutil.rmtree(d, ignore_errors=True)
            continue
        if not snap.is_snapshot_name(d.name) or now - d.stat().st_mtime < KEEP_YOUNGER_S:
            continue
        if local_pins.holders(snaps, d.name, clean=True):
            continue
        gone = snaps / f"{d.name}{snap.DELETING_SUFFIX}"
        os.replace(d, gone)
        if local_pins.holders(snaps, d.name):  # pinned between the look and the rename
            os.replace(gone, d)
            continue
        shutil.rmtree(gone, ignore_errors=True)
        removed.append(d.name)
    freed = 0
    objects = root / "objects"
    if removed and objects.is_dir():
        for f in objects.iterdir():
            try:
                st = f.stat()
            except FileNotFoundError:
                continue
            if st.st_nlink == 1 and not f.name.startswith("."):
                f.unlink(missing_ok=True)
                freed += st.st_size
    if removed:
        log.info("store cache: removed %d snapshot(s) no reader holds (%.1f MB freed)", len(removed), freed / 1e6)
    return {"removed": removed, "bytes_freed": freed}
