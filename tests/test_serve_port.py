"""`paperkb serve` on an address it cannot listen on: one line, exit code 2, before anything is loaded
(uvicorn logged its own message and exited 3; issue 28)."""

from __future__ import annotations

import socket

import pytest

from pipeline.cli import main
from pipeline.serve.bind import CannotListen, check_listen


@pytest.fixture
def busy_port():
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    yield sock.getsockname()[1]
    sock.close()


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"])
def test_port_in_use_is_one_line_exit_2(busy_port, host, tmp_path, capsys):
    # the warehouse is empty: the port is checked before the snapshot is looked for
    assert main(["--warehouse", str(tmp_path / "wh"), "serve", "--host", host, "--port", str(busy_port)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.strip() == (f"paperkb: error: port {busy_port} on {host} is in use (another paperkb serve, or another "
                           "program): choose another --port or stop the program that listens there")


def test_a_free_port_passes_and_stays_free(busy_port):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    free = sock.getsockname()[1]
    sock.close()
    check_listen("127.0.0.1", free)
    check_listen("127.0.0.1", free)  # released again: a second check (and uvicorn) can bind it


@pytest.mark.parametrize("host, start", [("no-such-host.invalid", "cannot listen on host 'no-such-host.invalid'"),
                                         ("192.0.2.1", "host 192.0.2.1 is not an address of this machine")])
def test_a_host_that_is_not_this_machine_is_one_line(host, start):
    with pytest.raises(CannotListen) as info:
        check_listen(host, 8000)
    assert str(info.value).startswith(start), str(info.value)


def test_port_taken_while_loading_is_one_line_too(busy_port, cisi_snapshot, monkeypatch, capsys):
    """The port is free when checked, then taken while the snapshot loads: uvicorn exits 3, the command
    checks again and says so in one line (exit 2)."""
    import pipeline.serve.bind as bind

    calls = []
    real = bind.check_listen

    def first_free(host, port):
        calls.append(port)
        if len(calls) > 1:
            real(host, port)

    monkeypatch.setattr(bind, "check_listen", first_free)
    monkeypatch.setenv("PAPERKB_WAREHOUSE", str(cisi_snapshot.warehouse))
    assert main(["serve", "--port", str(busy_port)]) == 2
    assert calls == [busy_port, busy_port]
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(f"paperkb: error: port {busy_port} on 127.0.0.1 is in use")
