"""Retention in the store: keep the newest ``keep`` snapshots, CURRENT, any younger than ``min_age_h`` and any
a live lease pins (:mod:`pipeline.store.leases`); delete the other manifests, then the objects no kept
manifest lists (garbage collection after the manifests, so a kept snapshot never misses an object), and
abort the multipart uploads under the prefix that began more than ``grace_s`` ago (the parts a publisher
killed during a large upload left: they are stored, and billed, until aborted).

A reader that pinned a snapshot between the look at the pins and the deletion of its manifest gets the
manifest back (the pins are read again after the deletion). Objects younger than ``grace_s`` are never
collected: a publisher running meanwhile may have uploaded them for a manifest it has not written yet.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

from pipeline.store.leases import read_pins
from pipeline.store.s3 import DIGEST, OBJECTS, S3Store, StoreError

log = logging.getLogger(__name__)


def apply_store_retention(store: S3Store, keep: int, min_age_h: float = 0.0, *, grace_s: float = 0.0,
                          now: datetime | None = None) -> dict[str, Any]:
    """Returns {removed: [ids], kept_pinned: {id: who}, objects_deleted, bytes_deleted, pins_expired,
    uploads_aborted}."""
    now = now or datetime.now(timezone.utc)
    manifests = {sid: m for sid in store.snapshot_ids() if (m := store.manifest(sid)) is not None}
    order = sorted(manifests, key=lambda s: (str(manifests[s].get("created_at") or ""), s))
    cur, _ = store.current()
    live, stale = read_pins(store, now)
    candidates = [s for s in order[:-keep] if s != cur and _old_enough(manifests[s], now, min_age_h)] \
        if len(order) > keep else []
    kept = {s: "pinned by " + "; ".join(live[s][:3]) for s in candidates if s in live}
    doomed = [s for s in candidates if s not in live]
    store.delete([store.manifest_key(s) for s in doomed])
    if doomed:
        again, _ = read_pins(store, now)  # a reader that pinned one between the look and the deletion
        for s in [s for s in doomed if s in again]:
            store.put_bytes(store.manifest_key(s), json.dumps(manifests[s], indent=1).encode())
            kept[s] = "pinned by " + "; ".join(again[s][:3])
            doomed.remove(s)
    for s, why in kept.items():
        log.info("store retention: kept %s: %s", s, why)
    referenced = {sha for s, m in manifests.items() if s not in doomed for sha in (m.get("files") or {}).values()}
    garbage = [o for o in store.listing(OBJECTS) if DIGEST.fullmatch(o.key) and o.key not in referenced
               and (now - o.modified).total_seconds() >= grace_s]  # (what is not named by a sha256 is not ours)
    store.delete([store.object_key(o.key) for o in garbage] + stale)
    freed = sum(o.size for o in garbage)
    out = {"removed": doomed, "kept_pinned": kept, "objects_deleted": len(garbage), "bytes_deleted": freed,
           "pins_expired": len(stale), "uploads_aborted": _abort_stale_uploads(store, now, grace_s)}
    if doomed or garbage:
        log.info("store retention: removed %d snapshot(s) and %d unreferenced object(s) (%.1f MB) from %s",
                 len(doomed), len(garbage), freed / 1e6, store.url.root)
    return out


def _abort_stale_uploads(store: S3Store, now: datetime, grace_s: float) -> int:
    """Abort the multipart uploads under the prefix older than ``grace_s`` (younger ones may be a running
    publisher's); how many. A store that refuses (no s3:ListBucketMultipartUploads or s3:AbortMultipartUpload
    permission) is a warning: a bucket lifecycle rule can do it instead."""
    aborted = 0
    try:
        for key, upload_id, began in list(store.multipart_uploads()):
            if (now - began).total_seconds() >= grace_s:
                store.abort_upload(key, upload_id)
                aborted += 1
                log.info("store retention: aborted the multipart upload of %s begun %s (a killed publisher's)",
                         key, began.isoformat(timespec="seconds"))
    except StoreError as exc:
        log.warning("store retention: %s; incomplete multipart uploads are left (a bucket lifecycle rule with "
                    "AbortIncompleteMultipartUpload removes them)", exc)
    return aborted


def _old_enough(manifest: dict, now: datetime, min_age_h: float) -> bool:
    if min_age_h <= 0:
        return True
    try:
        created = datetime.fromisoformat(str(manifest.get("created_at") or ""))
    except ValueError:
        return False
    if created.tzinfo is None:
        created = created.replace(tzinfo=timezone.utc)
    return (now - created).total_seconds() >= min_age_h * 3600
