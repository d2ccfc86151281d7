"""The one place that talks to the object store (boto3): keys of the layout in :mod:`pipeline.store`, the
conditional write of CURRENT, leases, and every S3 error turned into one line (:class:`StoreError`).

Credentials, region and endpoint are boto3's own settings (``AWS_ACCESS_KEY_ID``, ``AWS_PROFILE``,
``AWS_REGION``, ``AWS_ENDPOINT_URL`` for a MinIO, Ceph or moto server...). Every HTTP request is counted
(``requests``) so a publish can say what it cost.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterator

from pipeline.errors import UserError
from pipeline.store.url import StoreURL, parse_store_url

log = logging.getLogger(__name__)

CURRENT = "CURRENT"
OBJECTS = "objects"
SNAPSHOTS = "snapshots"
PINS = "pins"
MANIFEST = "manifest.json"
DIGEST = re.compile(r"[0-9a-f]{64}")  # an object's name: its sha256, 64 lowercase hex characters
MAX_CURRENT_BYTES = 4096  # CURRENT is an id and a comment line: anything longer is not one
QUOTED_CHARS = 80  # an error line quotes at most this much of what the store holds
DOWNLOAD_WORKERS = 8  # objects downloaded side by side by a reader
TRANSFER_THREADS = 4  # ranged GETs side by side for one object past boto3's multipart threshold (8 MiB)


def quoted(value: object, limit: int = QUOTED_CHARS) -> str:
    """``repr(value)`` of at most ``limit`` characters of it: what an error line may quote of the store's content."""
    text = value if isinstance(value, str) else str(value)
    return repr(text[:limit]) + (f"... ({len(text):,} characters)" if len(text) > limit else "")


class StoreError(UserError):
    """The store could not be read or written (unreachable, no such bucket, refused): one line, exit 2."""


class CurrentMoved(StoreError):
    """Another publisher moved CURRENT between this publish's read of it and its conditional write."""


@dataclass
class Listed:
    key: str
    size: int
    modified: datetime


