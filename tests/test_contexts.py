"""Citation contexts (``pipeline.query.contexts``, pure): an entry's in-text marker, the sentences of a citing
paper's body that carry it. On the recorded PDFs: ``tests/test_reading.py``."""

from __future__ import annotations

import pytest

from pipeline.query.contexts import (Entry, body_of, cited_at, cited_numbers, citing_text, contexts, fold,
                                     markers_in, number_of, sentences)


def test_the_number_of_an_entry_in_a_numbered_list():
    assert number_of("[35] Ilya Sutskever, Oriol Vinyals, and Quoc VV Le. Sequence to sequence learning") == 35
    assert number_of("1. Ciresan, D.C., Gambardella, L.M.: Deep neural networks segment") == 1
    assert number_of("Axelrod, A., He, X., and Gao, J. (2011). Domain adaptation") is None
    assert number_of("[Bahdanau et al.2015] D. Bahdanau, K. Cho, and Y. Bengio. 2015.") is None
    assert number_of("2014. A title that starts with a year") is None


def test_the_numbers_a_sentence_cites():
    assert cited_numbers("as in [35, 2, 5] and [12]") == {35, 2, 5, 12}
    assert cited_numbers("methods [33–35] and [7-8]") == {33, 34, 35, 7, 8}
    assert cited_numbers("the interval [0, 1] of a model [3]") == {3}  # a bracket holding 0 is an interval
    assert cited_numbers("a weight in [1, 2] and [1–3]") == {1, 2, 3}  # other intervals read as citations: kept
    assert cited_numbers("no citation (2017) here, nor [a]") == set()


SENTS = [
    ("Recurrent models [35, 2] read the input in order.", 1, "1 Introduction"),
    ("Sutskever et al. (2014) proposed an encoder and a decoder.", 2, "2 Background"),
    ("Both follow (Cho et al., 2014a; Sutskever et al., 2014), as do we.", 2, "2 Background"),
    ("Cho et al. (2014b) showed the limits of a fixed-length vector.", 3, "2 Background"),
    ("Adam (Kingma & Ba, 2015) and natural gradient (Amari, 1998) adapt the step.", 4, "3 Model"),
    ("Attention maps follow H\u00b4enaff et al. (2020), and Abnar and Zuidema (2020).", 5, "4 Results"),
    ("GPT models language (Radford et al., 2018; 2019; Brown et al., 2020).", 6, "5 Related work"),
]


@pytest.mark.parametrize("raw, authors, year, found", [
    ("[35] Ilya Sutskever, Oriol Vinyals, and Quoc VV Le. Sequence to sequence learning.", ["Ilya Sutskever"], 2014, [0]),
    ("Sutskever, I., Vinyals, O., and Le, Q. (2014). Sequence to sequence learning.",
     ["I. Sutskever", "O. Vinyals", "Q. Le"], 2014, [1, 2]),
    ("Cho, K., van Merrienboer, B., Gulcehre, C. (2014a). Learning phrase representations.",
     ["K. Cho", "B. van Merrienboer", "C. Gulcehre"], 2014, [2]),
    ("Cho, K., van Merrienboer, B., Bahdanau, D. (2014b). On the properties.",
     ["K. Cho", "B. van Merrienboer", "D. Bahdanau"], 2014, [3]),
    ("Diederik P. Kingma and Jimmy Ba. Adam: A method for stochastic optimization. In ICLR, 2015.",
     ["Diederik P. Kingma", "Jimmy Ba"], 2015, [4]),
    ("Amari, Shun-Ichi. Natural gradient works efficiently in learning. 1998.", ["Shun-Ichi Amari"], 1998, [4]),
    ("Olivier J. H\u00e9naff, Aravind Srinivas, and Jeffrey De Fauw. Data-efficient image recognition. 2020.",
     ["Olivier J. H\u00e9naff", "Aravind Srinivas", "Jeffrey De Fauw"], 2020, [5]),  # accent printed apart
    ("Samira Abnar and Willem Zuidema. Quantifying attention flow in transformers. In ACL, 2020.",
     ["Samira Abnar", "Willem Zuidema"], 2020, [5]),
    ("Alec Radford, Jeff Wu, Rewon Child. Language models are unsupervised multitask learners. 2019.",
     ["Alec Radford", "Jeff Wu", "Rewon Child"], 2019, [6]),  # after the same authors' 2018
    ("Tom Brown, Benjamin Mann, Nick Ryder. Language models are few-shot learners. 2020.",
     ["Tom Brown", "Benjamin Mann", "Nick Ryder"], 2020, [6]),
    ("Alec Radford, Karthik Narasimhan. Improving language understanding. 2017.", ["Alec Radford", "K. Narasimhan"],
     2017, []),
    ("Sutskever, I. (2013). Training recurrent neural networks. PhD thesis.", ["I. Sutskever"], 2013, []),
    ("Kingma, D. (2015). A single-author paper of that year.", ["D. Kingma"], 2015, []),  # "Kingma & Ba" is not his
    ("An entry no parser read.", [], None, []),
])
def test_the_sentences_that_cite_an_entry(raw, authors, year, found):
    text = citing_text(SENTS)
    got = contexts(text, Entry(raw, tuple(authors), year))
    assert [c.text for c in got] == [SENTS[i][0] for i in found]
    for c in got:  # the marker as printed, accents and all
        marked = c.text[c.marker[0]:c.marker[1]]
        assert marked.startswith(("[", "(")) or marked.startswith(authors[0].split()[-1][:1]), marked
        assert (str(year) in marked) or marked.startswith("["), marked
    assert [(c.page, c.section) for c in got] == [SENTS[i][1:] for i in found]


