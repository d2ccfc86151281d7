"""Whether ``paperkb serve`` can listen on ``--host`` / ``--port``, asked before the snapshot and the
query model are loaded: a port in use is one line and exit code 2, not uvicorn's log line and exit 3."""

from __future__ import annotations

import errno
import socket

from pipeline.errors import UserError


class CannotListen(UserError):
    """The address ``paperkb serve`` was asked to listen on cannot be bound (in use, not this machine's)."""


def check_listen(host: str, port: int) -> None:
    """Bind (and at once release) every address ``host`` stands for, as uvicorn (asyncio's
    ``create_server``) does: ``SO_REUSEADDR`` on, IPv6 sockets IPv6-only. CannotListen with one line when
    one cannot be bound."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise CannotListen(f"cannot listen on host {host!r} ({getattr(exc, 'strerror', None) or exc}): give --host an "
                           "address of this machine (127.0.0.1 loopback, 0.0.0.0 every interface)") from None
    for family, kind, proto, _, addr in dict.fromkeys(infos):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(addr)
        except OSError as exc:
            raise CannotListen(describe(host, port, exc)) from None
        finally:
            sock.close()


def describe(host: str, port: int, exc: OSError) -> str:
    """The one line for a failed bind."""
    if exc.errno == errno.EADDRINUSE:
        return (f"port {port} on {host} is in use (another paperkb serve, or another program): choose another "
                "--port or stop the program that listens there")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return f"port {port} on {host} needs privileges this user lacks ({exc.strerror}): choose a --port above 1023"
    if exc.errno == errno.EADDRNOTAVAIL:
        return (f"host {host} is not an address of this machine ({exc.strerror}): give --host one of its addresses "
                "(127.0.0.1 loopback, 0.0.0.0 every interface)")
    return f"cannot listen on port {port} on {host}: {exc.strerror or exc}"
