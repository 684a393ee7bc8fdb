"""Deadlines and the polling fallback shared by the waits."""

from __future__ import annotations

import time
from typing import Any, Callable, Optional

from .errors import WaitTimeout


def deadline_of(timeout: Optional[float]) -> Optional[float]:
    return None if timeout is None else time.monotonic() + timeout


def left(deadline: Optional[float]) -> Optional[float]:
    """Seconds left before deadline (None: no deadline)."""
    return None if deadline is None else deadline - time.monotonic()


def expired(deadline: Optional[float]) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def sleep(seconds: float, deadline: Optional[float]) -> None:
    r = left(deadline)
    time.sleep(max(0.0, seconds if r is None else min(seconds, r)))


def poll(read: Callable[[], Any], deadline: Optional[float], what: str) -> Any:
    """Read until the result is terminal, backing off from 50 ms to 1 s;
    WaitTimeout at the deadline."""
    wait = 0.05
    while True:
        v = read()
        if v.terminal:
            return v
        if expired(deadline):
            raise WaitTimeout(f"{what} is still {v.state}")
        sleep(wait, deadline)
        wait = min(wait * 1.5, 1.0)
