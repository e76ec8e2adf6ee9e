"""Loopback servers in tests: no proxy between the test and them, a port that never answers, a call that must
give up on it in time."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


def without_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy in the test's environment must not be asked for 127.0.0.1 (urllib and urllib3 honour these)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@contextmanager
def silent_port() -> Iterator[int]:
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        yield silent.getsockname()[1]


def raised_within(call: Callable[[], object], seconds: float) -> BaseException:
    """What `call` raised, run in a thread that must be done within `seconds` (a call with no timeout never is)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as error:  # handed to the test, which says what it expects
            raised.append(error)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout=seconds)
    assert not worker.is_alive(), f"still waiting after {seconds} s"
    (error,) = raised
    return error
