"""Chunking: token windows that cover the body, respect sections, pages and settings."""

from __future__ import annotations

import re

import pytest
from fulltext_sources import read_pdf_table

from pipeline.embedding.chunking import Segment, chunk_spans, load_tokenizer, tokenizer_path
from pipeline.steps.fulltext import extract_pdf
from pipeline.sources.pdf.text import SEARCHABLE_ROLES, join_lines

_CACHE: dict = {}


def _extract(shared_data, paper_id, settings, **overrides):
    key = (paper_id, tuple(sorted(overrides.items())))
    if key not in _CACHE:
        s = settings.model_copy(update=overrides) if overrides else settings
        _CACHE[key] = extract_pdf((shared_data / "arxiv" / "pdf" / f"{paper_id}.pdf").read_bytes(), paper_id, s)
    return _CACHE[key]


def _assert_cover(ex, settings, max_tokens, overlap):
    body, chunks = ex.body, ex.chunks
    assert chunks, "no chunks"
    tok = load_tokenizer(tokenizer_path(settings))
    covered = [False] * len(body)
    for k, c in enumerate(chunks):
        assert c["ordinal"] == k and c["chunk_id"] == f"{ex.paper_id}#{k}"
        assert body[c["char_start"]:c["char_end"]] == c["text"]
        assert c["text"] == c["text"].strip()
        n = len(tok(c["text"], add_special_tokens=True, verbose=False)["input_ids"])
        assert n <= max_tokens, (n, c["text"][:60])
        assert abs(n - c["n_tokens"]) <= 2  # re-tokenizing a cut text may merge a boundary piece
        assert 1 <= c["page_start"] <= c["page_end"] <= ex.n_pages
        for i in range(c["char_start"], c["char_end"]):
            covered[i] = True
    # nothing but the blank lines between sections is left out
    gaps = re.sub(r"\s+", "", "".join(ch for ch, cov in zip(body, covered) if not cov))
    assert gaps == "", gaps[:80]
    # consecutive chunks of one section overlap by about `overlap` tokens, never leave a hole
    for a, b in zip(chunks, chunks[1:]):
        assert b["char_start"] >= a["char_start"]
        if a["section"] == b["section"] and b["char_start"] < a["char_end"]:
            shared = body[b["char_start"]:a["char_end"]]
            n_shared = len(tok(shared, add_special_tokens=False, verbose=False)["input_ids"])
            assert overlap - 2 <= n_shared <= overlap + 12, n_shared
        else:  # a new window starts after the previous one: only whitespace between them
            assert body[a["char_end"]:b["char_start"]].strip() == ""
    # pages go forward (at most one page back: footnotes are read after the sentence that runs on
    # to the next page)
    assert all(b["page_start"] >= a["page_start"] - 1 for a, b in zip(chunks, chunks[1:]))
    assert chunks[0]["page_start"] == 1 and chunks[-1]["page_end"] <= ex.n_pages


@pytest.mark.parametrize("paper_id", ["1508.04025", "2306.03589"])  # two-column ACL; 37-page single column
def test_chunks_cover_body_without_gaps(shared_data, settings, paper_id):
    ex = _extract(shared_data, paper_id, settings)
    _assert_cover(ex, settings, settings.chunk_max_tokens, settings.chunk_overlap_tokens)


def test_chunk_settings_change_the_windows(shared_data, settings):
    small = _extract(shared_data, "1508.04025", settings, chunk_max_tokens=128, chunk_overlap_tokens=16)
    default = _extract(shared_data, "1508.04025", settings)
    assert len(small.chunks) > 1.6 * len(default.chunks)
    assert max(c["n_tokens"] for c in small.chunks) <= 128
    _assert_cover(small, settings, 128, 16)
    assert small.body == default.body  # chunking does not change the extracted text


