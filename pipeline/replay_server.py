"""A local stand-in for arXiv and Semantic Scholar that answers from the recorded data (``shared/data``:
``arxiv/`` and ``s2/``): the recorded-data path of a deployment, without the network.

``paperkb replay-server DATA_DIR [--host H] [--port N]`` starts it and prints the ``export PAPERKB_...`` lines
that point paperkb at it (every host that runs paperkb steps needs them); ``make run REPLAY=1`` starts it
in process. The tests mount the same answers on pytest-httpserver (``RecordedServices.respond`` is
transport-free). It ships in the wheel (``[pipeline]``: reading the S2 cassettes needs PyYAML);
``python -m devtools.replay_server`` is the same server from a checkout.

Routes (``BASE`` is ``http://127.0.0.1:PORT``; :func:`service_env` gives the matching settings):

- ``BASE/oai`` -- arXiv OAI-PMH. ``ListRecords`` answers the recorded page of the requested
  ``metadataPrefix`` (arXivRaw: a 6-record page; arXiv: a 3-record page), whatever the window, so every
  run of a backfill sees the same records (the recordings have no others). The recordings hold only
  the first page of that list, so its ``resumptionToken`` answers the recorded ``noRecordsMatch``
  response, which ends the list for a harvester (the real token belongs to a 2015 session that arXiv
  has long forgotten: replaying its recorded ``badResumptionToken`` would only make the harvester
  restart the list forever). ``GetRecord`` answers the recorded record or ``idDoesNotExist``.
- ``BASE/api/query`` -- the arXiv API. A recorded ``id_list``/``search_query`` answers its recording;
  an unknown id answers the recorded empty feed; ``id_list=abc`` the recorded HTTP 400 error feed.
- ``BASE/pdf/<id>`` -- the 10 recorded PDFs (version suffix and ``.pdf`` ignored), else 404.
- ``BASE/s2/...`` -- Semantic Scholar, from the vcrpy cassettes: a recorded request (method, path,
  query but ``fields``, JSON body) answers its recording. Otherwise ``POST /paper/batch`` answers ``null`` per
  id, and a ``GET`` answers 404 ``{"error": "Paper with id X not found"}``, both as S2 does in the
  recordings (test_get_papers_return_not_found, test_not_found).

The server is the standard library's http.server; only the S2 cassettes need PyYAML.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

log = logging.getLogger(__name__)

ATOM = "application/atom+xml; charset=utf-8"
XML = "text/xml; charset=utf-8"
JSON = "application/json"


@dataclass
class Reply:
    status: int
    body: bytes
    content_type: str = XML
    source: str = ""  # the recorded file that answered (for logs and tests)


def service_env(base_url: str) -> dict[str, str]:
    """The ``PAPERKB_*`` settings that point paperkb at a replay server on ``base_url``."""
    base = base_url.rstrip("/")
    return {
        "PAPERKB_ARXIV_OAI_URL": f"{base}/oai",
        "PAPERKB_ARXIV_API_URL": f"{base}/api/query",
        "PAPERKB_ARXIV_PDF_URL": f"{base}/pdf",
        "PAPERKB_S2_API_URL": f"{base}/s2/graph/v1",
    }


def _query(query: str | dict | None) -> dict[str, str]:
    if query is None:
        return {}
    if isinstance(query, dict):
        return {k: (v[0] if isinstance(v, list) else v) for k, v in query.items()}
    return dict(parse_qsl(query, keep_blank_values=True))


def _norm_json(body: bytes | str | None) -> str:
    if not body:
        return ""
    try:
        return json.dumps(json.loads(body), sort_keys=True)
    except (ValueError, TypeError):
        return body.decode() if isinstance(body, bytes) else str(body)


def s2_request_key(method: str, path: str, query_pairs, body: bytes | str | None) -> tuple:
    """What a recorded S2 answer is matched on: method, path, query and JSON body. Everything but
    ``fields`` in the query: the recordings asked for the client's field lists, paperkb asks for its own;
    the answer is whatever S2 sent back then."""
    return (method.upper(), path, tuple(sorted((k, v) for k, v in query_pairs if k != "fields")), _norm_json(body))


def load_cassette(path: Path) -> list[dict]:
    """The interactions of a vcrpy cassette (the ``semanticscholar`` client's own test recordings) as dicts:
    method, uri, body (request), status, content (bytes), content_type. Two YAML flavours exist:
    ``response.status.code`` + ``response.body.string``, and ``response.status_code`` + ``response.content``."""
    import yaml

    doc = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    out = []
    for it in (doc or {}).get("interactions", []):
        req, resp = it["request"], it["response"]
        if "status" in resp:
            status = resp["status"]["code"] if isinstance(resp["status"], dict) else resp["status"]
            content = (resp.get("body") or {}).get("string")
        else:
            status, content = resp.get("status_code"), resp.get("content")
        if status is None:
            continue
        if content is None or isinstance(content, str):
            content = (content or "").encode("utf-8")
        ctype = (resp.get("headers") or {}).get("Content-Type") or ["application/json"]
        out.append({"method": req["method"], "uri": req["uri"], "body": req.get("body") or "", "status": int(status),
                    "content": content, "content_type": ctype[0] if isinstance(ctype, list) else ctype})
    return out


def _base_arxiv_id(text: str) -> str:
    text = unquote(text).strip("/")
    if text.endswith(".pdf"):
        text = text[:-4]
    return re.sub(r"v\d+$", "", text)


@dataclass
class RecordedServices:
    """An index of the recorded responses under ``data_dir`` and the answer to any request."""

    data_dir: Path
    oai_list: dict[str, Path] = field(default_factory=dict)  # metadataPrefix -> ListRecords page
    oai_get: dict[tuple[str, str], Path] = field(default_factory=dict)  # (prefix, identifier) -> record
    oai_errors: dict[str, Path] = field(default_factory=dict)  # OAI error code -> response
    api: dict[tuple[str, frozenset, int], Path] = field(default_factory=dict)
    pdfs: dict[str, Path] = field(default_factory=dict)
    s2: dict[tuple[str, str, tuple, str], tuple[int, bytes, str]] = field(default_factory=dict)

    @classmethod
    def load(cls, data_dir: str | Path) -> "RecordedServices":
        rs = cls(Path(data_dir))
        if not (rs.data_dir / "arxiv").is_dir():
            from pipeline.errors import UserError

            raise UserError(f"no recorded data at {rs.data_dir} (expected arxiv/ and s2/ folders, e.g. ../shared/data)")
        rs._index_oai()
        rs._index_api()
        rs.pdfs = {p.stem: p for p in sorted((rs.data_dir / "arxiv" / "pdf").glob("*.pdf"))}
        rs._index_s2()
        return rs

    # ---- indexing --------------------------------------------------------------------------------------
    def _index_oai(self) -> None:
        for path in sorted((self.data_dir / "arxiv" / "oai").glob("*.xml")):
            head = path.read_bytes()[:4000].decode("utf-8", "replace")
            m = re.search(r"<request([^>]*)>", head)
            attrs = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1))) if m else {}
            err = re.search(r'<error code="(\w+)"', head)
            if err:
                self.oai_errors.setdefault(err.group(1), path)
            elif attrs.get("verb") == "ListRecords":
                self.oai_list.setdefault(attrs.get("metadataPrefix", ""), path)
            elif attrs.get("verb") == "GetRecord":
                self.oai_get[(attrs.get("metadataPrefix", ""), attrs.get("identifier", ""))] = path

    def _index_api(self) -> None:
        # newest recordings first, so the current feed format wins where both exist
        for path in sorted((self.data_dir / "arxiv" / "api").glob("*.xml"), reverse=True):
            head = path.read_bytes()[:2000].decode("utf-8", "replace").replace("&amp;", "&")
            m = re.search(r"Query: search_query=([^&]*)&id_list=([^&]*)&start=(\d+)", head)
            if m:
                ids = frozenset(i for i in m.group(2).split(",") if i)
                self.api.setdefault((m.group(1), ids, int(m.group(3))), path)
            elif "error" in path.stem:
                ids = frozenset([path.stem.split("id_list_")[1].split("_error")[0]])
                self.api.setdefault(("", ids, 0), path)

    def _index_s2(self) -> None:
        for path in sorted((self.data_dir / "s2").glob("*.yaml")):
            for it in load_cassette(path):
                u = urlsplit(it["uri"])
                key = s2_request_key(it["method"], u.path, parse_qsl(u.query, keep_blank_values=True), it["body"])
                self.s2.setdefault(key, (it["status"], it["content"], path.name))

    # ---- answering ---------------------------------------------------------------------------------------
    def respond(self, method: str, path: str, query: str | dict | None = None, body: bytes | None = None) -> Reply:
        q = _query(query)
        if path.rstrip("/") == "/oai":
            return self._oai(q)
        if path.rstrip("/") == "/api/query":
            return self._api(q)
        if path.startswith("/pdf/"):
            return self._pdf(path[len("/pdf/"):])
        if path.startswith("/s2/"):
            return self._s2(method.upper(), path[len("/s2"):], q, body)
        return Reply(404, b"not a recorded service\n", "text/plain")

    def _file(self, path: Path, status: int = 200, ctype: str = XML) -> Reply:
        return Reply(status, path.read_bytes(), ctype, path.name)

    def _oai(self, q: dict[str, str]) -> Reply:
        verb = q.get("verb", "")
        if verb == "ListRecords" and "resumptionToken" in q:
            return self._file(self.oai_errors["noRecordsMatch"])
        if verb == "ListRecords":
            page = self.oai_list.get(q.get("metadataPrefix", ""))
            return self._file(page) if page else self._file(self.oai_errors["badArgument"])
        if verb == "GetRecord":
            rec = self.oai_get.get((q.get("metadataPrefix", ""), q.get("identifier", "")))
            return self._file(rec) if rec else self._file(self.oai_errors["idDoesNotExist"])
        return self._file(self.oai_errors["badArgument"])

    def _api(self, q: dict[str, str]) -> Reply:
        ids = frozenset(i for i in q.get("id_list", "").split(",") if i)
        key = (q.get("search_query", ""), ids, int(q.get("start", "0") or 0))
        path = self.api.get(key)
        if path is None and ids and not key[0]:
            path = self.api.get(("", frozenset(["0000.0000"]), 0))  # the recorded answer for an unknown id
        if path is None:
            return Reply(404, b"no recording for this query\n", "text/plain")
        return self._file(path, 400 if "error400" in path.name else 200, ATOM)

    def _pdf(self, rest: str) -> Reply:
        path = self.pdfs.get(_base_arxiv_id(rest))
        if path is None:
            return Reply(404, b"PDF not recorded\n", "text/plain")
        return self._file(path, 200, "application/pdf")

    def _s2(self, method: str, path: str, q: dict[str, str], body: bytes | None) -> Reply:
        key = s2_request_key(method, path, q.items(), body)
        hit = self.s2.get(key)
        if hit is not None:
            status, payload, name = hit
            return Reply(status, payload, JSON, name)
        if method == "POST" and path.rstrip("/").endswith("/batch"):
            try:
                ids = json.loads(body or b"{}").get("ids", [])
            except ValueError:
                return Reply(400, b'{"error":"Unacceptable query params"}', JSON)
            return Reply(200, json.dumps([None] * len(ids)).encode(), JSON, "unknown ids -> null")
        m = re.match(r"/graph/v1/(paper|author)/([^?]+?)(/(references|citations|authors|papers))?$", path)
        if m:
            what = "Paper" if m.group(1) == "paper" else "Author"
            return Reply(404, json.dumps({"error": f"{what} with id {unquote(m.group(2))} not found"}).encode(), JSON)
        return Reply(404, b'{"error":"Not found"}', JSON)


# ---- the HTTP server ------------------------------------------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    services: RecordedServices

    def _answer(self) -> None:
        u = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        reply = self.services.respond(self.command, u.path, u.query, body)
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    do_GET = do_POST = _answer

    def log_message(self, fmt: str, *args) -> None:  # route http.server's access log to logging
        log.debug("replay %s", fmt % args)


class ReplayServer:
    """``with ReplayServer(data_dir) as srv: srv.url`` -- a threaded server on 127.0.0.1."""

    def __init__(self, data_dir: str | Path, host: str = "127.0.0.1", port: int = 0):
        handler = type("Handler", (_Handler,), {"services": RecordedServices.load(data_dir)})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="replay-server", daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}"

    def start(self) -> "ReplayServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "ReplayServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def export_lines(url: str) -> list[str]:
    """``export PAPERKB_...=URL`` for each service URL setting, pointing at a replay server on ``url``."""
    return [f"export {k}={v}" for k, v in service_env(url).items()]


def public_url(host: str, port: int) -> str:
    """The URL other hosts use: a wildcard bind (``0.0.0.0``, ``::``) is reached by this host's name."""
    import socket

    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    return f"http://{host}:{port}"


def serve_until_interrupted(data, host: str = "127.0.0.1", port: int = 8765, echo=print, started=None) -> None:
    """Start the replay server, print the ``export PAPERKB_...`` lines that point paperkb at it (``echo``),
    call ``started(url)``, and serve until Ctrl-C or SIGTERM (``paperkb replay-server``,
    ``python -m devtools.replay_server``)."""
    import signal
    import threading

    srv = ReplayServer(data, host, port).start()
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        url = public_url(host, srv.httpd.server_address[1])
        for line in export_lines(url):
            echo(line)
        if started is not None:
            started(url)
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        srv.stop()
