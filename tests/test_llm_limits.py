"""An LLM endpoint is given a wall-clock deadline and a cap on the bytes read, for query expansion and
``paperkb ask`` alike (issue 64). The endpoints here are real HTTP servers on loopback: one that sends its
answer one byte a second (each read returns in time, so per-read timeouts never fire), one whose answer is
larger than ``llm_response_max_bytes``."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import pytest

from pipeline.cli import main
from pipeline.query.chat import AnswerError, ChatEndpoint, DeadlineExceeded, failure

#: the trickling endpoint's answer takes this long to send (one byte a second); before the deadline existed a
#: call waited all of it, once per LLM call
TRICKLE_S = 60
#: what the calls may take beyond their deadline (the CPU is shared with other test runs)
SLACK_S = 2.5
QUESTION = "What problems are there in making up descriptive titles for articles?"


class _Trickle(BaseHTTPRequestHandler):
    """POST /v1/chat/completions: a valid answer of TRICKLE_S bytes (Content-Length given at once) sent one byte a
    second; /big/v1/chat/completions: 2 MB of JSON at once."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/big/"):
            text = "Titles mislead readers [1]. " * 75_000  # ~2.1 MB
            body = json.dumps({"choices": [{"finish_reason": "stop", "message": {"content": text}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()  # no Content-Length: the cap is met while reading
            try:
                self.wfile.write(body)
            except OSError:
                pass
            self.close_connection = True
            return
        body = json.dumps({"choices": [{"message": {"content": "Titles mislead [1]."}}]}, separators=(",", ":")).encode()
        body += b" " * (TRICKLE_S - len(body))  # TRICKLE_S bytes, TRICKLE_S seconds
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        for i in range(len(body)):
            try:
                self.wfile.write(body[i:i + 1])
                self.wfile.flush()
            except OSError:  # the client gave up
                return
            time.sleep(1)


@pytest.fixture(scope="module")
def trickling() -> Iterator[str]:
    """The base URL (``.../v1``) of the trickling endpoint."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _llm(monkeypatch, url: str, *, timeout_s: str, answer_timeout_s: str) -> None:
    monkeypatch.setenv("PAPERKB_LLM_BASE_URL", url)
    monkeypatch.setenv("PAPERKB_LLM_MODEL", "slow")
    monkeypatch.setenv("PAPERKB_LLM_TIMEOUT_S", timeout_s)
    monkeypatch.setenv("PAPERKB_LLM_ANSWER_TIMEOUT_S", answer_timeout_s)
    monkeypatch.delenv("PAPERKB_QUERY_EXPAND", raising=False)


# ---- the client -----------------------------------------------------------------------------------------
def test_a_trickling_endpoint_is_abandoned_at_the_deadline(trickling):
    from pipeline.settings import Settings

    endpoint = ChatEndpoint(Settings(llm_base_url=trickling, llm_model="slow"), 2.0)
    t0 = time.monotonic()
    with pytest.raises(DeadlineExceeded) as exc:
        endpoint.complete("Why?", 16)
    elapsed = time.monotonic() - t0
    assert 2.0 <= elapsed < 2.0 + SLACK_S, elapsed  # before: the whole TRICKLE_S
    assert failure(exc.value, 2.0) == "timed out after 2 s"


def test_an_answer_over_the_byte_cap_is_refused_as_it_is_read(trickling):
    from pipeline.settings import Settings

    settings = Settings(llm_base_url=trickling.replace("/v1", "/big/v1"), llm_model="big")
    assert settings.llm_response_max_bytes == 1_048_576
    t0 = time.monotonic()
    with pytest.raises(AnswerError) as exc:
        ChatEndpoint(settings, 30.0).complete("Why?", 16)
    assert time.monotonic() - t0 < 10
    assert failure(exc.value, 30.0) == "the answer was longer than 1,048,576 bytes (PAPERKB_LLM_RESPONSE_MAX_BYTES)"


# ---- paperkb ask and search -------------------------------------------------------------------------------
def test_ask_with_a_trickling_llm_ends_at_its_two_deadlines(cisi_snapshot, trickling, monkeypatch, capsys):
    """The issue's reproduction: PAPERKB_LLM_ANSWER_TIMEOUT_S=5 PAPERKB_LLM_TIMEOUT_S=3 paperkb ask took 128 s
    (the expansion's call and the answer's, each the whole trickle). Now 3 + 5 s and the search."""
    wh = str(cisi_snapshot.warehouse)
    assert main(["--warehouse", wh, "ask", QUESTION, "--no-llm", "--expand", "off", "--json"]) == 0  # loads the model
    capsys.readouterr()
    _llm(monkeypatch, trickling, timeout_s="3", answer_timeout_s="5")
    t0 = time.monotonic()
    assert main(["--warehouse", wh, "ask", QUESTION, "--json"]) == 0
    elapsed = time.monotonic() - t0
    data = json.loads(capsys.readouterr().out)
    assert data["notes"] == ["the LLM answer failed (timed out after 5 s): the evidence alone"]
    assert data["search_notes"][0] == ("LLM expansion failed (timed out after 3 s); used the offline PRF expansion "
                                       "instead")
    assert len(data["evidence"]) == 5 and data["claims"] == []
    assert elapsed < 3 + 5 + 4 * SLACK_S, elapsed


def test_serve_llm_searches_free_the_workers_at_the_deadline(cisi_snapshot, trickling):
    """The issue's reproduction in ``serve``: two expand=llm searches held both search workers for 63 s and an
    unrelated search waited 61 s. Now each LLM search falls back after llm_timeout_s, and the other waits no longer."""
    import httpx

    from live_server import served

    settings = cisi_snapshot.model_copy(update={"serve_concurrency": 2, "llm_base_url": trickling,
                                                "llm_model": "slow", "llm_timeout_s": 3.0})
    with served(settings) as base, httpx.Client(base_url=base, timeout=120) as client, \
            ThreadPoolExecutor(max_workers=3) as pool:
        def timed(params: dict) -> tuple[float, dict]:
            t0 = time.monotonic()
            r = client.get("/api/search", params=params)
            assert r.status_code == 200, r.text
            return time.monotonic() - t0, r.json()

        assert timed({"q": "library classification", "expand": "off"})[1]["results"]  # warm
        llm = [pool.submit(timed, {"q": q, "expand": "llm"}) for q in ("indexing of titles", "citation analysis")]
        time.sleep(0.5)  # both workers busy with an LLM search
        other_s, _ = timed({"q": "library classification", "expand": "off"})
        for f in llm:
            took, body = f.result()
            assert took < 3 + 2 * SLACK_S, took  # before: the whole TRICKLE_S
            assert any(n.startswith("LLM expansion failed (timed out after 3 s)") for n in body["notes"]), body["notes"]
        assert other_s < 3 + 2 * SLACK_S, other_s  # before: it waited for a worker the whole TRICKLE_S
