"""Sub-queries parsed from a real model's free text: answers of SmolLM2-135M-Instruct captured with the
requests that produced them (tests/fixtures/llm_answers.json), and the habits of larger chat models (labels,
bold terms, reasoning blocks, chatter). No model runs here; tests/test_llm_expansion.py runs one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pipeline.query.expand import LLMExpander, parse_subqueries, subquery_of
from pipeline.settings import Settings

CASES = {c["name"]: c for c in json.loads((Path(__file__).parent / "fixtures" / "llm_answers.json").read_text())["cases"]}


def parsed(name: str, n: int = 3) -> list[str]:
    c = CASES[name]
    return parse_subqueries(c["content"], c["query"], n, truncated=c["finish_reason"] == "length")


def test_the_fixture_was_made_with_the_expanders_own_request():
    expander = LLMExpander(Settings(llm_base_url="http://127.0.0.1:9/v1", llm_model="smollm2"))
    for name, c in CASES.items():
        if name.startswith(("cisi-", "cran-")):
            body = expander.request_body(c["query"])
            assert c["request"] == {"messages": body["messages"], "max_tokens": body["max_tokens"]}, name


# ---- the paperkb prompt's real answers ------------------------------------------------------------
def test_numbered_list_then_a_repeat_with_labels_and_quotes_then_a_cut_line():
    # 1./2./3. list, "Here are the three search queries:", the same three as 'Query 1: "..."', then a line
    # cut at max_tokens: the three, once each, numbering and labels and quotes gone, the cut line dropped
    assert parsed("cisi-1") == [
        "What problems and concerns are there in making up descriptive titles?",
        "The difficulties involved in automatically retrieving articles from approximate titles.",
        "The usual relevance of the content of articles to their titles.",
    ]


def test_copies_of_the_original_are_not_sub_queries():
    # three copies of the query (with "?" for "." and a capital): nothing new, so nothing
    assert parsed("cran-157") == []
    assert parsed("cisi-25") == []


def test_rephrasings_are_kept_once():
    assert parsed("cran-61") == ["Does a closed-form expression exist for the local heat transfer around a yawed cylinder?"]
    assert parsed("cran-205") == ["Has anyone investigated whether surface flexibility can stabilize a laminar boundary layer?",
                                  "Does surface flexibility have a stabilizing effect on a laminar boundary layer?"]
    assert parsed("cran-13") == ["Transonic aileron buzz: a scientific paper."]  # line 1 is the query, with "?"


def test_quoted_lines_lose_their_quotes():
    assert parsed("cran-133") == []  # "Experimental Studies of Creep Buckling" is the query itself
    assert parsed("cran-109") == ["The use of solar panels to heat the air"]  # off topic, but a query


def test_degenerate_numbering_gives_nothing():
    assert CASES["cisi-13"]["content"].startswith("1. 1.1.1.1")
    assert parsed("cisi-13") == []


# ---- other prompts' real answers --------------------------------------------------------------------
def test_prose_answers_give_no_sub_queries():
    # the earlier prompt (the task as a system message): SmolLM2 answered the question in paragraphs
    assert parsed("old-prompt-cisi-13") == []


def test_bold_terms_with_explanations_give_the_terms():
    assert parsed("old-prompt-cran-85") == ["Friction", "Airflow"]  # "3. **Flow rate**: ..." is the cut line


def test_numbered_prose_is_kept_when_short_and_dropped_when_long():
    assert parsed("old-prompt-cran-193") == [
        'The method of solving clamped plate problems is based on the concept of the "clamping plate" which is a '
        "technique used to solve problems involving the clamped plate method."]


def test_chatter_and_headings_between_queries_are_skipped():
    # 'Here are the answers:' and a cut 'Query 1: "What is the basic mechanism of the trans' are skipped
    assert parsed("variant-cran-13") == ["Transonic aileron buzz: what is the basic mechanism of the transonic aileron buzz?"]
    assert parsed("variant-cran-61") == ["Does a closed-form expression exist for the local heat transfer around a yawed cylinder?"]


def test_at_most_n():
    assert parsed("cisi-1", n=2) == parsed("cisi-1")[:2]


# ---- what larger models write ----------------------------------------------------------------------
@pytest.mark.parametrize("line, query", [
    ("1. deep learning image classification", "deep learning image classification"),
    ("- convolutional networks", "convolutional networks"),
    ("* **wing flutter** - aeroelastic instability of wings", "wing flutter"),
    ("2) \"boundary layer transition\" - this query looks for transition studies", "boundary layer transition"),
    ("**Query 1:** hypersonic heat transfer", "hypersonic heat transfer"),
    ("Query 3 - creep buckling of shells", "creep buckling of shells"),
    ("Q2: citation indexing", "citation indexing"),
    ("\u201cbibliographic coupling\u201d", "bibliographic coupling"),
    ("### Search queries:", None),
    ("Sure! Here are three search queries for your topic", None),
    ("I hope these help.", None),
    ("The above queries are designed to provide a comprehensive and detailed description of the systems.", None),
    ("Search: library services delivered to the home", "library services delivered to the home"),
    ("Search engines for scientific literature", "Search engines for scientific literature"),
    ("Please note that the above queries are technical and not available in the default search engine.", None),
    ("1.1.1.1.1", None),
    ("", None),
    ("Q-learning for robot control", "Q-learning for robot control"),  # not a label
    ("3D reconstruction from stereo images", "3D reconstruction from stereo images"),  # not a marker
    (" ".join(["word"] * 40), None),  # prose, not a query
])
def test_one_line(line, query):
    assert subquery_of(line) == query


def test_reasoning_blocks_are_dropped():
    content = "<think>The user wants queries about dropout. Let me think.\n1. not this</think>\n1. dropout regularization\n2. neural network overfitting"
    assert parse_subqueries(content, "what is dropout", 3) == ["dropout regularization", "neural network overfitting"]
    assert parse_subqueries("<think>never closed\n1. lost", "x", 3) == []


def test_duplicates_are_told_by_their_words():
    content = "Dropout regularization.\ndropout  regularization\n\"Dropout, regularization\"\nWhat is dropout?"
    assert parse_subqueries(content, "what is dropout", 3) == ["Dropout regularization."]


def test_empty_or_missing_answer():
    assert parse_subqueries("", "q", 3) == [] and parse_subqueries(None, "q", 3) == []  # type: ignore[arg-type]
