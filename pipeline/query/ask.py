"""``paperkb ask``: a question answered from the snapshot's passages, every claim citing the evidence.

The evidence is the search's best passage of each of the top papers, numbered [1]..[k] with its paper, page
and section. With an LLM configured (``PAPERKB_LLM_BASE_URL`` and ``PAPERKB_LLM_MODEL``, the endpoint the
``llm`` expansion uses, :mod:`pipeline.query.chat`) the model is given the numbered passages and the
question and asked to cite a passage number after every sentence; its answer is then checked
(:func:`checked_claims`): each sentence is a claim, citation numbers that point at no listed passage are
removed, and a claim left citing nothing listed is dropped (the answer says how many were). A citation is
read from ``[n]`` in ASCII, full-width (``［n］``) or lenticular (``【n】``) brackets, with lists, ranges and a
word or sign before the numbers (``[1, 3]``, ``[2-4]``, ``[Passage 2]``, ``[S2]``, ``[^2]``); any other marker
that looks like a citation (a bracket holding a digit, such as ``[7a]`` or ``[0x7]``, superscript digits, ``<sup>``)
is removed, never shown, since it was not checked. The model's answer is read up to ``llm_answer_max_chars``
characters (the answer says when it was cut there). Without an LLM, or when it fails or times out
(``llm_answer_timeout_s``, wall clock for the whole exchange), the answer is the evidence alone, with a note
saying why. The model never decides what the evidence is: the search does.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass, field
from typing import Any

log = logging.getLogger(__name__)

#: characters of each passage given to the model (the whole passage is in the evidence list)
PROMPT_PASSAGE_CHARS = 500
#: the question first, then the numbered sources, then the rule: with this order SmolLM2-135M cited sources
#: after its sentences; with the passages first and the question after them it repeated one phrase until the
#: token limit (bigger models follow either)
PROMPT = (
    "Question: {question}\n\n"
    "Sources:\n{passages}\n\n"
    "Answer the question in a few sentences, using only these sources. End each sentence with the numbers of "
    "the sources it uses in brackets, like [1] or [2][3]. If the sources do not answer the question, say so."
)

# "[1]", "[1, 3]", "[2-4]", "[Passage 2]", "[source 1; 3]", "[S2]", "[^2]": one citation marker and the numbers in it
_MARKER = re.compile(r"\[\s*(?:(?:passages?|sources?|evidence|doc(?:ument)?s?|refs?\.?|s|\^|#)\s*)?"
                     r"(\d+(?:\s*(?:[,;]|-|\u2013|and)\s*\d+)*)\s*\]", re.IGNORECASE)
# brackets models cite with besides ASCII ones (full-width, lenticular, tortoise shell, white): read as [ ]
_BRACKETS = str.maketrans({"\uff3b": "[", "\uff3d": "]", "\u3010": "[", "\u3011": "]", "\u3014": "[", "\u3015": "]",
                           "\u3016": "[", "\u3017": "]", "\u27e6": "[", "\u27e7": "]"})
# what is left after the checked markers that still looks like a citation: a bracket holding a digit ("[7a]",
# "[-7]", "[0x7]", "[[7]]"'s remains), superscript digits ("\u2077", "\u00b9\u02d2\u00b3"), <sup>...</sup>; removed
_SUPERSCRIPT = "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079"
_UNCHECKED = re.compile(r"\[([^\[\]\n\x00\x01]{1,80})\]|<sup\b[^<>]{0,40}>([^<>]{0,40})</sup\s*>"
                        rf"|[{_SUPERSCRIPT}]+(?:[\u207b\u02d2,\u2013-]?[{_SUPERSCRIPT}]+)*", re.IGNORECASE)
_EMPTY_BRACKETS = re.compile(r"\[\s*\]")
# a checked citation while the rest of the sentence is cleaned: \x00n\x01 (those characters are removed first)
_KEPT = re.compile(r"\x00(\d+)\x01")
_WRAPPED = re.compile(r"\[[\s,;]*((?:\x00\d+\x01[\s,;]*)+)\]")  # "[[1]]", "[[1], [7]]": brackets around checked ones
_RANGE = re.compile(r"(\d+)\s*(?:-|\u2013)\s*(\d+)")
# a sentence ends at . ! ? (then its citation markers, if any) followed by white space or the line's end
_SENTENCE_END = re.compile(r"(?<=[.!?])((?:\s*\[[^\]]{1,40}\])*)(?:\s+|$)")
# the end of a whole sentence (and its citation markers), where an answer over the cap is cut
_WHOLE_SENTENCE = re.compile(r"[.!?](?:\s*\[[^\]\n]{1,40}\])*(?=\s)")
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)])\s+")


@dataclass
class Evidence:
    n: int  # the number claims cite: [n]
    paper_id: str
    external_id: str | None
    title: str | None
    authors: list[str]
    year: int | None
    page: int | None
    section: str | None
    role: str | None
    chunk_id: str | None
    text: str
    index: str | None = None  # several indexes searched as one: the one this passage is from


@dataclass
class Claim:
    text: str  # the sentence with its (valid) citation markers
    cites: list[int]  # the evidence numbers it cites, in order


@dataclass
class Answer:
    question: str
    snapshot_id: str | None
    evidence: list[Evidence]
    claims: list[Claim] = field(default_factory=list)  # empty: the evidence alone
    dropped: list[str] = field(default_factory=list)  # sentences that cited no listed passage
    model: str | None = None  # the LLM that wrote the claims
    notes: list[str] = field(default_factory=list)  # what ask did beside the search (no LLM, a fallback, drops)
    search_notes: list[str] = field(default_factory=list)  # the search's own (expansion terms, fallbacks)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def evidence_of(resp) -> list[Evidence]:
    """The numbered evidence of a search response: each paper's best passage, in rank order."""
    return [Evidence(n=i, paper_id=r.paper_id, external_id=r.external_id, title=r.title, authors=list(r.authors),
                     year=r.year, page=r.page, section=r.section, role=r.role, chunk_id=r.chunk_id,
                     text=" ".join((r.passage or "").split()), index=r.index)
            for i, r in enumerate(resp.results, 1)]


