"""Pins in the store: a reader's lease on a snapshot, an object ``<prefix>/pins/<id>@<holder>.json``.

The store cannot tell whether a reader on another host still lives, so a lease carries ``expires_at`` and
its holder renews it (a thread rewrites it every third of ``snapshot_store_lease_s``) while it reads the
snapshot; :meth:`StorePin.release` deletes it, and so do garbage collection and the process's exit (a
command that never closes its snapshot leaves no lease behind). A lease whose ``expires_at`` has passed (its reader was killed,
or lost the network) frees its snapshot: retention deletes the lease and may delete the snapshot. The same
fields as a local lease (:mod:`pipeline.pins`)::

    {"snapshot_id": "...", "who": "paperkb serve", "host": "box1", "pid": 4242,
     "created_at": "...", "expires_at": "2026-11-26T08:15:00+00:00"}
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import uuid
import weakref
from datetime import datetime, timedelta, timezone

from pipeline.store.s3 import PINS, S3Store, StoreError

log = logging.getLogger(__name__)
SEP = "@"


def _expiry(lease_s: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=lease_s)).isoformat(timespec="seconds")


class StorePin:
    """A lease this process holds in the store, renewed until :meth:`release` (or garbage collection, or exit)."""

    def __init__(self, store: S3Store, snapshot_id: str, who: str, lease_s: float):
        host = socket.gethostname() or "localhost"
        self.store, self.snapshot_id, self.lease_s = store, snapshot_id, lease_s
        self.name = SEP.join((snapshot_id, host.replace(SEP, "_").replace("/", "_"), str(os.getpid()),
                              uuid.uuid4().hex[:8])) + ".json"
        self.key = store.pin_key(self.name)
        self.info = {"snapshot_id": snapshot_id, "who": who, "host": host, "pid": os.getpid(),
                     "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        stop = threading.Event()
        _write(store, self.key, self.info, lease_s)
        # neither the thread nor the finalizer refers to self: an unreferenced pin is collected, and released
        self._thread = threading.Thread(target=_renew, args=(store, self.key, self.info, lease_s, stop),
                                        name=f"store-pin-{snapshot_id}", daemon=True)
        self._thread.start()
        self._finalizer = weakref.finalize(self, _release, store, self.key, snapshot_id, stop, self._thread)

    @property
    def held(self) -> bool:
        return self._finalizer.alive

    def release(self) -> None:
        self._finalizer()


def _write(store: S3Store, key: str, info: dict, lease_s: float) -> None:
    store.put_bytes(key, json.dumps({**info, "expires_at": _expiry(lease_s)}).encode())


def _renew(store: S3Store, key: str, info: dict, lease_s: float, stop: threading.Event) -> None:
    while not stop.wait(max(lease_s / 3, 0.5)):
        try:
            _write(store, key, info, lease_s)
        except StoreError as exc:  # the next try may get through: the lease holds until it expires
            log.warning("could not renew the pin of %s in %s: %s", info["snapshot_id"], store.url.root, exc)


def _release(store: S3Store, key: str, snapshot_id: str, stop: threading.Event, renewing: threading.Thread) -> None:
    stop.set()
    if renewing is not threading.current_thread():
        renewing.join(timeout=10)  # a renewal under way would write the lease again after its deletion
    try:
        store.delete([key])
    except StoreError as exc:
        log.warning("could not remove the pin of %s from %s (it expires by itself): %s", snapshot_id,
                    store.url.root, exc)


def read_pins(store: S3Store, now: datetime | None = None) -> tuple[dict[str, list[str]], list[str]]:
    """({snapshot id: [who holds it]} of the live leases, [keys of expired leases])."""
    now = now or datetime.now(timezone.utc)
    live: dict[str, list[str]] = {}
    stale: list[str] = []
    for o in store.listing(PINS):
        if SEP not in o.key or o.key.startswith("."):
            continue
        sid = o.key.split(SEP, 1)[0]
        raw = store.get_bytes(store.pin_key(o.key))
        if raw is None:  # released meanwhile
            continue
        try:
            info = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            info = {}
        info = info if isinstance(info, dict) else {}
        exp = info.get("expires_at")
        try:
            t = datetime.fromisoformat(str(exp)) if exp else None
        except ValueError:
            t = None
        if t is not None:
            t = t if t.tzinfo else t.replace(tzinfo=timezone.utc)
            if t <= now:
                stale.append(store.pin_key(o.key))
                continue
        who = " ".join(str(x) for x in (info.get("who") or "a reader", f"pid {info['pid']}" if info.get("pid") else "",
                                        f"on host {info['host']}" if info.get("host") else "",
                                        f"until {exp}" if exp else "") if x)
        live.setdefault(sid, []).append(who)
    return live, stale
