"""The raw-socket helper of the bad-input tests tells a clean disconnect from a hang: a broker
that never answers must fail a test, not count as "disconnected" (before, a 20 s socket
time-out was caught with the resets and counted as a clean close)."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator

import pytest
from broker_wire import Wire


@pytest.fixture
def server() -> Iterator[Callable[[Callable[[socket.socket], None]], int]]:
    """``server(behaviour)``: a one-connection TCP server on a free port; ``behaviour``
    gets the accepted socket."""
    listeners: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def start(behaviour: Callable[[socket.socket], None]) -> int:
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)

        def serve() -> None:
            conn, _ = listener.accept()
            with conn:
                behaviour(conn)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        threads.append(thread)
        return int(listener.getsockname()[1])

    yield start
    for listener in listeners:
        listener.close()
    for thread in threads:
        thread.join(5)


def test_a_silent_peer_fails_instead_of_counting_as_a_disconnect(server) -> None:
    done = threading.Event()
    port = server(lambda conn: done.wait(5))
    with Wire(port, timeout=0.3) as wire:
        wire.send(b"\x00\x00\x00\x01x")
        with pytest.raises(AssertionError, match="neither answered nor closed"):
            wire.read_frame_or_close("a request")
    done.set()


def test_eof_and_reset_are_clean_disconnects(server) -> None:
    port = server(lambda conn: conn.recv(16))  # reads, then closes: EOF
    with Wire(port, timeout=5) as wire:
        assert wire.send_or_close(b"\x00\x00\x00\x01x")
        assert wire.read_frame_or_close() is None

    def reset(conn: socket.socket) -> None:
        conn.recv(16)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    port = server(reset)
    with Wire(port, timeout=5) as wire:
        wire.send(b"\x00\x00\x00\x01x")
        assert wire.read_frame_or_close() is None


def test_an_answer_is_returned(server) -> None:
    port = server(lambda conn: (conn.recv(16), conn.sendall(b"\x00\x00\x00\x03abc")))
    with Wire(port, timeout=5) as wire:
        wire.send(b"\x00\x00\x00\x01x")
        assert wire.read_frame_or_close() == b"abc"


def test_hung_up_connections_counts_what_the_server_has_not_closed() -> None:
    """The event the group tests wait for after a kill -9: the broker has handled (read to
    the end, and closed) every connection whose client went away."""
    from groups_harness import hung_up_connections

    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        conn, _ = listener.accept()
        assert hung_up_connections(port) == 0
        client.sendall(b"a commit in flight")
        client.close()  # the kernel sends the data, then FIN
        assert hung_up_connections(port) == 1
        assert conn.recv(100) == b"a commit in flight"
        conn.close()
        assert hung_up_connections(port) == 0
