"""Serve recorded Semantic Scholar answers from a local pytest-httpserver (helper for the S2 tests
and bench/s2.py).

The recordings in ``../shared/data/s2`` are vcrpy cassettes made by the ``semanticscholar`` client's
own tests, read by :func:`devtools.replay_server.load_cassette`. :class:`S2Replay` keys each recorded answer by
method, path, query and JSON body, and serves the recorded bytes and status.

The ``fields`` query parameter is left out of the key: the recordings were made with the client's
field lists, and our pipeline asks for its own; what we parse is whatever S2 sent back then. Paths
can be aliased (the client asked ``/paper/<DOI>/references``; we ask ``/paper/<paperId>/references``,
the paperId S2 gave for that DOI in the recorded batch answer). Recorded JSON *records* (Paper.json,
Citation.json...) can be served inside the page envelope S2 uses (``offset``/``next``/``data``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qsl, urlsplit

from werkzeug import Request, Response

from devtools.replay_server import load_cassette, s2_request_key

GRAPH_PREFIX = "/graph/v1"


@dataclass
class Recorded:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Seen:
    at: float
    method: str
    path: str
    query: dict[str, str]
    body: bytes
    status: int
    headers: dict[str, str]


class S2Replay:
    """A catch-all handler on a pytest-httpserver that answers from recorded S2 responses."""

    def __init__(self, httpserver, data_dir: Path):
        self.server = httpserver
        self.data_dir = Path(data_dir)
        self.routes: dict[tuple[str, str, tuple, str], Recorded] = {}
        self.interceptors: list[Callable[[Request], Response | None]] = []
        self.fallback: Callable[[Request], Response | None] | None = None
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        import re

        httpserver.expect_request(re.compile(".*")).respond_with_handler(self._handle)

    @property
    def api_url(self) -> str:
        return self.server.url_for(GRAPH_PREFIX).rstrip("/")

    # -- registering answers ----------------------------------------------------------------------
    def add(self, method: str, path: str, status: int, body: bytes, *, query: dict[str, Any] | None = None,
            json_body: Any = None, headers: dict[str, str] | None = None) -> None:
        key = s2_request_key(method, path, [(k, str(v)) for k, v in (query or {}).items()],
                             json.dumps(json_body) if json_body is not None else "")
        self.routes[key] = Recorded(status, body, headers=dict(headers or {}))

    def add_json(self, method: str, path: str, payload: Any, **kw) -> bytes:
        body = json.dumps(payload).encode("utf-8")
        self.add(method, path, 200, body, **kw)
        return body

    def load(self, name: str, *, alias: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Register every interaction of ``<data_dir>/<name>``; ``alias`` rewrites path prefixes."""
        interactions = load_cassette(self.data_dir / name)
        for it in interactions:
            parts = urlsplit(it["uri"])
            path = parts.path
            for old, new in (alias or {}).items():
                if path.startswith(old):
                    path = new + path[len(old):]
            key = s2_request_key(it["method"], path, parse_qsl(parts.query, keep_blank_values=True), it["body"])
            self.routes[key] = Recorded(it["status"], it["content"], it["content_type"])
        return interactions

    def serve_pages(self, kind: str, paper_id: str, items: list[Any], page_size: int) -> list[bytes]:
        """Recorded edge items served the way S2 pages them: {offset, next?, data}."""
        bodies = []
        for off in range(0, max(len(items), 1), page_size):
            env: dict[str, Any] = {"offset": off}
            if off + page_size < len(items):
                env["next"] = off + page_size
            env["data"] = items[off:off + page_size]
            bodies.append(self.add_json("GET", f"{GRAPH_PREFIX}/paper/{paper_id}/{kind}", env,
                                        query={"offset": off, "limit": page_size}))
        return bodies

    # -- answering --------------------------------------------------------------------------------
    def _handle(self, request: Request) -> Response:
        with self._lock:
            resp = None
            for icpt in self.interceptors:
                resp = icpt(request)
                if resp is not None:
                    break
            if resp is None:
                key = s2_request_key(request.method, request.path, list(request.args.items(multi=True)),
                                     request.get_data())
                rec = self.routes.get(key)
                if rec is not None:
                    resp = Response(rec.body, status=rec.status, content_type=rec.content_type, headers=rec.headers)
                elif self.fallback is not None:
                    resp = self.fallback(request)
            if resp is None:
                resp = Response(json.dumps({"error": f"no recording for {request.method} {request.full_path}"}),
                                status=599, content_type="application/json")
            self.seen.append(Seen(time.monotonic(), request.method, request.path, dict(request.args),
                                  request.get_data(), resp.status_code, dict(request.headers)))
            return resp

    def calls(self, predicate: Callable[[Seen], bool] = lambda s: True) -> list[Seen]:
        return [s for s in self.seen if predicate(s)]


def fail_first(n: int, *, status: int = 429, retry_after: str | None = "1",
               when: Callable[[Request], bool] = lambda r: True) -> Callable[[Request], Response | None]:
    """An interceptor answering ``status`` (with Retry-After) to the first ``n`` matching requests."""
    state = {"left": n}

    def icpt(request: Request) -> Response | None:
        if state["left"] > 0 and when(request):
            state["left"] -= 1
            headers = {"Retry-After": retry_after} if retry_after is not None else {}
            return Response(json.dumps({"message": "Too Many Requests"}), status=status,
                            content_type="application/json", headers=headers)
        return None

    return icpt


def empty_page_body(data_dir: Path) -> bytes:
    """The recorded empty result page (test_empty_paginated_results.yaml)."""
    return load_cassette(Path(data_dir) / "test_empty_paginated_results.yaml")[0]["content"]
