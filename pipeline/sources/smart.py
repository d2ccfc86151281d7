"""The SMART test-collection format (CISI, Cranfield, CACM documents and queries), pure parsing.

A file is a sequence of records; ``.I N`` starts record N and a line ``.X [rest]`` starts its field X.
The documents importer (:mod:`pipeline.sources.local_corpus`) and the query reader
(:mod:`pipeline.evaluation.qrels`) both read records with :func:`iter_smart_records`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterator

_FIELD_RE = re.compile(r"^\.([A-Z])(?:\s+(.*?))?\s*$")


@dataclass
class SmartRecord:
    """One ``.I`` record: ``docno`` and the lines of each field (``'T'``, ``'A'``, ``'W'`` ...)."""

    docno: str
    fields: dict[str, list[str]] = field(default_factory=dict)
    line: int = 0  # 1-based line of the ``.I`` marker, for rejects

    def text(self, name: str) -> str | None:
        lines = self.fields.get(name)
        if lines is None:
            return None
        t = " ".join(s.strip() for s in lines if s.strip())
        return t or None


def iter_smart_records(text: str) -> Iterator[SmartRecord]:
    """Split SMART text into records.

    A line ``.X [rest]`` starts field X (``rest``, if any, is its first line). A field marker that
    repeats inside a record continues the *current* field instead of restarting: CISI repeats
    ``.A`` once per author, and a few Cranfield records (240, 576, 578) have stray ``.A``/``.B``/
    ``.W`` lines inside their abstracts, which belong to the abstract. CRLF line ends are accepted.
    """
    rec: SmartRecord | None = None
    current: str | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        m = _FIELD_RE.match(line)
        if m and m.group(1) == "I":
            if rec is not None:
                yield rec
            rec = SmartRecord(docno=(m.group(2) or "").strip(), line=lineno)
            current = None
            continue
        if rec is None:
            continue  # text before the first record
        if m and m.group(1) not in rec.fields:
            current = m.group(1)
            rec.fields[current] = [m.group(2)] if m.group(2) else []
            continue
        if current is None:
            continue
        if m:  # repeated marker: its text (if any) continues the current field
            if m.group(2):
                rec.fields[current].append(m.group(2))
            continue
        rec.fields[current].append(line)
    if rec is not None:
        yield rec


def normalise_docno(s: str) -> str:
    """Document/query numbers as text without leading zeros (``'001'`` -> ``'1'``)."""
    s = s.strip()
    return str(int(s)) if s.isdigit() else s