class S3Store:
    """One store (``s3://bucket/prefix``): its client and the layout's keys."""

    def __init__(self, url: StoreURL | str, *, client: Any = None):
        self.url = parse_store_url(url) if isinstance(url, str) else url
        self.requests: Counter[str] = Counter()  # HTTP requests sent, by operation (retries included)
        self._client = client

    # ---- client ---------------------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                import boto3
                from botocore.config import Config
            except ImportError:
                raise StoreError("snapshots on object storage need boto3: pip install 'paperkb[s3]'") from None
            # few, quick retries: an unreachable endpoint is one line after seconds, not minutes
            # one connection per thread that may download at once (DOWNLOAD_WORKERS objects, TRANSFER_THREADS
            # ranges each) and one for the lease's renewal: urllib3 would otherwise discard the spare ones,
            # a "Connection pool is full" warning each
            cfg = Config(connect_timeout=float(os.environ.get("PAPERKB_STORE_CONNECT_TIMEOUT_S", "5")),
                         read_timeout=60, retries={"max_attempts": 3, "mode": "standard"},
                         max_pool_connections=DOWNLOAD_WORKERS * TRANSFER_THREADS + 2,
                         request_checksum_calculation="when_required", response_checksum_validation="when_required")
            with self.errors("connect to"):
                self._client = boto3.session.Session().client("s3", config=cfg)
            self._client.meta.events.register("before-send.s3.*", self._count)
        return self._client

    def _count(self, request: Any = None, **kwargs: Any) -> None:
        name = kwargs.get("event_name", "before-send.s3.?").rsplit(".", 1)[-1]
        self.requests[name] += 1

    @contextmanager
    def errors(self, doing: str, key: str | None = None) -> Iterator[None]:
        """Turn boto3's errors into one line naming the store (StoreError, exit code 2)."""
        from botocore import exceptions as bx

        where = f"s3://{self.url.bucket}/{key}" if key else self.url.root
        try:
            yield
        except bx.ClientError as exc:
            err = exc.response.get("Error", {})
            code, msg = str(err.get("Code", "?"))[:QUOTED_CHARS], str(err.get("Message") or "")[:200]
            if code in ("NoSuchBucket",):
                raise StoreError(f"snapshot store {self.url.root}: no bucket {self.url.bucket!r}") from None
            if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "403"):
                raise StoreError(f"snapshot store {self.url.root}: access denied ({code}) when trying to {doing} "
                                 f"{where}: check the AWS credentials") from None
            raise StoreError(f"snapshot store {self.url.root}: cannot {doing} {where}: {code} {msg}".rstrip()) from None
        except (bx.EndpointConnectionError, bx.ConnectTimeoutError, bx.ReadTimeoutError) as exc:
            endpoint = os.environ.get("AWS_ENDPOINT_URL") or "AWS S3"
            raise StoreError(f"snapshot store {self.url.root}: cannot reach {endpoint} "
                             f"({type(exc).__name__}): check AWS_ENDPOINT_URL and the network") from None
        except bx.NoCredentialsError:
            raise StoreError(f"snapshot store {self.url.root}: no AWS credentials (set AWS_ACCESS_KEY_ID and "
                             "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE)") from None
        except (bx.NoRegionError, bx.ParamValidationError, bx.InvalidEndpointConfigurationError, ValueError) as exc:
            raise StoreError(f"snapshot store {self.url.root}: {str(exc).splitlines()[0]}") from None
        except bx.BotoCoreError as exc:
            raise StoreError(f"snapshot store {self.url.root}: cannot {doing} {where}: "
                             f"{str(exc).splitlines()[0]}") from None

    # ---- keys -----------------------------------------------------------------------------------------
    def object_key(self, sha256: str) -> str:
        if not DIGEST.fullmatch(sha256):  # (manifests are checked first: this guards the key from any other caller)
            raise StoreError(f"snapshot store {self.url.root}: {quoted(sha256)} is not a sha256 (64 lowercase hex "
                             "characters)")
        return self.url.key(OBJECTS, sha256)

    def manifest_key(self, snapshot_id: str) -> str:
        return self.url.key(SNAPSHOTS, snapshot_id, MANIFEST)

    def pin_key(self, name: str) -> str:
        return self.url.key(PINS, name)

    # ---- reading --------------------------------------------------------------------------------------
    def listing(self, under: str) -> Iterator[Listed]:
        """Every object under ``<prefix>/<under>/`` (one request per 1000)."""
        base = self.url.key(under) + "/"
        with self.errors("list", base):
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.url.bucket, Prefix=base)
            for page in pages:
                for o in page.get("Contents", []):
                    yield Listed(o["Key"][len(base):], int(o["Size"]), o["LastModified"])

    def object_names(self) -> set[str]:
        """The sha256 of every object the store holds."""
        return {o.key for o in self.listing(OBJECTS) if DIGEST.fullmatch(o.key)}

    def get_bytes(self, key: str) -> bytes | None:
        """The object's bytes, None when there is none."""
        from botocore.exceptions import ClientError

        with self.errors("read", key):
            try:
                return self.client.get_object(Bucket=self.url.bucket, Key=key)["Body"].read()
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                    return None
                raise

    def current(self) -> tuple[str | None, str | None]:
        """(the first line of CURRENT, its ETag); (None, None) when the store has no CURRENT yet. A CURRENT
        past MAX_CURRENT_BYTES is refused unread (StoreError)."""
        from botocore.exceptions import ClientError

        key = self.url.key(CURRENT)
        with self.errors("read", key):
            try:
                r = self.client.get_object(Bucket=self.url.bucket, Key=key)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                    return None, None
                raise
            size = int(r.get("ContentLength") or 0)
            if size > MAX_CURRENT_BYTES:
                r["Body"].close()
                raise StoreError(f"snapshot store {self.url.root}: CURRENT holds {size:,} bytes, not a snapshot id "
                                 f"(an id on its first line, {MAX_CURRENT_BYTES:,} bytes at most)")
            lines = r["Body"].read(MAX_CURRENT_BYTES + 1)[:MAX_CURRENT_BYTES].decode("utf-8", "replace").strip().splitlines()
            return (lines[0].strip() if lines else None) or None, r.get("ETag")

    def manifest(self, snapshot_id: str) -> dict | None:
        raw = self.get_bytes(self.manifest_key(snapshot_id))
        if raw is None:
            return None
        try:
            m = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise StoreError(f"snapshot store {self.url.root}: the manifest of {snapshot_id} is not JSON") from None
        if not isinstance(m, dict):
            raise StoreError(f"snapshot store {self.url.root}: the manifest of {snapshot_id} is not a JSON object")
        return m

    def snapshot_ids(self) -> list[str]:
        """Ids of the snapshots whose manifest is in the store."""
        return sorted(o.key[: -len(MANIFEST) - 1] for o in self.listing(SNAPSHOTS) if o.key.endswith("/" + MANIFEST)
                      and o.key.count("/") == 1)

    def multipart_uploads(self) -> Iterator[tuple[str, str, datetime]]:
        """(key, upload id, when it began) of each multipart upload under the prefix neither completed nor aborted:
        a publisher killed during an upload leaves its parts stored (and billed) until the upload is aborted."""
        base = self.url.key() + "/" if self.url.prefix else ""
        with self.errors("list the multipart uploads under", base or None):
            for page in self.client.get_paginator("list_multipart_uploads").paginate(Bucket=self.url.bucket, Prefix=base):
                for u in page.get("Uploads", []):
                    yield u["Key"], u["UploadId"], u["Initiated"]

    def abort_upload(self, key: str, upload_id: str) -> None:
        """Abort a multipart upload: its parts are deleted (gone already: nothing to do)."""
        from botocore.exceptions import ClientError

        with self.errors("abort the multipart upload of", key):
            try:
                self.client.abort_multipart_upload(Bucket=self.url.bucket, Key=key, UploadId=upload_id)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") != "NoSuchUpload":
                    raise

    def download(self, key: str, dest: Path) -> int:
        """Write the object ``key`` to ``dest``; returns its size."""
        from boto3.s3.transfer import TransferConfig

        with self.errors("download", key):
            self.client.download_file(self.url.bucket, key, str(dest), Config=TransferConfig(max_concurrency=TRANSFER_THREADS))
        return dest.stat().st_size

    # ---- writing --------------------------------------------------------------------------------------
    def upload(self, path: Path, key: str) -> None:
        """Upload a file (multipart past 64 MiB)."""
        from boto3.s3.transfer import TransferConfig

        cfg = TransferConfig(multipart_threshold=64 << 20, multipart_chunksize=64 << 20)
        with self.errors("upload", key):
            self.client.upload_file(str(path), self.url.bucket, key, Config=cfg)

    def put_bytes(self, key: str, data: bytes, content_type: str = "application/json") -> None:
        with self.errors("write", key):
            self.client.put_object(Bucket=self.url.bucket, Key=key, Body=data, ContentType=content_type)

    def swap_current(self, snapshot_id: str, expected_etag: str | None, expected_id: str | None) -> None:
        """CURRENT := ``snapshot_id``, only if CURRENT is still what this publisher read (its ETag; absent:
        ``If-None-Match: *``). CurrentMoved (one line) when another publisher moved it meanwhile."""
        from botocore.exceptions import ClientError

        key = self.url.key(CURRENT)
        cond = {"IfMatch": expected_etag} if expected_etag else {"IfNoneMatch": "*"}
        with self.errors("write", key):
            try:
                self.client.put_object(Bucket=self.url.bucket, Key=key, Body=_current_body(snapshot_id),
                                       ContentType="text/plain", **cond)
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code")
                status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
                if code in ("PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey") or status in (409, 412):
                    now, _ = self.current()
                    raise CurrentMoved(
                        f"snapshot store {self.url.root}: another publisher moved CURRENT to {now or 'nothing'} "
                        f"(it was {expected_id or 'unset'}) while this one uploaded {snapshot_id}; CURRENT stays "
                        f"{now or 'unset'}") from None
                raise

    def delete(self, keys: list[str]) -> int:
        """Delete ``keys`` (1000 per request); returns how many."""
        done = 0
        for i in range(0, len(keys), 1000):
            batch = keys[i:i + 1000]
            with self.errors("delete from", self.url.key()):
                r = self.client.delete_objects(Bucket=self.url.bucket,
                                               Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True})
            errors = r.get("Errors") or []
            if errors:
                e = errors[0]
                raise StoreError(f"snapshot store {self.url.root}: cannot delete {e.get('Key')}: {e.get('Code')} "
                                 f"{e.get('Message', '')}".rstrip())
            done += len(batch)
        return done

    def request_count(self) -> int:
        return sum(self.requests.values())


def _current_body(snapshot_id: str) -> bytes:
    """CURRENT's content: the id on the first line, then when and where it was written. The second line makes
    every write's ETag new, so a publisher whose read of CURRENT is stale loses even when CURRENT went from
    its id to another and back (the ABA case of a conditional write on an ETag)."""
    import socket
    from datetime import timezone

    now = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    return f"{snapshot_id}\n# {now} {socket.gethostname()} pid {os.getpid()}\n".encode()