def test_at_most_the_first_few_sentences_long_ones_cut_around_the_marker():
    many = [(f"Sentence {i} cites [4] at length{' and more' * (60 if i == 0 else 0)}.", i + 1, None) for i in range(5)]
    got = contexts(citing_text(many), Entry("[4] A. Author. A title. 2001.", ("A. Author",), 2001), limit=3)
    assert [c.page for c in got] == [1, 2, 3] and got[0].text.endswith(" \u2026") and len(got[0].text) <= 402
    assert "[4]" in got[0].text and all(c.text[c.marker[0]:c.marker[1]] == "[4]" for c in got)
    assert len(cited_at(citing_text(many), Entry("[4] A. Author. A title. 2001.", ("A. Author",), 2001))) == 5
    late = [("Words " * 150 + "as Kingma & Ba (2015) found, " + "and so on " * 40 + "done.", 7, None)]
    cut = contexts(citing_text(late), Entry("Kingma, D. and Ba, J. (2015). Adam.", ("D. Kingma", "J. Ba"), 2015))[0].text
    assert cut.startswith("\u2026 Words") and cut.endswith(" \u2026") and "Kingma & Ba (2015)" in cut
    found = contexts(citing_text(late), Entry("Kingma, D. and Ba, J. (2015). Adam.", ("D. Kingma", "J. Ba"), 2015))[0]
    assert found.text[found.marker[0]:found.marker[1]] == "Kingma & Ba (2015)"
    assert len(cut) <= 404


def test_the_body_is_rebuilt_from_overlapping_passages_and_only_body_sentences_count():
    body = "1 Intro\n\nWe build on [2]. It works\n\nacross a page.\n\nReferences\n\n[2] A. B. Title. 2001."
    refs = body.index("References")
    works = body.index("It works")
    chunks = [(0, works + 2, body[:works + 2]), (works, refs - 2, body[works:refs - 2]), (refs, len(body), body[refs:])]
    assert body_of(chunks) == body[:refs - 2] + "  " + body[refs:]  # the blank lines between sections: blanks
    spans = [(0, works + 2, "body", 1, "1 Intro"), (works, refs - 2, "body", 2, "1 Intro"),
             (refs, len(body), "references", 3, "References")]
    sents = sentences(body_of(chunks), spans)
    # a heading ends at its blank line, a page break inside a sentence does not; the reference list is no context
    assert [s[0] for s in sents] == ["1 Intro", "We build on [2].", "It works across a page."]
    assert sents[2][1] == 2  # a heading is not part of the sentence after it
    found = contexts(citing_text(sents), Entry("[2] A. B. Title. 2001.", ("A. B.",), 2001))
    assert [(c.text, c.page) for c in found] == [("We build on [2].", 1)]


def test_fold_leaves_accents_out():
    assert fold("H\u00b4enaff, Veli\u010dkovi\u0107, J\u00fcrgen") == "Henaff, Velickovic, Jurgen"


def test_the_citations_in_a_passage_name_their_entries():
    numbered = [Entry("[1] J. Ba. Layer normalization. 2016.", ("J. Ba",), 2016),
                Entry("[2] D. Bahdanau. Neural machine translation. 2014.", ("D. Bahdanau",), 2014),
                Entry("[11] K. He. Deep residual learning. 2016.", ("K. He",), 2016)]
    text = "a residual connection [11] around each sub-layer, then layer normalization [1]; see [1, 2] and [0, 1]."
    assert [(text[a:b], cited) for a, b, cited in markers_in(text, numbered)] == [("[11]", [2]), ("[1]", [0]),
                                                                                   ("[1, 2]", [0, 1])]
    author_year = [Entry("Cho, K. et al. (2014a). Learning phrase representations.", ("K. Cho", "B. van Merrienboer",
                                                                                      "C. Gulcehre"), 2014),
                   Entry("Kingma, D. and Ba, J. (2015). Adam.", ("D. Kingma", "J. Ba"), 2015),
                   Entry("H\u00e9naff, O. J. et al. (2020). Data-efficient recognition.", ("O. J. H\u00e9naff", "A. Srinivas",
                                                                                         "J. De Fauw"), 2020)]
    text = "Encoders (Cho et al., 2014a; Cho et al., 2014b) and Adam (Kingma & Ba, 2015), as H\u00b4enaff et al. (2020) did."
    assert [(text[a:b], cited) for a, b, cited in markers_in(text, author_year)] == [
        ("Cho et al., 2014a", [0]), ("Kingma & Ba, 2015", [1]), ("H\u00b4enaff et al. (2020)", [2])]
    assert markers_in("No citation here (at all).", author_year) == [] and markers_in("", numbered) == []
