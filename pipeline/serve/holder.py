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

A store's snapshot that cannot be opened (an object damaged or missing in the store, a manifest refused) does
not take the server down: it keeps serving the snapshot it served (a server that served none yet: the newest
one in its local cache), says why in :attr:`SnapshotHolder.problem` (``/api/health``), and tries that id
again only after a back-off (:data:`RETRY_S`, doubled on each failure up to :data:`MAX_RETRY_S`), not on
every request. A store that cannot be reached during a poll is reported the same way.
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
RETRY_S, MAX_RETRY_S = 60.0, 3600.0  # first and longest wait before a store's snapshot that failed to open is tried again


@dataclass
class Failed:
    """A store's snapshot that failed to open: why, and when to try it again."""

    why: str
    wait_s: float
    retry_at: float  # time.monotonic()


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
        self._failed: dict[str, Failed] = {}  # store snapshots that failed to open, by id
        self._poll_error: str | None = None  # why the last poll of the store's CURRENT failed

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
            self._poll_error = None
        except UserError as exc:
            self._poll_error = str(exc)
            if self._polled is None:
                raise
            log.warning("%s; still serving %s", exc, self._polled[1])
        self._polled_at = time.monotonic()
        return self._polled

    @property
    def problem(self) -> str | None:
        """One line when a store's snapshot is served in place of the one its CURRENT names (that one failed
        to open, or the store could not be asked), else None."""
        if self.store is None:
            return None
        cur = self._current
        serving = f"still serving {cur.snapshot_id}" if cur is not None else "nothing to serve"
        if self._poll_error is not None:
            return f"{self._poll_error}; {serving}"
        wanted = self.pinned or (self._polled or ("store", None))[1]
        failed = self._failed.get(wanted) if wanted else None
        if failed is None or (cur is not None and cur.snapshot_id == wanted):
            return None
        wait = max(0.0, failed.retry_at - time.monotonic())
        return f"{failed.why}; {serving} (tried again in {wait:.0f} s)"

    def failed(self, snapshot_id: str) -> str | None:
        """Why the store's snapshot ``snapshot_id`` failed to open here (the last try), else None."""
        f = self._failed.get(snapshot_id)
        return f.why if f is not None else None

    def _open_store(self, snapshot_id: str, cur: Opened | None) -> Opened | None:
        """The store's snapshot ``snapshot_id`` opened, or None when it fails (or failed less than its back-off
        ago) and ``cur`` can go on being served; a failure with nothing to serve raises, unless a snapshot of
        the local cache opens instead."""
        assert self.store is not None
        failed = self._failed.get(snapshot_id)
        if failed is not None and time.monotonic() < failed.retry_at:
            if cur is not None:
                return None
            fallback = self._open_cached(exclude=snapshot_id)
            if fallback is None:
                raise UserError(self.problem or failed.why)
            return fallback
        try:
            opened = self._open(snapshot_id)
        except UserError as exc:
            wait = min(MAX_RETRY_S, failed.wait_s * 2) if failed is not None else max(RETRY_S, self.settings.snapshot_store_poll_s)
            self._failed[snapshot_id] = Failed(str(exc), wait, time.monotonic() + wait)
            log.warning("%s; %s (tried again in %.0f s)", exc,
                        f"still serving {cur.snapshot_id}" if cur is not None else "nothing served yet", wait)
            if cur is not None:
                return None
            fallback = self._open_cached(exclude=snapshot_id)
            if fallback is None:
                raise
            return fallback
        self._failed.pop(snapshot_id, None)
        return opened

    def _open_cached(self, exclude: str) -> Opened | None:
        """The newest snapshot of the store already in the local cache that opens (a restarted server goes on
        with what it served), or None; never ``exclude`` nor an id in its back-off."""
        if self.pinned:
            return None
        from pipeline.store.materialise import cached_ids

        assert self.store is not None
        for sid in cached_ids(self.settings.snapshot_cache, self.store):
            if sid == exclude or (sid in self._failed and time.monotonic() < self._failed[sid].retry_at):
                continue
            try:
                opened = self._open(sid)
            except UserError as exc:
                log.warning("the cached snapshot %s cannot be served either: %s", sid, exc)
                continue
            log.warning("serving %s from the local cache meanwhile", sid)
            return opened
        return None

    def _open(self, snapshot_id: str) -> Opened:
        """``snapshot_id`` (a store's, or a local one) opened, pinned and warm."""
        from pipeline.query import Searcher, open_snapshot

        where = str(self.store.at(snapshot_id)) if self.store is not None else snapshot_id
        snap = open_snapshot(self.settings, where, who=self.who)
        try:
            return Opened(snapshot_id, snap.path, Searcher(snap, self.settings).warm())
        except BaseException:
            snap.close()
            raise

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
            if self.store is not None:
                snapshot_id = self.pinned or (state or ("store", ""))[1]
            else:
                snapshot_id = snapshots.resolve(self.settings.snapshots_dir, self.pinned).name
            if cur is None or cur.snapshot_id != snapshot_id or cur.gone():
                live = cur if cur is not None and not cur.gone() else None
                opened = self._open_store(snapshot_id, live) if self.store is not None else self._open(snapshot_id)
                if opened is None:  # the store's snapshot failed: the one served goes on, CURRENT is asked again later
                    assert live is not None  # (with nothing served, _open_store raised)
                    return live
                self._current = opened
                log.info("serving snapshot %s", opened.snapshot_id)
                if cur is not None:  # requests still on the old one finish; retention keeps it a while anyway
                    cur.searcher.snap.close()
                if opened.snapshot_id != snapshot_id:  # a cached one in place of CURRENT's: CURRENT's is retried
                    return opened
            self._pointer_state = state
            assert self._current is not None  # set above when there was none
            return self._current

    def close(self) -> None:
        """Unpin the served snapshot (the app's shutdown)."""
        cur = self._current
        if cur is not None:
            cur.searcher.snap.close()
