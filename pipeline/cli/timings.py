"""Where the time of one ``paperkb -v search`` went: the line it prints on stderr."""

from __future__ import annotations

import os
import time


def process_age_s() -> float | None:
    """Seconds since this process started (Linux: ``/proc``; None elsewhere): Python's own start-up and the
    imports before any of our code ran are part of what a one-shot command costs."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime, in clock ticks after boot
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


class Clock:
    """Phase durations in order: ``clock.lap("open")`` closes the phase that ran since the last lap."""

    def __init__(self, started_s: float | None = None):
        # the time already spent when the clock starts (process start-up and imports), as the first phase
        self.phases: list[tuple[str, float, str]] = []
        self._t = time.perf_counter()
        if started_s is not None:
            self.phases.append(("start+imports", started_s, ""))

    def lap(self, name: str, note: str = "") -> float:
        now = time.perf_counter()
        took, self._t = now - self._t, now
        self.phases.append((name, took, note))
        return took

    def lap_split(self, name: str, parts: list[tuple[str, float, str]], note: str = "") -> None:
        """Close a phase of which ``parts`` (name, seconds, note) were measured inside: they are listed first,
        and the rest of the phase under ``name``."""
        took = self.lap(name, note)
        self.phases.pop()
        inside = sum(s for _, s, _ in parts)
        self.phases.extend(parts)
        self.phases.append((name, max(0.0, took - inside), note))

    def line(self) -> str:
        """``timings: start+imports 410 ms · open 12 ms (...) · ... · total 905 ms``"""
        parts = [f"{n} {s * 1000:.0f} ms" + (f" ({note})" if note else "") for n, s, note in self.phases]
        return "timings: " + " · ".join(parts) + f" · total {sum(s for _, s, _ in self.phases) * 1000:.0f} ms"
