"""Names as people type them (a surname, initials, either order) matched to names as catalogs print them."""

import pytest

from pipeline.query.author_names import name_parts, names_match, short_byline, surname


def test_name_parts_fold_case_and_accents_and_cut_at_punctuation():
    assert name_parts("Perlis, A. J.") == ["perlis", "a", "j"]
    assert name_parts("Jürgen Schmidhuber") == ["jurgen", "schmidhuber"]
    assert name_parts("D.V. Shetty") == ["d", "v", "shetty"]
    assert name_parts("Ord-Smith, R. J.") == ["ord", "smith", "r", "j"]
    assert name_parts("O'Reilly, T.") == name_parts("O’Reilly, T.") == ["oreilly", "t"]
    assert name_parts("  ") == []


@pytest.mark.parametrize("typed, printed", [
    ("Vaswani", "Ashish Vaswani"),            # a surname alone
    ("A. Vaswani", "Ashish Vaswani"),         # an initial for a given name
    ("Vaswani, A.", "Ashish Vaswani"),        # the citation order
    ("Vaswani A", "Ashish Vaswani"),
    ("Alan Perlis", "Perlis, A. J."),         # a given name for a printed initial
    ("A. J. Perlis", "Perlis, A. J."),
    ("Perlis, A.", "Perlis, A. J."),          # the first initial only
    ("Donald E. Knuth", "Knuth, D. E."),
    ("schmidhuber", "Jürgen Schmidhuber"),    # case and accents
    ("Jurgen Schmidhuber", "Jürgen Schmidhuber"),
    ("R. Smith", "Ord-Smith, R. J."),         # one part of a double surname
    ("H. Smith", "Smith Jr., H. J."),         # given names after the comma, the suffix before it
    ("Tim O'Reilly", "O'Reilly, T."),         # an apostrophe inside a surname
    ("Muller", "Jürgen Müller"),
])
def test_a_name_matches_its_printed_forms(typed, printed):
    assert names_match(typed, printed)


@pytest.mark.parametrize("typed, printed", [
    ("A. J. Perlis", "Perlis, J. A."),        # initials in another order
    ("Perlis, A.", "Perlis, J. A."),          # A. is his second initial, not his first
    ("J. Smith", "Smith Jr., H. J."),
    ("X. Vaswani", "Ashish Vaswani"),         # another initial
    ("A. J.", "Perlis, A. J."),               # initials alone name nobody
    ("Vaswan", "Ashish Vaswani"),             # a surname is matched whole
    ("Ashish Kumar Vaswani", "Ashish Vaswani"),  # more parts than the printed name has
    ("", "Ashish Vaswani"),
])
def test_a_name_does_not_match_another(typed, printed):
    assert not names_match(typed, printed)


@pytest.mark.parametrize("printed, last", [
    ("Ashish Vaswani", "Vaswani"),
    ("Perlis, A. J.", "Perlis"),
    ("Smith Jr., H. J.", "Smith"),
    ("Martin Luther King Jr.", "King"),
    ("van Merrienboer, B.", "van Merrienboer"),
    ("Łukasz Kaiser", "Kaiser"),
    ("Knuth", "Knuth"),
])
def test_the_surname_of_a_printed_name(printed, last):
    assert surname(printed) == last


def test_a_short_byline_names_the_authors_as_running_text_cites_them():
    assert short_byline(["Edsger W. Dijkstra"]) == "Dijkstra"
    assert short_byline(["Diederik P. Kingma", "Jimmy Lei Ba"]) == "Kingma & Ba"
    assert short_byline(["Ashish Vaswani", "Noam Shazeer", "Niki Parmar"]) == "Vaswani et al."
    assert short_byline(["Perlis, A. J.", " "]) == "Perlis" and short_byline([]) == ""
