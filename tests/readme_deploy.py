"""The deployment guide (``docs/deployment.md``, linked from the README) as the script of the deployment
test, so the two cannot drift.

The guide "Celery deployment on several hosts" holds fenced blocks with the info string
``bash deploy=NAME``. :func:`blocks` reads them (in the guide's order), and a :class:`Shell` runs them the way
a user pastes them into one ``bash`` session as root: the environment a block exports carries over to
the next block; a command that ends with ``&`` (a service) is started as its own process (its own
session, its output in ``LOG_DIR/NAME.log``) with the environment at that point, and kept in
``Shell.procs`` so the test can signal and stop it.

The test substitutes nothing in the commands: it only sets, before the first block, the variables the
guide's ``deploy=variables`` block reads (ports, folders, host addresses, secrets).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "deployment.md"
SECTION = "# Celery deployment on several hosts (no Docker)"
BLOCK = re.compile(r"^```bash deploy=([\w-]+)[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)


def section(guide: Path = GUIDE) -> str:
    """The guide's deployment steps: from its heading to the next heading of level 1 to 3."""
    text = guide.read_text(encoding="utf-8")
    start = text.index(SECTION)
    nxt = re.search(r"^#{1,3} ", text[start + len(SECTION):], re.M)
    return text[start:start + len(SECTION) + nxt.start()] if nxt else text[start:]


def blocks(guide: Path = GUIDE) -> dict[str, str]:
    """``{name: commands}`` of the section's ``bash deploy=NAME`` blocks, in the guide's order (names are unique)."""
    found = BLOCK.findall(section(guide))
    names = [name for name, _ in found]
    assert len(names) == len(set(names)), f"a deploy block name is used twice in the guide: {names}"
    return dict(found)


def commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, blank and comment-only lines dropped."""
    out: list[str] = []
    pending = ""
    for line in block.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(line.strip())
    return out


def background(command: str) -> str | None:
    """``cmd &`` -> ``cmd`` (a service the block starts); ``None`` for a command that runs to its end."""
    body = re.sub(r"\s+#.*$", "", command).rstrip()
    return body[:-1].rstrip() if body.endswith("&") and not body.endswith("&&") else None


def process_name(command: str) -> str:
    """A name for a service command: ``worker-NAME`` for ``celery worker -H NAME@%h``, else its subcommand
    (``api-server``, ``scheduler``, ``replay-server``, ...)."""
    if m := re.search(r"(?:-H|--celery-hostname)[ =](\S+?)@", command):
        return f"worker-{m.group(1)}"
    words = [w for w in shlex.split(command) if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w)]
    return words[1] if len(words) > 1 else words[0]


@dataclass
class Shell:
    """One root ``bash`` session over the guide's blocks (see the module doc)."""

    env: dict[str, str]
    log_dir: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def run(self, name: str, wrap: Callable[[str, str], list[str]] | None = None, timeout: float = 1800,
            guide: Path = GUIDE) -> str:
        """Run the block ``name``; returns what its commands printed. ``wrap(name, command)`` may give the
        argv that starts a service (e.g. in its own UTS namespace); default ``bash -c COMMAND``."""
        out: list[str] = []
        batch: list[str] = []
        for command in commands(blocks(guide)[name]):
            service = background(command)
            if service is None:
                batch.append(command)
                continue
            if batch:
                out.append(self._run(name, batch, timeout))
                batch = []
            self.start(service, wrap)
        if batch:
            out.append(self._run(name, batch, timeout))
        return "".join(out)

    def _run(self, name: str, lines: list[str], timeout: float) -> str:
        with tempfile.NamedTemporaryFile(prefix="env-", dir=self.log_dir, delete=False) as tmp:
            env_file = Path(tmp.name)
        script = "set -eo pipefail\n" + "\n".join(lines) + f"\nenv -0 > {shlex.quote(str(env_file))}\n"
        try:
            done = subprocess.run(["bash", "-c", script], env=self.env, capture_output=True, text=True,
                                  timeout=timeout, cwd=self.log_dir)
            if done.returncode != 0:
                raise RuntimeError(f"guide block deploy={name} failed ({done.returncode}):\n"
                                   + "\n".join(lines) + f"\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}")
            env = dict(item.split("=", 1) for item in env_file.read_text().split("\0") if "=" in item)
        finally:
            env_file.unlink(missing_ok=True)
        for key in ("_", "SHLVL", "OLDPWD"):
            env.pop(key, None)
        self.env = env
        return done.stdout

    def start(self, command: str, wrap: Callable[[str, str], list[str]] | None = None) -> subprocess.Popen:
        name = process_name(command)
        argv = wrap(name, command) if wrap is not None else ["bash", "-c", command]
        log = open(self.log_dir / f"{name}.log", "ab")
        proc = subprocess.Popen(argv, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                cwd=self.log_dir)
        log.close()
        self.procs[name] = proc
        return proc


def missing(names: list[str], guide: Path = GUIDE) -> list[str]:
    """The guide's blocks not in ``names`` (what a test that claims to run them all would leave out)."""
    return [n for n in blocks(guide) if n not in names]