def prompt(question: str, evidence: list[Evidence]) -> str:
    """The one user message: the question, the numbered passages (each cut to :data:`PROMPT_PASSAGE_CHARS`),
    and the rule that every sentence cites passage numbers."""
    lines = []
    for e in evidence:  # the passage alone: with title and authors before it, small models copied those out
        text = e.text if len(e.text) <= PROMPT_PASSAGE_CHARS else e.text[:PROMPT_PASSAGE_CHARS].rsplit(" ", 1)[0] + " ..."
        lines.append(f"[{e.n}] {text}")
    return PROMPT.format(passages="\n".join(lines), question=" ".join(question.split()))


def _numbers(marker_body: str) -> list[int]:
    out: list[int] = []
    for part in re.split(r"\s*(?:[,;]|\band\b)\s*", marker_body):
        m = _RANGE.fullmatch(part.strip())
        if m:
            a, b = int(m.group(1)), int(m.group(2))
            out.extend(range(a, b + 1) if 0 < b - a < 20 else (a, b))
        elif part.strip().isdigit():
            out.append(int(part))
    return out


def sentences(content: str) -> list[str]:
    """The model's answer as sentences: reasoning (``<think>``) and list bullets removed, a sentence's
    trailing citation markers kept with it."""
    text = _THINK.sub("", content or "").translate(_BRACKETS)
    out: list[str] = []
    for line in text.splitlines():
        line = _BULLET.sub("", line).strip()
        if not line:
            continue
        start = 0
        for m in _SENTENCE_END.finditer(line):
            out.append(line[start:m.start()] + (m.group(1) or ""))
            start = m.end()
        out.append(line[start:])
    merged: list[str] = []
    for piece in (" ".join(p.split()) for p in out):
        if piece and merged and not _MARKER.sub("", piece).strip():
            merged[-1] += " " + piece  # markers alone on a line ("[1][2]"): they cite the sentence before
        elif piece:
            merged.append(piece)
    return merged


