"""Errors that reach the user as one line and exit code 2 (see ``pipeline.cli.main``)."""


class UserError(Exception):
    """Bad input or a situation the user can fix: printed as one line, exit code 2."""


class UnknownPaper(UserError):
    """A paper id that the warehouse or snapshot does not know."""


class AmbiguousName(UnknownPaper):
    """A name that several authors answer to: ``candidates`` are (name as printed, papers), most papers first."""

    def __init__(self, message: str, candidates: list[tuple[str, int]]):
        super().__init__(message)
        self.candidates = candidates


class CitedWork(UnknownPaper):
    """An id that names a work the corpus papers cite, not a corpus paper: ``work_id`` is that work."""

    def __init__(self, message: str, work_id: str):
        super().__init__(message)
        self.work_id = work_id


class MissingExtra(UserError):
    """What was asked needs packages of an install profile (extra) that is not installed, e.g. encoding the queries
    of a snapshot without its query encoder on a base install: one line naming the extra (exit code 2; a server
    answers 503, the client cannot fix it)."""

    def __init__(self, message: str, extra: str):
        self.extra = extra
        super().__init__(message)

    def __reduce__(self):
        return (type(self), (str(self), self.extra))


class InvalidSetting(UserError):
    """A setting (environment variable ``PAPERKB_*``, or the command-line flag that overrides it) whose
    value is not what it must be: one line naming the variable and what is expected (exit code 2)."""

    def __init__(self, message: str, settings: list[str] | None = None):
        self.settings = list(settings or [])
        super().__init__(message)

    def __reduce__(self):
        return (type(self), (str(self), self.settings))


class StepFailed(Exception):
    """A pipeline step stopped cleanly (e.g. too many consecutive HTTP failures).

    Everything fetched before the stop is kept; the watermark has not moved past it."""


REPLAY_HINT = "or work without the network: --replay (make run REPLAY=1)"


class ServiceUnreachable(UserError):
    """An outside service could not be reached at all: its host name does not resolve, or nothing
    answers on its port (connection refused, no route). Asking again will not help, so the step stops at
    once (no retries, in the clients or in Airflow) with one line naming the URL, the setting that holds
    it (``setting``; ``None`` for hosts no setting names, e.g. open-access PDF links) and the way to
    work without the network.

    Timeouts, cut connections, 429 and 5xx are *not* this: they are retried (see ``pipeline.sources.net``).
    """

    def __init__(self, service: str, url: str, setting: str | None, reason: str):
        self.service, self.url, self.setting, self.reason = service, url, setting, reason
        check = f"check the network or the setting {setting}" if setting else "check the network"
        super().__init__(f"cannot reach {service} at {url} ({reason}): {check}, {REPLAY_HINT}")

    def __reduce__(self):  # picklable across processes despite the keyword-rich __init__
        return (type(self), (self.service, self.url, self.setting, self.reason))


def find_unreachable(text: str) -> str | None:
    """The last :class:`ServiceUnreachable` message in ``text`` (e.g. an Airflow log), or ``None``."""
    import re

    found = re.findall(r"(cannot reach .+?, " + re.escape(REPLAY_HINT) + ")", text)
    return found[-1] if found else None


class DamagedSnapshot(UserError):
    """A snapshot that cannot be read as published: its manifest is unreadable or of the wrong shape, a
    file it lists is missing or has another size, or an index the search needs is not there (see
    ``pipeline.snapshots.check``). Also raised when a snapshot a reader holds was deleted from disk."""

    def __init__(self, snapshot_id: str, problems: list[str], hint: str | None = None):
        self.snapshot_id, self.problems, self.hint = snapshot_id, list(problems), hint
        more = f" (+{len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        hint = hint if hint is not None else (
            f"; `paperkb snapshots verify {snapshot_id}` checks it in full, `paperkb snapshots rollback ID` "
            "switches to an intact one")
        super().__init__(f"snapshot {snapshot_id} is damaged: {self.problems[0] if self.problems else '?'}{more}{hint}")

    def __reduce__(self):
        return (type(self), (self.snapshot_id, self.problems, self.hint))
