"""The raw zone: every byte fetched from outside, stored byte-exact before anything parses it.

Layout::

    raw/<source>/<relpath>            the response body, exactly as received
    raw/_manifest/<source>.jsonl      one JSON line per write: url, params, status, fetched_at,
                                      sha256, bytes, path (relative to raw/), content_type

The body is written to a temporary file and renamed into place, then the manifest line is appended,
so a reader never sees a half-written body and every manifest line points at a complete file.
Parsing reads only from here, which is what makes ``--replay`` possible.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

MANIFEST_DIR = "_manifest"


@dataclass(frozen=True)
class RawEntry:
    source: str
    path: str  # relative to the raw root, e.g. "arxiv/oai/2024-01-01/page-00001.xml"
    url: str
    params: dict[str, Any] = field(default_factory=dict)
    status: int = 200
    fetched_at: str = ""
    sha256: str = ""
    bytes: int = 0
    content_type: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True)


class RawZone:
    def __init__(self, root: Path | str):
        self.root = Path(root)

    # -- writing ---------------------------------------------------------------------------------
    def write(
        self,
        source: str,
        relpath: str,
        body: bytes,
        *,
        url: str,
        params: dict[str, Any] | None = None,
        status: int = 200,
        content_type: str | None = None,
    ) -> RawEntry:
        """Store ``body`` byte-exact at ``raw/<source>/<relpath>`` and record it in the manifest."""
        if not isinstance(body, (bytes, bytearray)):
            raise TypeError("raw zone stores bytes only")
        rel = f"{source}/{relpath.lstrip('/')}"
        target = self.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        entry = RawEntry(
            source=source,
            path=rel,
            url=url,
            params=dict(params or {}),
            status=int(status),
            fetched_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            sha256=hashlib.sha256(body).hexdigest(),
            bytes=len(body),
            content_type=content_type,
        )
        self._append_manifest(source, entry)
        return entry

    def adopt(
        self,
        source: str,
        relpath: str,
        src: Path | str,
        *,
        url: str,
        params: dict[str, Any] | None = None,
        status: int = 200,
        content_type: str | None = None,
    ) -> RawEntry:
        """Move a finished download (a file on the same filesystem, e.g. a big dataset file streamed to
        disk) to ``raw/<source>/<relpath>`` and record it in the manifest, hashing it in chunks."""
        src = Path(src)
        digest, size = hashlib.sha256(), 0
        with open(src, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
                size += len(block)
            os.fsync(fh.fileno())
        rel = f"{source}/{relpath.lstrip('/')}"
        target = self.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(src, target)
        entry = RawEntry(source=source, path=rel, url=url, params=dict(params or {}), status=int(status),
                         fetched_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                         sha256=digest.hexdigest(), bytes=size, content_type=content_type)
        self._append_manifest(source, entry)
        return entry

    def _append_manifest(self, source: str, entry: RawEntry) -> None:
        mdir = self.root / MANIFEST_DIR
        mdir.mkdir(parents=True, exist_ok=True)
        line = (entry.to_json() + "\n").encode("utf-8")
        # O_APPEND makes each single write land whole at the end, also with parallel writers.
        fd = os.open(mdir / f"{source}.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    # -- reading ---------------------------------------------------------------------------------
    def manifest_path(self, source: str) -> Path:
        return self.root / MANIFEST_DIR / f"{source}.jsonl"

    def entries(self, source: str, prefix: str | None = None) -> Iterator[RawEntry]:
        """Manifest entries of a source in write order, the latest per path only."""
        mpath = self.manifest_path(source)
        if not mpath.exists():
            return iter(())
        latest: dict[str, RawEntry] = {}
        with open(mpath, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line:
                    continue
                try:
                    entry = RawEntry(**json.loads(line))
                except (json.JSONDecodeError, TypeError):
                    continue  # a torn last line after a crash: the body it names is rewritten on retry
                if prefix and not entry.path.startswith(f"{source}/{prefix}"):
                    continue
                latest.pop(entry.path, None)  # keep order of the latest write
                latest[entry.path] = entry
        return iter(list(latest.values()))

    def path(self, entry_or_rel: RawEntry | str) -> Path:
        rel = entry_or_rel.path if isinstance(entry_or_rel, RawEntry) else entry_or_rel
        return self.root / rel

    def read(self, entry_or_rel: RawEntry | str) -> bytes:
        return self.path(entry_or_rel).read_bytes()

    def has(self, source: str, relpath: str) -> bool:
        return (self.root / source / relpath.lstrip("/")).exists()

    def verify(self, entry: RawEntry) -> bool:
        """True when the stored body still has the sha256 recorded in the manifest."""
        p = self.path(entry)
        return p.exists() and hashlib.sha256(p.read_bytes()).hexdigest() == entry.sha256
