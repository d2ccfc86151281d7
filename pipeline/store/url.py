"""``s3://bucket/prefix[@snapshot-id]``: the store a snapshot lives in, and which snapshot (stdlib only)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.errors import UserError

SCHEME = "s3://"
# S3's rules for bucket names (3-63 lowercase letters, digits, dots, hyphens), loosened for dots only
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")


def is_snapshot_id(value: object) -> bool:
    """Whether ``value`` can name a snapshot in a store URL, a store key and a cache folder."""
    return isinstance(value, str) and len(value) <= 200 and _ID.fullmatch(value) is not None


def is_store_url(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower().startswith(SCHEME)


@dataclass(frozen=True)
class StoreURL:
    bucket: str
    prefix: str  # without leading or trailing slash; may be empty
    snapshot_id: str | None = None  # None: follow CURRENT

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    @property
    def root(self) -> str:
        """``s3://bucket/prefix`` (no snapshot id)."""
        return f"{SCHEME}{self.bucket}/{self.prefix}".rstrip("/")

    def at(self, snapshot_id: str | None) -> StoreURL:
        return StoreURL(self.bucket, self.prefix, snapshot_id)

    def __str__(self) -> str:
        return self.root + (f"@{self.snapshot_id}" if self.snapshot_id else "")


def parse_store_url(value: str, *, what: str = "snapshot store") -> StoreURL:
    """``s3://bucket/prefix`` or ``s3://bucket/prefix@id`` -> StoreURL; UserError (one line) otherwise."""
    text = value.strip()
    if not is_store_url(text):
        raise UserError(f"{what} {value!r} is not an s3://bucket/prefix URL")
    rest = text[len(SCHEME):]
    sid: str | None = None
    if "@" in rest:
        rest, sid = rest.rsplit("@", 1)
        if not is_snapshot_id(sid):
            raise UserError(f"{what} {value[:200]!r}: {sid[:80]!r} after '@' is not a snapshot id")
    bucket, _, prefix = rest.partition("/")
    if not _BUCKET.fullmatch(bucket) or ".." in bucket:
        raise UserError(f"{what} {value!r}: {bucket!r} is not an S3 bucket name (3-63 lowercase letters, digits, "
                        "dots and hyphens)")
    prefix = prefix.strip("/")
    if any(p in ("", ".", "..") for p in prefix.split("/")) and prefix:
        raise UserError(f"{what} {value!r}: the prefix has an empty, '.' or '..' part")
    return StoreURL(bucket, prefix, sid)
