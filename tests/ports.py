"""A TCP port for a test: one to listen on, or one where nothing answers."""

import contextlib
import socket
from collections.abc import Iterator


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on at `host` ("": every address) now, as the kernel hands out an ephemeral one.

    It is free once returned, so another process could take it before the test uses it; the kernel does not
    hand the same ephemeral port out again at once, so on a test machine that is rare.
    """
    while True:
        with socket.socket() as s:
            s.bind((host, 0))
            port: int = s.getsockname()[1]
        if port != 52365:  # Ray's default dashboard agent port: a cluster file may not pin another port there
            return port


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A port where connections are refused for as long as the block lasts: bound on every address here and never
    listened on, so no other process (a local Ray of the other test worker, say) can take it meanwhile. A port of
    `free_port` was once taken between the test's pick and its connect, in a full run."""
    with socket.socket() as held:
        held.bind(("", 0))
        yield held.getsockname()[1]
