"""Keeps the server on the CURRENT snapshot (or its pinned one) and switches without a restart.

Each request asks the holder for a searcher. The holder stats the ``CURRENT`` pointer (cheap) and,
when it names a new snapshot, opens that one and swaps it in under a lock. Requests already running
keep the searcher they were handed, which still reads its own (immutable) snapshot folder, so a
publish never fails a request in flight.

The snapshot being served is pinned (a lease under ``snapshots/.pins/``) so that retention never
deletes it; switching to a newer one unpins the old. If it is gone nonetheless (deleted by hand), a
pinned server answers 503 with one line (:class:`pipeline.errors.DamagedSnapshot`), and one that
follows ``CURRENT`` reopens whatever ``CURRENT`` names now.

A store URL instead of a snapshot id (``s3://bucket/prefix``, :mod:`pipeline.store`) follows the store's
``CURRENT``: asked at most every ``snapshot_store_poll_s`` seconds (one small GET), so servers on several
hosts switch within that time of a publish; the new snapshot is materialised into the local cache and
opened as above (pinned in the store while served). ``s3://bucket/prefix@<id>`` holds that one snapshot.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline import snapshots
from pipeline.errors import DamagedSnapshot, UserError
from pipeline.settings import Settings

log = logging.getLogger(__name__)
WHO = "paperkb serve"


@dataclass
class Opened:
    snapshot_id: str
    path: Path
    searcher: Any

    def gone(self) -> bool:
        return not (self.path / "manifest.json").is_file()


def gone_error(snapshot_id: str) -> DamagedSnapshot:
    return DamagedSnapshot(snapshot_id, ["it was deleted from disk while being served"],
                           hint="; restart `paperkb serve` with another --snapshot (see `paperkb snapshots list`)")


class SnapshotHolder:
    def __init__(self, settings: Settings, pinned: str | None = None, who: str = WHO):
        from pipeline.store.url import is_store_url, parse_store_url

        self.settings = settings
        self.store = parse_store_url(pinned) if pinned is not None and is_store_url(pinned) else None  # a store's CURRENT, or one id
        self.pinned = self.store.snapshot_id if self.store is not None else pinned
        self._polled: tuple[str, str] | None = None
        self._polled_at = 0.0
        self.who = who  # the reader's name in its pins, which retention's messages show
        self._lock = threading.Lock()
        self._current: Opened | None = None
        self._pointer_state: tuple | None = None

    def _pointer(self) -> Path:
        return self.settings.snapshots_dir / snapshots.CURRENT

    def _state(self) -> tuple | None:
        if self.store is not None:
            return self._poll()
        try:
            st = self._pointer().stat()
        except FileNotFoundError:
            return None
        return (st.st_mtime_ns, st.st_ino)

    def _poll(self) -> tuple[str, str] | None:
        """("store", the id the store's CURRENT names), asked again after ``snapshot_store_poll_s``. An
        unreachable store keeps the snapshot being served (a warning), unless there is none yet."""
        assert self.store is not None
        if self.pinned or (self._polled is not None
                           and time.monotonic() - self._polled_at < self.settings.snapshot_store_poll_s):
            return self._polled if not self.pinned else ("store", self.pinned)
        from pipeline.store.reader import current_id

        try:
            self._polled = ("store", current_id(self.store))
        except UserError as exc:
            if self._polled is None:
                raise
            log.warning("%s; still serving %s", exc, self._polled[1])
        self._polled_at = time.monotonic()
        return self._polled

    @property
    def served(self) -> Opened | None:
        """The snapshot last handed out (None before the first request)."""
        return self._current

    def get(self) -> Opened:
        """The searcher for the live snapshot, reopened when CURRENT has moved. DamagedSnapshot when a
        pinned snapshot's folder is gone (one stat per request)."""
        cur = self._current
        if cur is not None and (self.pinned or self._state() == self._pointer_state) and not cur.gone():
            return cur
        with self._lock:
            state = self._state()
            cur = self._current
            if cur is not None and (self.pinned or state == self._pointer_state) and not cur.gone():
                return cur
            if cur is not None and self.pinned:
                raise gone_error(cur.snapshot_id)
            from pipeline.query import Searcher, open_snapshot

            if self.store is not None:
                snapshot_id = self.pinned or (state or ("store", ""))[1]
                where = str(self.store.at(snapshot_id))
            else:
                snapshot_id = where = snapshots.resolve(self.settings.snapshots_dir, self.pinned).name
            if cur is None or cur.snapshot_id != snapshot_id or cur.gone():
                snap = open_snapshot(self.settings, where, who=self.who)
                self._current = Opened(snapshot_id, snap.path, Searcher(snap, self.settings).warm())
                log.info("serving snapshot %s", snapshot_id)
                if cur is not None:  # requests still on the old one finish; retention keeps it a while anyway
                    cur.searcher.snap.close()
            self._pointer_state = state
            assert self._current is not None  # set above when there was none
            return self._current

    def close(self) -> None:
        """Unpin the served snapshot (the app's shutdown)."""
        cur = self._current
        if cur is not None:
            cur.searcher.snap.close()