def test_chunks_are_section_aware(shared_data, settings):
    ex = _extract(shared_data, "1706.03762", settings)
    titles = [s["title"] for s in ex.sections]
    assert "3.2.1 Scaled Dot-Product Attention" in titles and "References" in titles
    sections = {c["section"] for c in ex.chunks}
    assert "3.2.1 Scaled Dot-Product Attention" in sections
    for c in ex.chunks:
        # a chunk never runs on into the next section: a heading inside a chunk can only be one whose
        # short section (a bare heading like "5 Training") was joined to the following one, which
        # then names the chunk
        inside = [s for s in ex.sections if c["char_start"] < s["char_start"] < c["char_end"]]
        if inside and inside[-1] is not ex.sections[-1]:  # (a short last section joins the one before)
            assert c["section"] == inside[-1]["title"], (c["section"], [s["title"] for s in inside])
    ref = [c for c in ex.chunks if c["section"] == "References"]
    assert ref and all("[1]" in ref[0]["text"] or "References" in ref[0]["text"] for _ in [0])


def test_sections_follow_reading_order_on_two_column_papers(shared_data, settings):
    """Numbered headings come out in their numeric order: the columns were read left then right."""
    for pid in ("1508.04025", "1512.03385", "1810.04805"):
        ex = _extract(shared_data, pid, settings)
        nums = []
        for s in ex.sections:
            m = re.match(r"^(\d+(?:\.\d+)*)\.?\s", s["title"])
            if m:
                nums.append(tuple(int(x) for x in m.group(1).split(".")))
        assert len(nums) >= 8, (pid, nums)
        assert nums == sorted(nums), (pid, nums)


def test_abstract_is_its_own_record(shared_data, settings):
    facts = {f.paper_id: f for f in read_pdf_table(shared_data / "arxiv" / "SOURCES.md")}
    for pid in facts:
        ex = _extract(shared_data, pid, settings)
        assert ex.abstract and len(ex.abstract) > 300, pid
        assert not ex.abstract.lower().startswith("abstract")
        assert ex.abstract[:80] not in ex.body, f"{pid}: abstract should not be repeated in the body chunks"


def test_line_breaks_join_split_words_and_keep_the_compounds_the_paper_prints(shared_data, settings):
    """A word a line break cut is joined; a compound cut at its own hyphen keeps it when the paper prints it hyphenated
    elsewhere or the break sits beside another hyphen (the 10 real PDFs: "English-to-German", "self-attention",
    "fine-tuning" were printed as "Englishto-German", "selfattention", "finetuning")."""
    from pipeline.sources.pdf.text import document_words, join_lines

    texts = {}
    for pid in ("1706.03762", "1810.04805", "1409.0473"):
        ex = _extract(shared_data, pid, settings)
        texts[pid] = " ".join([ex.abstract or "", ex.body, *(f.text for f in ex.figures)])
    assert "English-to-German" in texts["1706.03762"] and "Englishto" not in texts["1706.03762"]
    for glued in ("selfattention", "finetuning", "pretraining", "taskspecific"):
        assert glued not in texts["1810.04805"].lower(), glued
    for glued in ("shortterm", "stateof", "fixedlength"):
        assert glued not in texts["1409.0473"].lower(), glued
    for pid, text in texts.items():  # words typeset across a line break are still joined
        assert "translation" in text and not re.search(r"\btransla-tion", text), pid

    words = document_words(["the short-term memory of a", "recurrent network for transla-", "translation tasks"])
    assert {"short-term", "short", "term", "translation"} <= words and "transla" not in words
    assert join_lines(["a short-", "term memory"], words) == "a short-term memory"  # printed hyphenated elsewhere
    assert join_lines(["neural transla-", "tion"], words) == "neural translation"  # printed joined elsewhere
    assert join_lines(["end-to-", "end training"], words) == "end-to-end training"  # beside another hyphen
    assert join_lines(["state-", "of-the-art"], words) == "state-of-the-art"
    assert join_lines(["some-", "what"], words) == "somewhat"  # the document says nothing: typesetters break words
    assert join_lines(["co-occur-", "rence"], document_words(["co-occurrence"])) == "co-occurrence"
    assert join_lines(["Figure 2-", "B shows"]) == "Figure 2- B shows"  # not a word break


