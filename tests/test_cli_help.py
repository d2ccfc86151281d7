"""``paperkb --help`` and every command's ``--help`` wrap their prose to the terminal: no line of a description
breaks before the line is full (typer keeps a docstring's own line breaks, which showed as ragged lines)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.cli import app
from pipeline.cli.root import one_line_paragraphs

REPO_ROOT = Path(__file__).resolve().parents[1]


def _commands(typer_app, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    """``(words, command info)`` of every command, the sub-apps' included."""
    out = [((*prefix, info.name or info.callback.__name__.replace("_", "-")), info) for info in typer_app.registered_commands]
    for group in typer_app.registered_groups:
        out += _commands(group.typer_instance, (*prefix, group.name))
    return out


def ragged(text: str) -> list[str]:
    """Lines of ``text`` (rich's help: plain lines and box rows ``│ ... │``) that end while the next line's first
    word, continuing the same paragraph or cell, would still have fitted: a line break that wrapping did not make."""
    lines = text.splitlines()
    width = max((len(line.rstrip()) for line in lines), default=0)
    found = []
    for line, nxt in zip(lines, lines[1:]):
        boxed = line.startswith("│") and line.rstrip().endswith("│")
        if boxed != (nxt.startswith("│") and nxt.rstrip().endswith("│")):
            continue
        a, b = (line.rstrip()[1:-1], nxt.rstrip()[1:-1]) if boxed else (line.rstrip(), nxt.rstrip())
        if not a.strip() or not b.strip():
            continue
        start_a, column = len(a) - len(a.lstrip()), len(b) - len(b.lstrip())
        # a continuation starts where a's last cell starts: further right than a row's first cell in a box
        # (a new row starts at the first cell), at a's own indentation in plain text
        if (boxed and column <= start_a) or (not boxed and column != start_a) or len(a) <= column:
            continue
        if a[column - 1] != " " or a[column] == " ":  # a has no cell starting in that column
            continue
        if b.strip().startswith(("[", "*", "-")):  # [default: ...], [required], the next option
            continue
        room = (len(a) - len(a.rstrip()) if boxed else width - len(a)) - 1
        if len(b.strip().split(" ")[0]) < room:
            found.append(f"{a.strip()!r} / {b.strip()!r}")
    return found


def test_the_detector():
    wrapped = " Usage: x\n\n one two three four five six seven eight nine ten eleven twelve\n thirteen\n"
    assert ragged(wrapped) == []
    assert ragged(" one two\n three four five six seven eight nine ten eleven twelve thirteen\n") != []
    assert ragged("│ ask   evidence; with an                       │\n│       LLM configured, an answer ...         │\n")
    assert ragged("│ ask   evidence; with an                       │\n│ show  One paper                             │\n") == []


def test_every_help_text_has_one_line_per_paragraph():
    assert one_line_paragraphs("First line\n    goes on.\n\n    Second\n    paragraph.\n") == (
        "First line goes on.\n\nSecond paragraph.")
    for words, info in _commands(app):
        assert info.help and "\n" not in info.help.replace("\n\n", ""), words


@pytest.mark.parametrize("width", [80, 200])
def test_help_texts_are_not_ragged(width):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PAPERKB_")}
    env.update(PYTHONPATH=str(REPO_ROOT), COLUMNS=str(width))
    script = ("import sys\nfrom pipeline.cli import main\nfor words in sys.argv[1:]:\n"
              "    print('=== ' + words, flush=True)\n    main([*words.split(), '--help'])\n")
    every = [""] + [" ".join(words) for words, _ in _commands(app)]
    res = subprocess.run([sys.executable, "-c", script, *every], capture_output=True, text=True, env=env,
                         cwd=REPO_ROOT, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.count("=== ") == len(every) and "Usage: paperkb sql" in res.stdout
    assert ragged(res.stdout) == []
    assert max(len(line) for line in res.stdout.splitlines()) <= width
