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

The store is not trusted with local paths: a manifest is refused (one line) unless every digest is a sha256
(64 lowercase hex characters) and every file name a relative path that stays in the snapshot's folder
(:func:`manifest_problem`), so nothing but an object of the cache is ever linked into a snapshot. An object
the cache already holds is used only when it is a plain file whose sha256 was checked in this process
(:func:`_cached`: once per process and file); a wrong one is downloaded again.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pipeline import pins as local_pins
from pipeline import snapshots as snap
from pipeline.errors import UserError
from pipeline.store.s3 import DIGEST, DOWNLOAD_WORKERS, S3Store, StoreError, quoted
from pipeline.store.url import StoreURL, is_snapshot_id

log = logging.getLogger(__name__)

KEEP_YOUNGER_S = 600  # a cached snapshot this young is never pruned (another process may be about to open it)
MAX_NAME_BYTES, MAX_PATH_BYTES = 255, 4096  # a file name's part, and the whole name (the filesystem's limits)

# cached objects whose sha256 this process checked: path -> (device, inode, size, mtime) when it was checked
_verified: dict[str, tuple[int, int, int, int]] = {}
_verified_lock = threading.Lock()


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
    if not is_snapshot_id(sid) or not snap.is_snapshot_name(sid):
        raise StoreError(f"snapshot store {store.url.root}: CURRENT names {quoted(sid)}, not a snapshot id")
    return sid


def cached_ids(cache: Path | None, url: StoreURL) -> list[str]:
    """Ids of the store's snapshots materialised in the local cache, newest first (ids begin with their time)."""
    snaps = cache_root(cache, url) / "snapshots"
    found = [d.name for d in snaps.iterdir() if is_snapshot_id(d.name) and snap.is_snapshot_name(d.name)
             and (d / snap.MANIFEST).is_file()] if snaps.is_dir() else []
    return sorted(found, reverse=True)


def manifest_problem(files: object) -> str | None:
    """Why a store's manifest ``files`` ({relative path: sha256}) must not be materialised, else None: a digest
    that is not 64 lowercase hex characters (it would be a path under ``objects/``), a name that is absolute,
    has an empty, ``.`` or ``..`` part, a backslash or a NUL, is too long for a filesystem, or is also the
    folder of another name."""
    if not isinstance(files, dict) or not files:
        return f"{snap.MANIFEST} lists no files" if not files else f"{snap.MANIFEST}: 'files' is not an object"
    folders: dict[str, str] = {}  # folder -> a file in it
    for rel, digest in files.items():
        if not isinstance(digest, str) or not DIGEST.fullmatch(digest):
            return (f"{snap.MANIFEST} lists {quoted(rel)} with the digest {quoted(digest)}, not a sha256 "
                    "(64 lowercase hex characters)")
        parts = rel.split("/")
        if (not rel or "\\" in rel or "\x00" in rel or any(p in ("", ".", "..") for p in parts) or rel == snap.MANIFEST
                or len(rel.encode()) > MAX_PATH_BYTES or any(len(p.encode()) > MAX_NAME_BYTES for p in parts)):
            return f"{snap.MANIFEST} lists the file {quoted(rel)}: not a relative path inside the snapshot"
        folders.update(("/".join(parts[:i]), rel) for i in range(1, len(parts)))
    clash = next((rel for rel in files if rel in folders), None)
    if clash is not None:
        return f"{snap.MANIFEST} lists {quoted(clash)} both as a file and as the folder of {quoted(folders[clash])}"
    return None


def materialise(store: S3Store, snapshot_id: str, cache: Path | None = None, *,
                workers: int = DOWNLOAD_WORKERS) -> tuple[Path, dict]:
    """The local folder of ``snapshot_id`` from ``store`` (downloaded now when not cached) and what it cost
    ({objects_downloaded, bytes_downloaded, seconds}). StoreError (one line) for a manifest that names
    anything but objects and relative paths (:func:`manifest_problem`) or an object whose checksum is wrong."""
    t0 = time.perf_counter()
    if not is_snapshot_id(snapshot_id):
        raise StoreError(f"snapshot store {store.url.root}: {quoted(snapshot_id)} is not a snapshot id")
    root = cache_root(cache, store.url)
    folder = root / "snapshots" / snapshot_id
    if (folder / snap.MANIFEST).is_file():  # materialised before (by an older version, maybe): checked again
        problem = manifest_problem(snap.read_manifest(folder).get("files"))
        if problem:
            raise StoreError(f"snapshot {snapshot_id} of {store.url.root} in the local cache: {problem}; delete its "
                             "folder from the cache")
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
        problem = manifest_problem(manifest.get("files"))
        problems = [problem] if problem else snap._shape_problems(manifest)
        if problems:
            raise StoreError(f"snapshot store {store.url.root}: snapshot {snapshot_id}: {problems[0]}")
        files: dict[str, str] = manifest["files"]
        objects = root / "objects"
        objects.mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max(1, workers)) as pool:  # each object: checked when cached, else downloaded
            got = list(pool.map(lambda sha: None if _cached(objects, sha) else _fetch(store, objects, sha, snapshot_id),
                                sorted(set(files.values()))))
        sizes = [n for n in got if n is not None]
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
    cost = {"objects_downloaded": len(sizes), "bytes_downloaded": sum(sizes),
            "seconds": round(time.perf_counter() - t0, 2)}
    log.info("store: snapshot %s materialised from %s: %d object(s), %.1f MB downloaded in %.1fs", snapshot_id,
             store.url.root, cost["objects_downloaded"], cost["bytes_downloaded"] / 1e6, cost["seconds"])
    prune(root, keep={snapshot_id})
    return folder, cost


def _fetch(store: S3Store, objects: Path, sha: str, snapshot_id: str) -> int:
    part = objects / f".{sha}.{uuid.uuid4().hex[:8]}.part"
    try:
        size = store.download(store.object_key(sha), part)
        got = snap.sha256_file(part)
        if got != sha:
            raise StoreError(f"snapshot store {store.url.root}: snapshot {snapshot_id}: object {sha[:12]}... has the "
                             f"checksum {got[:12]}... (damaged in the store)")
        os.replace(part, objects / sha)
        _remember(objects / sha)
        return size
    finally:
        part.unlink(missing_ok=True)


def _key(st: os.stat_result) -> tuple[int, int, int, int]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _remember(path: Path) -> None:
    with _verified_lock:
        _verified[str(path)] = _key(os.lstat(path))


def _cached(objects: Path, sha: str) -> bool:
    """Whether the cache holds the object ``sha``, fit to link: a plain file (not a link to a file elsewhere)
    whose sha256 is ``sha``, hashed once per process (again when its inode, size or time changed). Anything
    else under its name is removed (and downloaded again)."""
    path = objects / sha
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    with _verified_lock:
        if stat.S_ISREG(st.st_mode) and _verified.get(str(path)) == _key(st):
            return True
    if stat.S_ISREG(st.st_mode):
        got = snap.sha256_file(path)
        if got == sha:
            with _verified_lock:
                _verified[str(path)] = _key(st)
            return True
        log.warning("store cache: object %s... has the checksum %s... (damaged in the cache): downloading it again",
                    sha[:12], got[:12])
    else:
        log.warning("store cache: objects/%s... is not a plain file: downloading the object again", sha[:12])
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)
    return False


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
                with _verified_lock:
                    _verified.pop(str(f), None)
                freed += st.st_size
    if removed:
        log.info("store cache: removed %d snapshot(s) no reader holds (%.1f MB freed)", len(removed), freed / 1e6)
    return {"removed": removed, "bytes_freed": freed}
