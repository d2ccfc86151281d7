"""Without a network: a host that does not resolve or refuses the connection stops the step at once,
with one line naming the URL, the setting that holds it and ``--replay``; timeouts and 5xx are still
retried. Real clients against real local sockets: a port nobody listens on (refused), a ``.invalid``
host (never resolves, RFC 2606), a server that answers too slowly or drops the connection."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from pipeline.errors import ServiceUnreachable, StepFailed, find_unreachable
from pipeline.raw import RawZone
from pipeline.sources.arxiv.client import ArxivClient, ArxivUnavailable
from pipeline.sources.net import unreachable_reason
from pipeline.sources.pdf.client import PdfFetcher, arxiv_pdf_url
from pipeline.sources.s2.client import S2Client
from pipeline.warehouse import Warehouse

REPO_ROOT = Path(__file__).resolve().parent.parent
INVALID = "http://paperkb-unreachable.invalid"
START = {"verb": "ListRecords", "metadataPrefix": "arXivRaw", "set": "cs"}
FAST = 3.0  # seconds: "at once" on a busy two-core machine; retries would wait far longer


@pytest.fixture
def refused() -> str:
    """``http://127.0.0.1:<port>`` with nothing listening: the connection is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture(params=["refused", "invalid"])
def dead(request, refused) -> tuple[str, str]:
    """A base URL that cannot be reached, and the words the message gives for it."""
    if request.param == "refused":
        return refused, "connection refused"
    return INVALID, "the host name does not resolve"


