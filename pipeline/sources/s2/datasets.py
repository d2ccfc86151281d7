"""Semantic Scholar Datasets API: releases, download links, diffs, and the dataset files (issue 14).

The four metadata calls go through the ``semanticscholar`` package (``SemanticScholar(api_url=...)``
appends ``/datasets/v1``; its ``api_url`` is ``s2_api_url`` without ``/graph/v1``, so one setting
points both APIs at a mirror or the replay server). The package hands back parsed objects, so the raw
zone keeps their JSON as the package parsed it (``raw_data``), re-serialized, under
``raw/s2/datasets/meta/``. The dataset files (gzipped JSON lines on S3, behind the links the API
gives) are streamed to disk byte-exact through the shared :class:`~pipeline.sources.http.PoliteClient`
(retries on 429/5xx/timeouts), without the API key (the links are pre-signed; the key is not sent to
another host)::

    raw/s2/datasets/meta/<YYYY-MM-DD>/<call>-<args>.json                    an API answer
    raw/s2/datasets/release/<release>/<dataset>/<file>                      a file of a full release
    raw/s2/datasets/diff/<from>_to_<to>/<dataset>/<update|delete>/<file>    a file of one diff

A file already in the raw zone is not downloaded again (a failed load resumes from the raw zone).
At most one request per ``s2_delay_s`` seconds to each host, like the Graph API client.
"""

from __future__ import annotations

import json
import logging
import os
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

import httpx

from pipeline.errors import StepFailed, UserError
from pipeline.raw import RawEntry, RawZone
from pipeline.settings import Settings
from pipeline.sources.http import TRANSIENT_ERRORS, Endpoint, PoliteClient, RateLimiter, RetryableHTTP
from pipeline.sources.net import raise_if_unreachable
from pipeline.sources.s2.client import SOURCE, _safe

log = logging.getLogger(__name__)

GRAPH_SUFFIX = "/graph/v1"
CHUNK = 1 << 20


def datasets_root(s2_api_url: str) -> str:
    """The ``api_url`` the ``semanticscholar`` client wants: the host part of ``s2_api_url``."""
    url = s2_api_url.rstrip("/")
    return url[: -len(GRAPH_SUFFIX)] if url.endswith(GRAPH_SUFFIX) else url


def file_name(url: str) -> str:
    """The file name of a download link (the last path segment, without the pre-signed query)."""
    return _safe(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1])


