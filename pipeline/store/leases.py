"""Pins in the store: a reader's lease on a snapshot, an object ``<prefix>/pins/<id>@<holder>.json``.

The store cannot tell whether a reader on another host still lives, so a lease carries ``expires_at`` and
its holder renews it (a thread rewrites it every third of ``snapshot_store_lease_s``) while it reads the
snapshot; :meth:`StorePin.release` deletes it. A lease whose ``expires_at`` has passed (its reader was killed,
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
from datetime import datetime, timedelta, timezone

from pipeline.store.s3 import PINS, S3Store, StoreError

log = logging.getLogger(__name__)
SEP = "@"


def _expiry(lease_s: float) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=lease_s)).isoformat(timespec="seconds")


class StorePin:
    """A lease this process holds in the store, renewed until :meth:`release`."""

    def __init__(self, store: S3Store, snapshot_id: str, who: str, lease_s: float):
        host = socket.gethostname() or "localhost"
        self.store, self.snapshot_id, self.lease_s = store, snapshot_id, lease_s
        self.name = SEP.join((snapshot_id, host.replace(SEP, "_").replace("/", "_"), str(os.getpid()),
                              uuid.uuid4().hex[:8])) + ".json"
        self.key = store.pin_key(self.name)
        self.info = {"snapshot_id": snapshot_id, "who": who, "host": host, "pid": os.getpid(),
                     "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        self._stop = threading.Event()
        self._write()
        self._thread = threading.Thread(target=self._renew, name=f"store-pin-{snapshot_id}", daemon=True)
        self._thread.start()

    def _write(self) -> None:
        self.store.put_bytes(self.key, json.dumps({**self.info, "expires_at": _expiry(self.lease_s)}).encode())

    def _renew(self) -> None:
        while not self._stop.wait(max(self.lease_s / 3, 0.5)):
            try:
                self._write()
            except StoreError as exc:  # the next try may get through: the lease holds until it expires
                log.warning("could not renew the pin of %s in %s: %s", self.snapshot_id, self.store.url.root, exc)

    @property
    def held(self) -> bool:
        return not self._stop.is_set()

    def release(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        try:
            self.store.delete([self.key])
        except StoreError as exc:
            log.warning("could not remove the pin of %s from %s (it expires by itself): %s",
                        self.snapshot_id, self.store.url.root, exc)


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
