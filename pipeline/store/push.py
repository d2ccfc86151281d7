"""Upload a published snapshot to the store: the objects it lacks, the manifest, then CURRENT (conditional).

Order (a publisher killed at any point leaves CURRENT on the previous snapshot, and readers never see a
half-uploaded one)::

    read CURRENT      its id and ETag: the final swap is conditional on it
    objects           <prefix>/objects/<sha256> of each listed file the store lacks (one LIST tells which)
    manifest          <prefix>/snapshots/<id>/manifest.json, then one more LIST: an object deleted meanwhile
                      (another publisher's garbage collection) is uploaded again
    CURRENT           If-Match: <etag read first> (If-None-Match: * for the first): the loser of two
                      publishers gets CurrentMoved, one line, and CURRENT stays the winner's
    retention         pipeline.store.retention: the newest snapshot_keep, CURRENT and pinned ones stay

A rerun after a kill uploads only what is still missing (the objects are content-addressed).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable

from pipeline import snapshots as snap
from pipeline.errors import UserError
from pipeline.settings import Settings
from pipeline.store.s3 import S3Store

log = logging.getLogger(__name__)

UploadHook = Callable[[str, int], None]  # (object key, bytes): called after each object is uploaded


def push(settings: Settings, folder: Path, *, store: S3Store | None = None, on_upload: UploadHook | None = None,
         retain: bool = True) -> dict[str, Any]:
    """Upload the snapshot in ``folder`` to ``settings.snapshot_store`` and make it the store's CURRENT.
    Returns what it cost: objects and bytes uploaded and skipped, HTTP requests, seconds."""
    if not settings.snapshot_store:
        raise UserError("no snapshot store: set PAPERKB_SNAPSHOT_STORE=s3://bucket/prefix")
    store = store or S3Store(settings.snapshot_store)
    if store.url.snapshot_id:
        raise UserError(f"PAPERKB_SNAPSHOT_STORE {settings.snapshot_store!r} names a snapshot: give s3://bucket/prefix")
    t0 = time.perf_counter()
    problems = snap.check(folder)
    if problems:
        raise UserError(f"snapshot {folder.name} cannot be uploaded: {problems[0]}")
    manifest_bytes = (folder / snap.MANIFEST).read_bytes()
    manifest = snap.read_manifest(folder)
    sid = str(manifest.get("snapshot_id") or folder.name)
    files: dict[str, str] = manifest["files"]
    before = store.request_count()
    by_op = dict(store.requests)

    prev_id, etag = store.current()
    by_sha = {sha: rel for rel, sha in sorted(files.items())}  # a content stored once, whatever its paths
    have = store.object_names()
    todo = [sha for sha in by_sha if sha not in have]
    sent_bytes = _upload(store, folder, by_sha, todo, on_upload)
    store.put_bytes(store.manifest_key(sid), manifest_bytes)
    now = store.object_names()
    lost = [sha for sha in by_sha if sha not in now]
    if lost:  # deleted by another publisher's garbage collection meanwhile
        log.info("store: %d object(s) of %s vanished during the upload: uploading them again", len(lost), sid)
        sent_bytes += _upload(store, folder, by_sha, lost, on_upload)
    store.swap_current(sid, etag, prev_id)
    summary: dict[str, Any] = {
        "store": store.url.root, "snapshot_id": sid, "previous": prev_id,
        "objects_uploaded": len(todo) + len(lost), "bytes_uploaded": sent_bytes,
        "objects_skipped": len(by_sha) - len(todo), "objects": len(by_sha),
        "bytes_total": sum((manifest.get("sizes") or {}).values()),
        "requests": store.request_count() - before,
        "requests_by_operation": {op: n - by_op.get(op, 0) for op, n in store.requests.items() if n > by_op.get(op, 0)}}
    if retain:
        from pipeline.store.retention import apply_store_retention

        summary["retention"] = apply_store_retention(store, settings.snapshot_keep, settings.snapshot_min_age_h,
                                                     grace_s=settings.snapshot_store_lease_s)
    summary["requests_total"] = store.request_count() - before
    summary["seconds"] = round(time.perf_counter() - t0, 2)
    log.info("store: snapshot %s is CURRENT in %s: uploaded %d of %d objects (%.1f of %.1f MB) in %d requests, "
             "%.1fs", sid, store.url.root, summary["objects_uploaded"], len(by_sha), sent_bytes / 1e6,
             summary["bytes_total"] / 1e6, summary["requests"], summary["seconds"])
    return summary


def push_published(settings: Settings, folder: Path) -> dict[str, Any]:
    """:func:`push` after a local publish: a failure says that the snapshot is CURRENT here but not in the
    store, and how to retry (one line, exit code 2)."""
    try:
        return push(settings, folder)
    except UserError as exc:
        raise UserError(f"snapshot {folder.name} is published here but not in the store: {exc} "
                        f"(`paperkb snapshots push {folder.name}` retries)") from None


def _upload(store: S3Store, folder: Path, by_sha: dict[str, str], shas: list[str], on_upload: UploadHook | None) -> int:
    sent = 0
    for sha in shas:
        path = folder / by_sha[sha]
        size = path.stat().st_size
        store.upload(path, store.object_key(sha))
        sent += size
        if on_upload is not None:
            on_upload(store.object_key(sha), size)
    return sent
