"""Serve the recorded arXiv responses (../shared/data/arxiv) from pytest-httpserver.

``ArxivReplay`` answers OAI-PMH ``ListRecords`` requests with a scripted sequence of recorded
files: ``first`` for the request that starts a list, then ``pages[token]`` for a resumptionToken
request (a list of bodies is served in turn, the last one repeats). Bodies may be bytes, a file
name under ``oai/``, an ``(status, body, headers)`` tuple, or a callable returning one of those. API ``id_list`` requests are answered
with the recorded file for that id list. Every request is logged with its arguments and time.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from werkzeug.wrappers import Request, Response

API_FILES = {
    "2104.12255v1": ("arxivpy2026_id_list_2104.12255v1.xml", 200),
    "astro-ph/0601001": ("arxivpy2026_id_list_astro-ph_0601001.xml", 200),
    "0808.05394,1707.08567": ("arxivpy2026_id_list_0808.05394_1707.08567.xml", 200),
    "1605.08386": ("arxivpy2026_id_list_1605.08386.xml", 200),
    "0000.0000": ("arxivpy2026_id_list_0000.0000_empty.xml", 200),
    "abc": ("arxivpy2026_id_list_abc_error400.xml", 400),
    "1111.2011v2": ("arxivpy2016_id_list_1111.2011v2.xml", 200),
}

LIST_PAGE = "saelim2015_ListRecordsResponse.xml"  # arXivRaw, 6 records, token 726959|1001
LAST_PAGE = "hepcrawl2017_ListRecords_arXiv_hep-th.xml"  # arXiv format, 3 records, no token
RECORDED_TOKEN = "726959|1001"


@dataclass
class Seen:
    args: dict[str, str]
    at: float


@dataclass
class ArxivReplay:
    data: Path  # ../shared/data/arxiv
    first: Any = LIST_PAGE
    pages: dict[str, list[Any]] = field(default_factory=lambda: {RECORDED_TOKEN: [LAST_PAGE]})
    oai_log: list[Seen] = field(default_factory=list)
    api_log: list[Seen] = field(default_factory=list)
    _served: dict[str, int] = field(default_factory=dict)

    def install(self, httpserver) -> "ArxivReplay":
        httpserver.expect_request("/oai").respond_with_handler(self.oai)
        httpserver.expect_request("/api/query").respond_with_handler(self.api)
        return self

    def body(self, name: str) -> bytes:
        return (self.data / "oai" / name).read_bytes()

    def _respond(self, item: Any) -> Response:
        if callable(item):  # e.g. block until the test lets the request go
            item = item()
        status, headers = 200, {}
        if isinstance(item, tuple):
            status, item, headers = item
        body = self.body(item) if isinstance(item, str) else item
        return Response(body, status=status, headers=headers, content_type="text/xml; charset=utf-8")

    def oai(self, request: Request) -> Response:
        args = request.args.to_dict()
        self.oai_log.append(Seen(args, time.monotonic()))
        token = args.get("resumptionToken")
        if token is None:
            key, script = "", self.first if isinstance(self.first, list) else [self.first]
        else:
            key, script = token, self.pages.get(token, ["saelim2015_ErrorResponseBadResumptionToken.xml"])
        i = self._served.get(key, 0)
        self._served[key] = i + 1
        return self._respond(script[min(i, len(script) - 1)])

    def api(self, request: Request) -> Response:
        args = request.args.to_dict()
        self.api_log.append(Seen(args, time.monotonic()))
        name, status = API_FILES[args["id_list"]]
        return Response((self.data / "api" / name).read_bytes(), status=status,
                        content_type="application/atom+xml; charset=utf-8")

    @property
    def list_starts(self) -> int:
        """How many requests started a list (no resumptionToken)."""
        return sum(1 for s in self.oai_log if "resumptionToken" not in s.args)


def renumbered_pages(data: Path, n_records: int, page_size: int, token_prefix: str = "batch") -> list[bytes]:
    """A longer list built from real records: the 6 arXivRaw records of ``LIST_PAGE``, re-numbered
    2501.00000, 2501.00001, ... and cut into ListRecords pages of ``page_size`` records, each page
    but the last ending with the resumptionToken ``<token_prefix>|<cursor of the next page>``
    (as bench/harvest.py builds its raw zone). Serve with ``pages_script``."""
    text = (data / "oai" / LIST_PAGE).read_text(encoding="utf-8")
    head = text[: text.index("<record>")]
    records = re.findall(r"<record>.*?</record>\n", text, flags=re.S)
    ids = [re.search(r"<id>(.*?)</id>", r).group(1) for r in records]
    pages = []
    for start in range(0, n_records, page_size):
        parts = [head]
        for k in range(start, min(start + page_size, n_records)):
            rec, old = records[k % len(records)], ids[k % len(ids)]
            new = f"2501.{k:05d}"
            parts.append(rec.replace(f"oai:arXiv.org:{old}<", f"oai:arXiv.org:{new}<")
                         .replace(f"<id>{old}</id>", f"<id>{new}</id>"))
        nxt = start + page_size
        token = f"{token_prefix}|{nxt}" if nxt < n_records else ""
        parts.append(f'<resumptionToken cursor="{start}" completeListSize="{n_records}">{token}</resumptionToken>\n'
                     "</ListRecords>\n</OAI-PMH>\n")
        pages.append("".join(parts).encode("utf-8"))
    return pages


def pages_script(pages: list[bytes], token_prefix: str = "batch") -> tuple[bytes, dict[str, list[bytes]]]:
    """``(first, pages)`` for ``ArxivReplay`` serving ``renumbered_pages`` in order."""
    page_size = len(re.findall(rb"<record>", pages[0])) if pages else 0
    return pages[0], {f"{token_prefix}|{i * page_size}": [body] for i, body in enumerate(pages[1:], start=1)}
