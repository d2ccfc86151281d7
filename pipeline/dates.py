"""Days and dates as paperkb reads them: a day a user or Airflow gives (strict: a one-line error when it
is not one) and the date of a record's timestamp text (lenient: ``None`` when it has none)."""

from __future__ import annotations

import re
from datetime import date, datetime

from pipeline.errors import UserError


def parse_day(value: str | date | None, what: str = "date") -> date | None:
    """A day given as a date, a datetime (Airflow's data interval: its time part is dropped) or ISO text
    ``YYYY-MM-DD`` (a time part after it is dropped too); empty or ``None`` -> ``None``. Anything else is
    a ``UserError`` naming ``what`` (``--from``, a DAG param ...): arXiv's OAI-PMH works by day."""
    if value is None or str(value).strip() == "":
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    s = str(value).strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", s):
            return date.fromisoformat(s)
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}[T ].*", s):
            return datetime.fromisoformat(s.replace("Z", "+00:00")).date()
    except ValueError:
        pass
    raise UserError(f"{what} {s!r} is not a date: use YYYY-MM-DD")


def date_of(text: object) -> date | None:
    """The date at the start of a record's ISO date or timestamp text (``2017-06-12T17:57:34Z`` ->
    2017-06-12); ``None`` when the text is empty or does not start with a valid date."""
    if not text:
        return None
    try:
        return date.fromisoformat(str(text).strip()[:10])
    except ValueError:
        return None