class S2DatasetsClient:
    """The Datasets API calls and the file downloads, counted (``calls``) and stored in the raw zone."""

    def __init__(self, settings: Settings, raw: RawZone, *, sleep: Callable[[float], None] = time.sleep):
        if not settings.s2_api_key:
            raise UserError("the Semantic Scholar Datasets API needs an API key: set S2_API_KEY "
                            "(https://www.semanticscholar.org/product/api#api-key), or use PAPERKB_S2_MODE=batch")
        from semanticscholar import SemanticScholar

        self.settings = settings
        self.raw = raw
        self.root = datasets_root(settings.s2_api_url)
        self.api = SemanticScholar(timeout=int(settings.http_timeout_s), api_key=settings.s2_api_key, api_url=self.root)
        # no x-api-key: the links point at another host
        self.files = PoliteClient(settings, Endpoint("Semantic Scholar dataset files", self.root, "PAPERKB_S2_API_URL"),
                                  delay_s=settings.s2_delay_s, sleep=sleep)
        self.limiter = RateLimiter(settings.s2_delay_s, sleep)  # the API calls, made by the semanticscholar package
        self.calls: dict[str, int] = {}
        self.from_raw = 0
        self.bytes = 0

    @property
    def rate_wait_s(self) -> float:
        """Sleeping imposed by ``s2_delay_s``, API calls and file downloads together."""
        return self.limiter.waited_s + self.files.stats.rate_wait_s

    # -- the API ---------------------------------------------------------------------------------
    def _call(self, kind: str, relname: str, fn: Callable[[], Any], what: str) -> Any:
        from semanticscholar.SemanticScholarException import BadQueryParametersException, ObjectNotFoundException

        self.limiter.wait()
        self.calls[kind] = self.calls.get(kind, 0) + 1
        try:
            answer = fn()
        except ObjectNotFoundException as exc:
            raise UserError(f"Semantic Scholar Datasets API has no {what} ({exc}); check PAPERKB_S2_DATASETS_RELEASE") from exc
        except BadQueryParametersException as exc:
            raise UserError(f"Semantic Scholar Datasets API rejected the request for {what}: {exc}") from exc
        except PermissionError as exc:
            raise UserError(f"Semantic Scholar refused access (HTTP 403) to {what}: the S2_API_KEY in the environment "
                            "was refused; check it is valid and has Datasets API access") from exc
        except (httpx.TransportError, OSError) as exc:  # the client speaks httpx
            raise_if_unreachable(exc, service="Semantic Scholar Datasets API", url=self.root, setting="PAPERKB_S2_API_URL")
            raise
        data = answer.raw_data if hasattr(answer, "raw_data") else answer
        day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
        self.raw.write(SOURCE, f"datasets/meta/{day}/{_safe(relname)}.json",
                       json.dumps(data, ensure_ascii=False).encode("utf-8"),
                       url=f"{self.root}/datasets/v1/{relname}", params={"kind": f"datasets_{kind}"},
                       content_type="application/json")
        return data

    def releases(self) -> list[str]:
        data = self._call("releases", "release", self.api.get_available_releases, "release list")
        return [str(r) for r in data] if isinstance(data, list) else []

    def release(self, release_id: str) -> dict[str, Any]:
        return self._call("release", f"release-{release_id}", lambda: self.api.get_release(release_id),
                          f"release {release_id!r}") or {}

    def download_links(self, release_id: str, dataset: str) -> list[str]:
        data = self._call("links", f"release-{release_id}-{dataset}",
                          lambda: self.api.get_dataset_download_links(release_id, dataset),
                          f"dataset {dataset!r} in release {release_id!r}") or {}
        return list(data.get("files") or [])

    def diffs(self, start: str, end: str, dataset: str) -> list[dict[str, Any]]:
        data = self._call("diffs", f"diffs-{start}-to-{end}-{dataset}",
                          lambda: self.api.get_dataset_diffs(dataset, start, end),
                          f"diffs of {dataset!r} from release {start!r} to {end!r}") or {}
        return list(data.get("diffs") or [])

    # -- the files -------------------------------------------------------------------------------
    def download(self, url: str, relpath: str, params: dict[str, Any]) -> Path:
        """One dataset file into ``raw/s2/<relpath>`` (streamed), unless the raw zone has it already."""
        if self.raw.has(SOURCE, relpath):
            self.from_raw += 1
            return self.raw.path(f"{SOURCE}/{relpath}")
        self.calls["file"] = self.calls.get("file", 0) + 1
        target = self.raw.path(f"{SOURCE}/{relpath}")
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.part")
        parts = urlsplit(url)
        where = Endpoint(self.files.service, f"{parts.scheme}://{parts.netloc}", "PAPERKB_S2_API_URL")

        def attempt() -> str | None:
            with self.files.send("GET", url, endpoint=where, stream=True) as resp:
                if resp.status_code != 200:
                    raise UserError(f"Semantic Scholar dataset file {parts.path} answered HTTP {resp.status_code}: "
                                    "the download links expire; run enrich again to get fresh ones")
                try:
                    with open(tmp, "wb") as fh:
                        for chunk in resp.iter_content(CHUNK):
                            fh.write(chunk)
                except TRANSIENT_ERRORS as exc:
                    raise RetryableHTTP(f"{parts.path} was cut off mid-file ({type(exc).__name__})") from exc
                return resp.headers.get("Content-Type")

        try:
            ctype = self.files.retrying()(attempt)
        except RetryableHTTP as exc:
            tmp.unlink(missing_ok=True)
            raise StepFailed(f"Semantic Scholar dataset file {parts.path} could not be downloaded in "
                             f"{self.files.max_attempts} attempts ({exc}); the files downloaded so far are kept "
                             "in the raw zone") from exc
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        entry: RawEntry = self.raw.adopt(SOURCE, relpath, tmp, url=url.split("?", 1)[0], params=params,
                                         content_type=ctype)
        self.bytes += entry.bytes
        return self.raw.path(entry)