@pytest.fixture
def dropping() -> str:
    """A server that accepts each connection and closes it at once: a transient network error."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.05)
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            conn.close()

    t = threading.Thread(target=loop, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    t.join()
    srv.close()


@pytest.fixture
def patient(settings):
    """Settings that would retry 5 times with real backoff: an immediate stop proves no retries."""
    return settings.model_copy(update={"retry_max_attempts": 5, "retry_max_backoff_s": 30.0, "max_consecutive_failures": 5})


def assert_one_line(exc: BaseException, url: str, setting: str | None, reason: str) -> None:
    msg = str(exc)
    assert "\n" not in msg
    assert "cannot reach " in msg and url in msg and reason in msg
    if setting:
        assert setting in msg
    assert "--replay" in msg and "make run REPLAY=1" in msg
    assert find_unreachable(f"noise\nairflow.sdk.exceptions.AirflowFailException: {msg}\nmore") == msg


def _error(url: str, **kw) -> BaseException:
    try:
        requests.get(url, **kw)
    except requests.RequestException as exc:
        return exc
    raise AssertionError(f"{url} answered")


# ---- the shared classification --------------------------------------------------------------------------
def test_classification_on_real_failures(refused, dropping, httpserver):
    assert unreachable_reason(_error(refused + "/x", timeout=5)) == "connection refused"
    assert unreachable_reason(_error(INVALID + "/x", timeout=5)) == "the host name does not resolve"
    assert unreachable_reason(_error(dropping + "/x", timeout=5)) is None  # cut connection: transient

    answered = threading.Event()

    def slow(_request):
        time.sleep(0.5)
        answered.set()
        return "late"

    httpserver.expect_request("/slow").respond_with_handler(slow)
    timeout = _error(httpserver.url_for("/slow"), timeout=0.1)
    assert isinstance(timeout, requests.Timeout) and unreachable_reason(timeout) is None
    assert answered.wait(10)  # the server is done before the next test uses it


def test_the_invalid_host_fails_fast_here():
    t0 = time.monotonic()
    _error(INVALID + "/x", timeout=5)
    assert time.monotonic() - t0 < FAST


# ---- arXiv: OAI-PMH and API ---------------------------------------------------------------------------------
def test_arxiv_oai_unreachable_stops_at_once(patient, dead):
    base, reason = dead
    s = patient.model_copy(update={"arxiv_oai_url": base + "/oai"})
    t0 = time.monotonic()
    with ArxivClient(s) as c, pytest.raises(ServiceUnreachable) as info:
        c.oai_page(START, "oai/t/page-1.xml")
    assert time.monotonic() - t0 < FAST and c.http.stats.requests == 1
    assert_one_line(info.value, base + "/oai", "PAPERKB_ARXIV_OAI_URL", reason)


def test_arxiv_api_unreachable_stops_at_once(patient, dead):
    base, reason = dead
    s = patient.model_copy(update={"arxiv_api_url": base + "/api/query"})
    t0 = time.monotonic()
    with ArxivClient(s) as c, pytest.raises(ServiceUnreachable) as info:
        c.api_id_list(["2104.12255"], "api/t/x.xml")
    assert time.monotonic() - t0 < FAST and c.http.stats.requests == 1
    assert_one_line(info.value, base + "/api/query", "PAPERKB_ARXIV_API_URL", reason)


def test_arxiv_cut_connections_are_still_retried(settings, dropping):
    s = settings.model_copy(update={"arxiv_oai_url": dropping + "/oai", "retry_max_attempts": 3})
    with ArxivClient(s) as c, pytest.raises(ArxivUnavailable, match="after 3 attempts"):
        c.oai_page(START, "oai/t/page-1.xml")
    assert c.http.stats.requests == 3


# ---- Semantic Scholar -----------------------------------------------------------------------------------------
def test_s2_unreachable_stops_at_once(patient, dead):
    base, reason = dead
    s = patient.model_copy(update={"s2_api_url": base + "/graph/v1"})
    client = S2Client(s, RawZone(s.raw_dir))
    t0 = time.monotonic()
    with pytest.raises(ServiceUnreachable) as info:
        client.fetch_batch(["ARXIV:2104.12255"])
    assert time.monotonic() - t0 < FAST
    assert client.stats.calls == {"batch": 1} and client.stats.retries == 0
    assert_one_line(info.value, base + "/graph/v1", "PAPERKB_S2_API_URL", reason)


def test_s2_timeouts_and_503_are_still_retried(settings, httpserver):
    calls = {"n": 0, "answered": 0}

    def flaky(_request):
        from werkzeug import Response

        calls["n"] += 1
        if calls["n"] == 1:
            time.sleep(0.5)  # the client gave up after 0.2 s: a timeout
        calls["answered"] += 1
        return Response('{"message": "busy"}', status=503, content_type="application/json")

    httpserver.expect_request("/graph/v1/paper/batch").respond_with_handler(flaky)
    s = settings.model_copy(update={"s2_api_url": httpserver.url_for("/graph/v1"), "http_timeout_s": 0.2,
                                    "retry_max_attempts": 3, "max_consecutive_failures": 10})
    client = S2Client(s, RawZone(s.raw_dir))
    with pytest.raises(StepFailed, match="3 consecutive failed requests"):
        client.fetch_batch(["ARXIV:2104.12255"])
    assert client.stats.calls == {"batch": 3} and client.stats.retries == 2
    deadline = time.monotonic() + 10  # the server is done before the next test uses it
    while calls["answered"] < 3 and time.monotonic() < deadline:
        time.sleep(0.05)


# ---- PDFs -------------------------------------------------------------------------------------------------------
def test_arxiv_pdf_host_unreachable_stops_at_once(patient, dead):
    base, reason = dead
    s = patient.model_copy(update={"arxiv_pdf_url": base + "/pdf"})
    fetcher = PdfFetcher(s)
    url = arxiv_pdf_url(s, "2104.12255")
    t0 = time.monotonic()
    with pytest.raises(ServiceUnreachable) as info:
        fetcher.fetch("2104.12255", url)
    assert time.monotonic() - t0 < FAST and fetcher.requests == 1
    assert_one_line(info.value, url, "PAPERKB_ARXIV_PDF_URL", reason)


def test_open_access_hosts_unreachable_are_per_paper_until_too_many_in_a_row(patient, refused, httpserver):
    s = patient.model_copy(update={"arxiv_pdf_url": httpserver.url_for("/pdf"), "max_consecutive_failures": 3})
    httpserver.expect_request("/oa/ok.pdf").respond_with_data(b"%PDF-1.4 tiny", content_type="application/pdf")
    fetcher = PdfFetcher(s)
    t0 = time.monotonic()
    first = fetcher.fetch("jsonl:a", INVALID + "/a.pdf")
    assert first.reason == "download_failed" and "not retried" in first.detail and not first.permanent
    assert fetcher.fetch("jsonl:b", refused + "/b.pdf").reason == "download_failed"
    assert fetcher.fetch("jsonl:ok", httpserver.url_for("/oa/ok.pdf")).entry is not None  # one answer resets the count
    fetcher.fetch("jsonl:c", INVALID + "/c.pdf")
    fetcher.fetch("jsonl:d", INVALID + "/d.pdf")
    with pytest.raises(ServiceUnreachable) as info:
        fetcher.fetch("jsonl:e", refused + "/e.pdf")
    assert time.monotonic() - t0 < 2 * FAST and fetcher.requests == 6  # one request each: no retries
    assert_one_line(info.value, refused + "/e.pdf", None, "connection refused; 3 hosts in a row")


def test_pdf_503_is_still_retried(settings, httpserver):
    httpserver.expect_request("/pdf/2104.12255").respond_with_data("busy", status=503)
    s = settings.model_copy(update={"arxiv_pdf_url": httpserver.url_for("/pdf"), "retry_max_attempts": 3})
    fetcher = PdfFetcher(s)
    res = fetcher.fetch("2104.12255", arxiv_pdf_url(s, "2104.12255"))
    assert res.reason == "download_failed" and fetcher.requests == 3


# ---- the steps ------------------------------------------------------------------------------------------------
def _seed(settings, rows):
    with Warehouse(settings) as wh:
        wh.init()
        for pid, source, ext in rows:
            wh.con.execute("INSERT INTO papers (paper_id, source, external_id) VALUES (?, ?, ?)", [pid, source, ext])


def _last_run(settings, step):
    with Warehouse(settings, read_only=True) as wh:
        return wh.con.execute("SELECT status, message FROM run_log WHERE step = ? ORDER BY started_at DESC LIMIT 1",
                              [step]).fetchone()


def test_harvest_step_stops_at_once(patient, refused):
    from pipeline.steps.harvest import run_harvest

    s = patient.model_copy(update={"arxiv_oai_url": refused + "/oai"})
    t0 = time.monotonic()
    with pytest.raises(ServiceUnreachable, match="PAPERKB_ARXIV_OAI_URL"):
        run_harvest(s, from_date="2026-11-20", until_date="2026-11-20")
    assert time.monotonic() - t0 < 2 * FAST
    status, message = _last_run(s, "harvest")
    assert status == "failed" and "cannot reach" in message


def test_enrich_step_stops_at_once_and_keeps_the_watermark(patient, refused):
    from pipeline.steps.enrich import WATERMARK, run_enrich

    s = patient.model_copy(update={"s2_api_url": refused + "/graph/v1"})
    _seed(s, [("2104.12255", "arxiv", "2104.12255"), ("1706.03762", "arxiv", "1706.03762")])
    t0 = time.monotonic()
    with pytest.raises(ServiceUnreachable, match="PAPERKB_S2_API_URL"):
        run_enrich(s)
    assert time.monotonic() - t0 < 2 * FAST
    assert _last_run(s, "enrich")[0] == "failed"
    with Warehouse(s, read_only=True) as wh:
        assert wh.get_watermark(WATERMARK) is None


def test_fulltext_step_stops_instead_of_rejecting_every_paper(patient, refused):
    from pipeline.steps.fulltext import run_fulltext

    s = patient.model_copy(update={"arxiv_pdf_url": refused + "/pdf"})
    _seed(s, [(pid, "arxiv", pid) for pid in ("1409.0473", "1505.04597", "1508.04025")])
    t0 = time.monotonic()
    with pytest.raises(ServiceUnreachable, match="PAPERKB_ARXIV_PDF_URL"):
        run_fulltext(s)
    assert time.monotonic() - t0 < 2 * FAST
    assert _last_run(s, "fulltext")[0] == "failed"
    with Warehouse(s, read_only=True) as wh:
        assert wh.con.execute("SELECT count(*) FROM rejects").fetchone()[0] == 0


# ---- the command line -------------------------------------------------------------------------------------------
def _env(settings, **urls) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_") or k == "PAPERKB_SHARED_DATA"}
    env.update({"PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "PAPERKB_WAREHOUSE": str(settings.warehouse),
                "PAPERKB_ARXIV_DELAY_S": "0", "PAPERKB_S2_DELAY_S": "0", "PAPERKB_RETRY_MAX_BACKOFF_S": "30"})
    env.update({f"PAPERKB_{k.upper()}": v for k, v in urls.items()})
    return env


@pytest.mark.parametrize("args,setting,key,path", [
    (["harvest", "--from", "2026-11-20", "--until", "2026-11-20"], "PAPERKB_ARXIV_OAI_URL", "arxiv_oai_url", "/oai"),
    (["lookup", "2104.12255"], "PAPERKB_ARXIV_API_URL", "arxiv_api_url", "/api/query"),
    (["enrich"], "PAPERKB_S2_API_URL", "s2_api_url", "/graph/v1"),
    (["fulltext"], "PAPERKB_ARXIV_PDF_URL", "arxiv_pdf_url", "/pdf"),
])
def test_cli_prints_one_line_and_exits_2(settings, refused, args, setting, key, path):
    _seed(settings, [("2104.12255", "arxiv", "2104.12255")])
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], env=_env(settings, **{key: refused + path}),
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("paperkb: error: cannot reach ") and refused + path in lines[0]
    assert setting in lines[0] and "--replay" in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout
    assert took < 60


# ---- make run (Airflow) -----------------------------------------------------------------------------------------
@pytest.mark.slow
def test_make_run_without_network_ends_within_a_minute_with_one_line(tmp_path, refused):
    wh = tmp_path / "warehouse"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PAPERKB_", "AIRFLOW", "_PAPERKB_TEST")) or k == "PAPERKB_SHARED_DATA"}
    env.update({"PYTHONPATH": str(REPO_ROOT), "HF_HUB_OFFLINE": "1", "PAPERKB_WAREHOUSE": str(wh),
                "PAPERKB_ARXIV_OAI_URL": refused + "/oai", "PAPERKB_ARXIV_API_URL": refused + "/api/query",
                "PAPERKB_ARXIV_PDF_URL": refused + "/pdf", "PAPERKB_S2_API_URL": refused + "/graph/v1"})
    # a minute on a quiet machine (35 s measured alone); Airflow's start-up is CPU-bound, so a loaded machine gets its
    # share of the cores as slack (2 cores at load 11: 136 s): what must not happen is minutes of retries and back-off
    slack = max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "devtools.airflow_local", "--date", "2026-11-21"], env=env,
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    took = time.monotonic() - t0
    console = proc.stdout + proc.stderr
    assert proc.returncode != 0, console
    assert took < 60 * max(slack, os.getloadavg()[0] / (os.cpu_count() or 1)), console
    assert "Traceback" not in console
    assert "paperkb:   harvest: failed" in proc.stdout
    [line] = [x for x in proc.stderr.splitlines() if "cannot reach" in x]
    assert f"cannot reach arXiv OAI-PMH at {refused}/oai (connection refused)" in line
    assert "PAPERKB_ARXIV_OAI_URL" in line and "--replay" in line and "make run REPLAY=1" in line
    [log] = (wh / "airflow" / "logs").glob("dags-test-2026-11-21-*.log")
    assert str(log) in console
    text = log.read_text()
    assert "Traceback" in text  # the tracebacks are in the log, not on the console
    assert text.count("[DAG TEST] starting task_id=harvest ") == 1  # failed without retries