def test_a_footnotes_mark_is_not_glued_to_its_first_word(shared_data, settings):
    """A footnote's superscript mark came out glued to its text ("4To illustrate why ..."): it is set apart, and text
    that only starts with digits is left as it is ("3x3 conv", "31st Conference")."""
    body = _extract(shared_data, "1706.03762", settings).body
    assert "4 To illustrate why the dot products get large" in body and "4To illustrate" not in body
    resnet = _extract(shared_data, "1512.03385", settings).body
    assert "1 http://image-net.org" in resnet and "3x3 conv" in resnet and "3 x3" not in resnet
    assert "1 There remains vigorous debate" in _extract(shared_data, "1410.5401", settings).body


def test_a_footnote_mark_after_its_sentence_is_left_out(shared_data, settings):
    """A mark set as a superscript after the sentence it notes came out glued to its punctuation ("... to train.1" at
    the end of ViT's abstract, "(NSP).5 Despite its simplicity"): it is left out; numbers after a number or an
    abbreviation, and subscripts after a comma, are not marks."""
    vit = _extract(shared_data, "2010.11929", settings)
    assert vit.abstract.endswith("substantially fewer computational resources to train.")
    bert = _extract(shared_data, "1810.04805", settings).body
    assert "next sentence prediction (NSP). Despite its simplicity" in bert and "(NSP).5" not in bert
    assert "(Bentivogli et al., 2009).\n\nWNLI" in bert  # the mark ended its paragraph
    assert not re.search(r"[a-z)][.;:!?]\d{1,2}(\s+[A-Z]|$)", bert)
    bahdanau = _extract(shared_data, "1409.0473", settings).body
    assert "Axelrod et al. (2011). We do not use" in bahdanau and "αt,1" in bahdanau
    for kept in ("in Table 1.2 We", "see Sect.4 Then", "shown in Fig.3 The", "models,3 which", "the end.123"):
        assert join_lines([kept]) == kept
    assert join_lines(["to train.1"]) == "to train." and join_lines(["(2011).5 We do"]) == "(2011). We do"


def test_the_first_pages_notes_on_authors_and_venue_are_front_matter(shared_data, settings):
    """The first page's footnotes about the authors and the venue ("∗CIFAR Senior Fellow", "†Work performed while at
    Google Brain", "31st Conference on Neural Information Processing Systems") were body passages, searchable and shown
    mid-sentence between pages 1 and 2; they are front matter now. A numbered note on the first page is the paper's
    own text and stays."""
    def roles(paper_id: str) -> tuple[str, str]:
        ex = _extract(shared_data, paper_id, settings)
        return (" ".join(c["text"] for c in ex.chunks if c["role"] in SEARCHABLE_ROLES),
                " ".join(c["text"] for c in ex.chunks if c["role"] == "front"))

    body, front = roles("1706.03762")
    for note in ("Equal contribution. Listing order is random", "Work performed while at Google Brain",
                 "31st Conference on Neural Information Processing Systems"):
        assert note in front and note not in body, note
    body, front = roles("1409.0473")
    assert "CIFAR Senior Fellow" in front and "CIFAR Senior Fellow" not in body
    assert "target words. The most important distinguishing feature" in " ".join(body.split())  # no note between
    for paper_id, kept in (("1508.04025", "1 All our code and models are publicly available"),
                           ("2010.11929", "1 Fine-tuning code and pre-trained models are available")):
        assert kept in roles(paper_id)[0], paper_id


def test_chunk_spans_pure_function_on_plain_text(settings):
    tok = load_tokenizer(tokenizer_path(settings))
    words = " ".join(f"word{i}." if i % 13 == 12 else f"word{i}" for i in range(900))
    body = "Intro heading\n\n" + words + "\n\n" + "Short tail section."
    a = len("Intro heading")
    segs = [Segment(0, a, "Intro"), Segment(a + 2, a + 2 + len(words), "Intro"),
            Segment(a + 4 + len(words), len(body), "Tail")]
    spans = chunk_spans(body, segs, tok, max_tokens=64, overlap=8, min_tokens=5)
    assert spans[0].char_start == 0  # the short heading segment was joined to the next
    assert all(s.n_tokens <= 64 for s in spans)
    assert spans[-1].char_end == len(body)  # the short tail joined the previous segment
    assert spans == chunk_spans(body, segs, tok, max_tokens=64, overlap=8, min_tokens=5)  # deterministic
