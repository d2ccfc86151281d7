"""One decision shared by every HTTP client (arXiv, Semantic Scholar, PDFs): is a failed request
*unreachable* -- stop the step now -- or *transient* -- worth another try?

Unreachable (:func:`unreachable_reason` returns why; the client raises
:class:`~pipeline.errors.ServiceUnreachable`):

- the host name does not resolve (``socket.gaierror``, urllib3 ``NameResolutionError``): no network,
  no DNS, or a typo in the URL setting;
- the connection is refused (``ConnectionRefusedError``): nothing listens on that host and port;
- the network or host is unreachable (``ENETUNREACH``, ``EHOSTUNREACH``): no route, e.g. no network.

Transient (``None``; the client retries with its backoff as before): timeouts (connect or read), a
connection reset or cut mid-answer, and HTTP 429/5xx (decided from the status, not here).
"""

from __future__ import annotations

import errno
import socket

import requests

from pipeline.errors import ServiceUnreachable

__all__ = ["unreachable_reason", "raise_if_unreachable", "ServiceUnreachable"]

_NO_ROUTE = {errno.ENETUNREACH: "the network is unreachable", errno.EHOSTUNREACH: "no route to the host"}


def _causes(exc: BaseException):
    """``exc`` and everything it wraps: ``__cause__``/``__context__``, urllib3's ``reason`` and
    exceptions passed as arguments (requests wraps urllib3's ``MaxRetryError`` that way)."""
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        nested = [e.__cause__, e.__context__, getattr(e, "reason", None), *getattr(e, "args", ())]
        stack.extend(x for x in reversed(nested) if isinstance(x, BaseException))


def unreachable_reason(exc: BaseException) -> str | None:
    """Why the service cannot be reached at all, in a few words, or ``None`` when ``exc`` is transient
    (a timeout, a reset, anything else) and a retry may help."""
    if isinstance(exc, requests.Timeout):  # ConnectTimeout is also a ConnectionError: transient
        return None
    for e in _causes(exc):
        if isinstance(e, TimeoutError):  # socket.timeout included
            return None
        if isinstance(e, socket.gaierror) or type(e).__name__ == "NameResolutionError":
            return "the host name does not resolve"
        if isinstance(e, ConnectionRefusedError) or (isinstance(e, OSError) and e.errno == errno.ECONNREFUSED):
            return "connection refused"
        if isinstance(e, OSError) and e.errno in _NO_ROUTE:
            return _NO_ROUTE[e.errno]
    return None


def raise_if_unreachable(exc: BaseException, *, service: str, url: str, setting: str) -> None:
    """Raise :class:`ServiceUnreachable` (from ``exc``) when ``exc`` means the service cannot be reached."""
    reason = unreachable_reason(exc)
    if reason is not None:
        raise ServiceUnreachable(service, url, setting, reason) from exc
