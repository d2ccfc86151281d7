"""Open a snapshot of the store (``s3://bucket/prefix`` = its CURRENT, ``s3://bucket/prefix@<id>`` = one id):
pinned in the store (a renewed lease), materialised into the local cache, opened with the local code."""

from __future__ import annotations

from typing import Any

from pipeline.store.url import StoreURL, parse_store_url


class _Pins:
    """The store's lease and the local cache's, released together (``Snapshot.pin``)."""

    def __init__(self, *held: Any):
        self.held_pins = [p for p in held if p is not None]

    @property
    def held(self) -> bool:
        return any(getattr(p, "held", False) for p in self.held_pins)

    def release(self) -> None:
        for p in self.held_pins:
            p.release()


def store_settings(settings_or_root: Any):
    """The Settings to read the store's options from (a folder given instead: the environment's)."""
    if hasattr(settings_or_root, "snapshot_store_lease_s"):
        return settings_or_root
    from pipeline.settings import Settings

    return Settings.load()


def current_id(url: StoreURL | str) -> str:
    """The id ``url`` names (its ``@id``, else the store's CURRENT)."""
    from pipeline.store.materialise import resolve_id
    from pipeline.store.s3 import S3Store

    return resolve_id(S3Store(parse_store_url(url) if isinstance(url, str) else url))


def open_store_snapshot(settings_or_root: Any, url: str, *, pin: bool = True, who: str | None = None,
                        need_fts: bool = True):
    """A :class:`pipeline.query.Snapshot` of the store's snapshot ``url``, read from the local cache."""
    from pipeline import pins as local_pins
    from pipeline.query.snapshot import open_snapshot
    from pipeline.store.leases import StorePin
    from pipeline.store.materialise import materialise, resolve_id
    from pipeline.store.s3 import S3Store

    settings = store_settings(settings_or_root)
    store = S3Store(parse_store_url(url))
    sid = resolve_id(store)
    # pinned in the store before its manifest is read: retention cannot delete it while it downloads
    remote = StorePin(store, sid, who or local_pins._default_who(), settings.snapshot_store_lease_s) if pin else None
    try:
        folder, _cost = materialise(store, sid, settings.snapshot_cache)
        opened = open_snapshot(folder, None, pin=pin, who=who, need_fts=need_fts)
    except BaseException:
        if remote is not None:
            remote.release()
        raise
    opened.pin = _Pins(remote, opened.pin) if pin else None
    return opened
