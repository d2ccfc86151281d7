"""Search filters (year range, categories, authors) and safe LanceDB where-clauses.

User values never reach a query string: they are validated here, then matched against the
snapshot's paper metadata with pyarrow compute (values passed as arguments). The only
where-clause sent to LanceDB is ``paper_id IN (...)`` built from the snapshot's own ids, each
rendered by :func:`sql_literal` (single quotes doubled, control characters refused).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.errors import UserError
from pipeline.query.author_names import name_parts, names_match, search_word

MAX_FILTER_VALUE = 200


@dataclass(frozen=True)
class Filters:
    year_from: int | None = None
    year_to: int | None = None
    categories: list[str] = field(default_factory=list)
    authors: list[str] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.year_from is not None or self.year_to is not None or bool(self.categories) or bool(self.authors)

    def validated(self) -> "Filters":
        """Checked copy: integer years in a sane range, short printable strings."""
        years: list[int | None] = []
        for name, y in (("year-from", self.year_from), ("year-to", self.year_to)):
            if y is None:
                years.append(None)
                continue
            try:
                y = int(y)
            except (TypeError, ValueError):
                raise UserError(f"--{name} must be a year, got {y!r}") from None
            if not 1000 <= y <= 3000:
                raise UserError(f"--{name} must be a year between 1000 and 3000, got {y}")
            years.append(y)
        if years[0] is not None and years[1] is not None and years[0] > years[1]:
            raise UserError(f"--year-from {years[0]} is after --year-to {years[1]}")
        return Filters(years[0], years[1], _clean("category", self.categories), _clean("author", self.authors))

    def to_dict(self) -> dict:
        return {"year_from": self.year_from, "year_to": self.year_to, "categories": list(self.categories), "authors": list(self.authors)}


def _clean(name: str, values: Iterable[str] | None) -> list[str]:
    out = []
    for v in values or []:
        if not isinstance(v, str):
            raise UserError(f"--{name} must be text, got {v!r}")
        v = v.strip()
        if not v:
            continue
        if len(v) > MAX_FILTER_VALUE or any(ord(c) < 32 for c in v):
            raise UserError(f"--{name} value is too long or contains control characters")
        out.append(v)
    return out


def sql_literal(value: str | int | float) -> str:
    """A SQL literal for a LanceDB (DataFusion) where-clause: numbers as numbers, strings quoted."""
    if isinstance(value, bool):
        raise TypeError("booleans are not filter values")
    if isinstance(value, (int, float)):
        return repr(value)
    if not isinstance(value, str):
        raise TypeError(f"cannot render {type(value).__name__} as a SQL literal")
    if any(ord(c) < 32 for c in value):
        raise UserError("filter value contains control characters")
    return "'" + value.replace("'", "''") + "'"


def in_clause(column: str, values: Iterable[str]) -> str:
    """``column IN ('a', 'b')`` over our own ids; ``column`` must be a plain identifier."""
    if not column.isidentifier():
        raise ValueError(f"not a column name: {column!r}")
    vals = list(values)
    if not vals:
        return "false"
    return f"{column} IN ({', '.join(sql_literal(v) for v in vals)})"


def mask(meta: pa.Table, f: Filters) -> pa.Array:
    """Boolean mask over the snapshot's paper metadata (columns year, categories, primary_category, authors)."""
    n = meta.num_rows
    m = pa.array([True] * n)
    if f.year_from is not None:
        m = pc.and_kleene(m, pc.fill_null(pc.greater_equal(meta["year"], f.year_from), False))
    if f.year_to is not None:
        m = pc.and_kleene(m, pc.fill_null(pc.less_equal(meta["year"], f.year_to), False))
    if f.categories:
        wanted = pa.array([c.lower() for c in f.categories])
        cats = meta["categories"]
        flat = pc.utf8_lower(pc.list_flatten(cats))
        parents = pc.list_parent_indices(cats)
        hit_rows = pc.filter(parents, pc.is_in(flat, value_set=wanted))
        cat_mask = pc.is_in(pa.array(range(n)), value_set=hit_rows) if len(hit_rows) else pa.array([False] * n)
        if "primary_category" in meta.column_names:
            cat_mask = pc.or_kleene(cat_mask, pc.fill_null(pc.is_in(pc.utf8_lower(meta["primary_category"]), value_set=wanted), False))
        m = pc.and_kleene(m, cat_mask)
    if f.authors:
        authors = meta["authors"]
        flat = pc.utf8_lower(pc.list_flatten(authors))
        parents = pc.list_parent_indices(authors)
        any_hit = pa.array([False] * len(flat))
        keys = _name_keys(flat)
        for a in f.authors:  # substring match, the value is a function argument (no pattern syntax)
            any_hit = pc.or_kleene(any_hit, pc.fill_null(pc.match_substring(flat, a.lower()), False))
            key = "".join(name_parts(a))  # accents and punctuation aside: "muller" finds "Jürgen Müller"
            if key:
                any_hit = pc.or_kleene(any_hit, pc.fill_null(pc.match_substring(keys, key), False))
            any_hit = pc.or_kleene(any_hit, _named_in_part(flat, keys, a))
        hit_rows = pc.filter(parents, any_hit)
        m = pc.and_kleene(m, pc.is_in(pa.array(range(n)), value_set=hit_rows) if len(hit_rows) else pa.array([False] * n))
    return pc.fill_null(m, False)


def _name_keys(flat: pa.Array) -> pa.Array:
    """The author names ``flat`` (lower case) as :func:`pipeline.query.author_names.name_parts` reads them, joined:
    accents stripped, letters and digits only."""
    return pc.replace_substring_regex(pc.utf8_normalize(flat, "NFKD"), "[^a-z0-9]", "")


def _named_in_part(flat: pa.Array, keys: pa.Array, typed: str) -> pa.Array:
    """Which of the author names ``flat`` (lower case) the name ``typed`` names in part: initials and a surname in
    either order, "A. Vaswani" or "Vaswani, A." for "Ashish Vaswani" (:func:`pipeline.query.author_names.names_match`;
    checked on the names holding its longest word only)."""
    word = search_word(typed)
    if word is None:  # one word: the substring match above is the whole test
        return pa.array([False] * len(flat))
    near = np.flatnonzero(pc.fill_null(pc.match_substring(keys, word), False).to_numpy(zero_copy_only=False))
    named = [int(i) for i, printed in zip(near.tolist(), pc.take(flat, pa.array(near)).to_pylist())
             if printed and names_match(typed, printed)]
    return pc.is_in(pa.array(range(len(flat))), value_set=pa.array(named, pa.int64()))
