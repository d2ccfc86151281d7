"""Text from outside (titles, authors, passages, file names) made safe to print on a terminal.

A title is anyone's text and a file name anyone's bytes: ESC starts the sequences that recolour a terminal, move its
cursor, clear it or set its window title (``\\x1b]0;...\\x07``), a carriage return overwrites the line, NUL and DEL
are nothing a reader wants, the bidirectional overrides (U+202E) make ``exe.pdf`` read as ``fdp.exe``, and a file
name whose bytes are not UTF-8 holds lone surrogates that cannot be printed at all. :func:`printable` writes each of
these as an escape (``\\x1b``, ``\\r``, ``\\u202e``, ``\\xff`` for the byte of a file name), so what is printed shows what
the text holds and does nothing else; with ``one_line`` line breaks and tabs too, so a file name with a newline
cannot split a one-line message. Any other character, accented or not, is printed as it is. Documents (JSON, CSV,
BibTeX) are left alone: JSON escapes control characters itself, and the others are data.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL and the C1 controls, the bidirectional embeddings, overrides and isolates,
# surrogates (a lone one: an undecodable byte of a file name, as Python's file system encoding keeps it)
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_UNSAFE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_SURROGATES = re.compile("[\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(m: re.Match) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    n = ord(c)
    if 0xDC80 <= n <= 0xDCFF:  # a byte that is not UTF-8, kept by the file system encoding (surrogateescape)
        return f"\\x{n - 0xDC00:02x}"
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def storable(text: str) -> str:
    """``text`` as valid UTF-8 text, for a database or a JSON file: a file name's undecodable bytes (lone surrogates,
    as Python keeps them) written as ``\\xff``, any other lone surrogate as ``\\ud800``; nothing else changes (pure)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return _SURROGATES.sub(_escape, text)


def printable(text: object, one_line: bool = False) -> str:
    """``text`` (any value, as ``str``) with the characters a terminal would act on written as escapes (see the
    module doc); ``one_line``: line breaks and tabs too (pure)."""
    s = text if isinstance(text, str) else str(text)
    return (_UNSAFE_LINE if one_line else _UNSAFE).sub(_escape, s)
