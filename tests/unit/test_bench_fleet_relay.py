"""scripts/bench-fleet --rtt-ms: the delay relay adds the round trip it is asked for and changes no byte."""

import hashlib
import os
import socket
import threading
import time

import pytest


@pytest.fixture(scope="module")
def bench(load_script):
    return load_script("bench-fleet")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture()
def echo_port():
    """A TCP echo server (the host behind the relay); closes its side after the client's EOF."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve(conn):
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                conn.sendall(data)

    def accept():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield srv.getsockname()[1]
    srv.close()


def round_trip(sock):
    start = time.monotonic()
    sock.sendall(b"x")
    assert sock.recv(1) == b"x"
    return time.monotonic() - start


def test_relay_adds_the_round_trip_and_keeps_the_stream(bench, echo_port):
    listen = free_port()
    bench.DelayRelay([(listen, echo_port)], 80).start()
    start = time.monotonic()
    sock = socket.create_connection(("127.0.0.1", listen), timeout=10)
    first = round_trip(sock)
    # the handshake's round trip, then the data's: at least 2 x 80 ms
    assert time.monotonic() - start >= 0.16
    # without the relay a local echo takes well under a millisecond; through it, 80 ms at least
    again = [round_trip(sock) for _ in range(3)]
    assert min(again) >= 0.08 and first >= 0.08
    assert max(again) < 2.0
    # 4 MB each way, in order and intact
    blob = os.urandom(4 * 1024 * 1024)
    got = bytearray()

    def read():
        while len(got) < len(blob):
            got.extend(sock.recv(65536))

    reader = threading.Thread(target=read)
    reader.start()
    sock.sendall(blob)
    reader.join(30)
    assert hashlib.sha256(got).digest() == hashlib.sha256(blob).digest()
    # the client's EOF reaches the host, whose EOF comes back
    sock.shutdown(socket.SHUT_WR)
    assert sock.recv(10) == b""
    sock.close()


def test_relay_inventory_points_every_host_at_its_relay(bench, echo_port, tmp_path, monkeypatch):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("rented:\n  hosts:\n    a:\n      ansible_host: 127.0.0.1\n      ansible_port: %d\n"
                         "    b:\n      ansible_host: 127.0.0.1\n      ansible_port: %d\n" % (echo_port, echo_port + 1))
    monkeypatch.setattr(bench, "INVENTORY", inventory)
    monkeypatch.setattr(bench, "BENCH", tmp_path)
    monkeypatch.setattr(bench, "RELAY_OFFSET", free_port() - echo_port)
    relayed, port = bench.relay_inventory(20)
    text = relayed.read_text()
    assert "ansible_port: %d\n" % port in text and "ansible_port: %d\n" % (port + 1) in text
    assert "ansible_port: %d\n" % echo_port not in text
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        assert round_trip(sock) >= 0.02


def test_relay_inventory_refuses_an_inventory_without_ports(bench, tmp_path, monkeypatch):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("rented:\n  hosts:\n    a:\n      ansible_host: 127.0.0.1\n")
    monkeypatch.setattr(bench, "INVENTORY", inventory)
    with pytest.raises(SystemExit, match="no ansible_port"):
        bench.relay_inventory(20)