def checked_claims(content: str, n_evidence: int) -> tuple[list[Claim], list[str], list[str]]:
    """(claims, dropped sentences, citations removed as shown in the note: ``[7]``, or an unchecked marker as
    written). Every claim keeps only the citation numbers 1..``n_evidence``, written ``[n]``; every other
    citation-like marker is removed; a sentence with no citation left is dropped (it cites nothing listed). Pure."""
    claims: list[Claim] = []
    dropped: list[str] = []
    removed: list[str] = []
    for sentence in sentences(content.replace("\x00", "").replace("\x01", "")):
        cites: list[int] = []

        def keep_valid(m: re.Match) -> str:
            valid = []
            for k in _numbers(m.group(1)):
                if 1 <= k <= n_evidence:
                    valid.append(k)
                    if k not in cites:
                        cites.append(k)
                else:
                    removed.append(f"[{k}]")
            return "".join(f"\x00{k}\x01" for k in dict.fromkeys(valid))

        def unchecked(m: re.Match) -> str:
            inside = m.group(1) if m.group(1) is not None else m.group(2)
            if inside is not None and not any(c.isdigit() for c in inside):
                return m.group(0)  # "[sic]", "<sup>a</sup>": no number, no citation
            removed.append(m.group(0))
            return ""

        text = _MARKER.sub(keep_valid, sentence)
        text = _WRAPPED.sub(lambda m: re.sub(r"[\s,;]", "", m.group(1)), text)
        text = _KEPT.sub(r"[\1]", _EMPTY_BRACKETS.sub("", _UNCHECKED.sub(unchecked, text)))
        text = " ".join(text.split())
        text = re.sub(r"\s+([.,;:!?])", r"\1", text)
        if cites:
            claims.append(Claim(text=text, cites=cites))
        else:
            dropped.append(sentence)
    return claims, dropped, removed


def ask(searcher, settings, question: str, *, k: int = 5, use_llm: bool = True, **search_kwargs: Any) -> Answer:
    """Search ``question`` (``k`` papers), number their best passages, and with an LLM configured and
    ``use_llm`` write the checked answer. Never fails because the LLM did: the evidence stays."""
    from pipeline.query.chat import configured

    question = " ".join((question or "").split())
    if not question:
        from pipeline.errors import UserError

        raise UserError("the question is empty")
    resp = searcher.search(question, k=k, **search_kwargs)
    ans = Answer(question=question, snapshot_id=resp.snapshot_id, evidence=evidence_of(resp),
                 search_notes=list(resp.notes))
    if not ans.evidence:
        ans.notes.append("the search found no passage: nothing to answer from")
        return ans
    if not use_llm:
        return ans
    if not configured(settings):
        ans.notes.append("no LLM configured (PAPERKB_LLM_BASE_URL, PAPERKB_LLM_MODEL): the evidence alone")
        return ans
    return _written(ans, settings)


def _written(ans: Answer, settings) -> Answer:
    from pipeline.query.chat import ChatEndpoint, failure

    timeout_s = settings.llm_answer_timeout_s
    try:
        content, truncated = ChatEndpoint(settings, timeout_s).complete(prompt(ans.question, ans.evidence),
                                                                        settings.llm_answer_tokens)
    except Exception as exc:  # any failure (timeout, HTTP error, bad JSON): the evidence alone, never a failed ask
        reason = failure(exc, timeout_s)
        log.warning("the LLM answer failed (%s); giving the evidence alone", reason)
        ans.notes.append(f"the LLM answer failed ({reason}): the evidence alone")
        return ans
    cap = settings.llm_answer_max_chars
    over = len(content) > cap
    if over:  # a model (or an endpoint) that writes on and on: its whole sentences within the cap, no further
        ends = [m.end() for m in _WHOLE_SENTENCE.finditer(content, 0, cap + 1)]
        content, truncated = (content[:ends[-1]], False) if ends else (content[:cap], True)
    claims, dropped, removed = checked_claims(content, len(ans.evidence))
    uncited = len(dropped)
    cut = truncated and not content.rstrip().endswith((".", "]", "!", "?"))
    if cut and claims and (not dropped or sentences(content)[-1] != dropped[-1]):
        dropped.append(claims.pop().text)  # cut at the token limit mid-sentence: not a whole claim
    ans.model, ans.claims, ans.dropped = settings.llm_model, claims, dropped
    if removed:
        shown = list(dict.fromkeys(removed))
        ans.notes.append("citations of passages that were not listed were removed: " + ", ".join(shown[:20])
                         + (f" and {len(shown) - 20} more" if len(shown) > 20 else ""))
    if uncited:
        ans.notes.append(f"{uncited} sentence(s) dropped: they cited no listed passage")
    if over:
        ans.notes.append(f"the answer was longer than {cap:,} characters (llm_answer_max_chars): only its sentences "
                         "within them were read")
    elif cut:
        ans.notes.append(f"the answer was cut at {settings.llm_answer_tokens} tokens (llm_answer_tokens): its last "
                         "sentence was dropped")
    if not claims:
        ans.notes.append("the LLM's answer held no sentence citing a listed passage: the evidence alone")
    return ans
