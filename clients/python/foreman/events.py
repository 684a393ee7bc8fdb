"""The event stream (GET /v1/events, Server-Sent Events) with resume.

Event IDs (``INDEX-SEQ``) are the same on every node, so a stream that
breaks (the agent restarted, the connection dropped, a read timed out) is
opened again with ``Last-Event-ID`` set to the last event it delivered and
carries on with the next one: nothing is skipped or repeated. When the agent
no longer holds events that old it says so with a ``reset`` event, which is
delivered like any other (re-list what you cache, then carry on).
"""

from __future__ import annotations

import http.client
import json
import ssl
import time
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Union

from .errors import APIError, ForemanConnectionError, ForemanError
from .models import Event

if TYPE_CHECKING:
    from ._transport import Stream, Transport

# A heartbeat comes every 15 s on an idle stream (httpapi.Config.EventHeartbeat):
# a read that waits this long means the connection is dead.
READ_TIMEOUT = 45.0


class EventStream:
    """An iterator of :class:`~foreman.models.Event`; use it in a ``with``
    block or call :meth:`close`.

    ``last_id`` is the ID of the last event delivered: give it as ``after``
    to a later :meth:`Client.events` call to go on from there, on any node.
    ``timeout`` bounds the whole iteration: it stops (no error) once that
    many seconds have passed.
    """

    def __init__(
        self,
        transport: "Transport",
        *,
        topics: Optional[Sequence[str]] = None,
        job: Optional[str] = None,
        workflow: Optional[str] = None,
        schedule: Optional[str] = None,
        namespace: Optional[str] = None,
        after: Union[str, int, None] = None,
        timeout: Optional[float] = None,
        reconnect: bool = True,
    ) -> None:
        self._t = transport
        self._query: Dict[str, Any] = {
            "topic": ",".join(topics) if topics else None,
            "job": job,
            "workflow": workflow,
            "schedule": schedule,
            "namespace": namespace,
        }
        self.last_id: Optional[str] = str(after) if after is not None else None
        self._deadline = time.monotonic() + timeout if timeout is not None else None
        self._reconnect = reconnect
        self._stream: Optional["Stream"] = None
        self._closed = False
        self._opens = 0

    @property
    def reconnects(self) -> int:
        """How many times the stream was opened again after a break."""
        return max(self._opens - 1, 0)

    # ---- lifecycle ----

    def open(self) -> "EventStream":
        """Open the stream now (iteration opens it otherwise). Once this
        returns the server streams every event from here on, so a read made
        after it misses nothing."""
        if self._stream is None and not self._closed:
            self._connect()
        return self

    def close(self) -> None:
        self._closed = True
        self._drop()

    def __enter__(self) -> "EventStream":
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- iteration ----

    def __iter__(self) -> Iterator[Event]:
        return self

    def __next__(self) -> Event:
        failures = 0
        while not self._closed:
            if self._expired():
                self.close()
                break
            try:
                if self._stream is None:
                    self._connect()
                e = self._read_event()
            except (OSError, http.client.HTTPException, ForemanConnectionError) as err:
                if isinstance(err.__cause__, ssl.SSLError):
                    raise  # a certificate refused now is refused again
                # Timed out, reset, or refused: resume from last_id.
                self._drop()
                if self._expired():
                    continue
                if not self._reconnect or failures >= 20:
                    raise ForemanConnectionError(f"event stream from {self._t.url}: {err}") from err
                failures += 1
                self._sleep(min(0.1 * 2**failures, 2.0))
                continue
            except APIError as err:
                # 4xx: a bad filter or token; "unavailable": this node keeps
                # no stream. Neither gets better by asking again.
                if err.status < 500 or err.code == "unavailable" or not self._reconnect or failures >= 20:
                    raise
                self._drop()
                failures += 1
                self._sleep(min(0.1 * 2**failures, 2.0))
                continue
            if e is None:  # the server closed the stream (agent shutdown)
                self._drop()
                if not self._reconnect:
                    self.close()
                    break
                failures += 1
                self._sleep(min(0.1 * 2**failures, 2.0))
                continue
            self.last_id = e.id
            return e
        raise StopIteration

    # ---- internals ----

    def _expired(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def _remaining(self) -> Optional[float]:
        if self._deadline is None:
            return None
        return max(self._deadline - time.monotonic(), 0.001)

    def _sleep(self, s: float) -> None:
        r = self._remaining()
        time.sleep(s if r is None else min(s, r))

    def _connect(self) -> None:
        headers = {"Accept": "text/event-stream"}
        if self.last_id is not None:
            headers["Last-Event-ID"] = self.last_id
        self._opens += 1
        r = self._remaining()
        # Retried by __next__, which resumes from last_id.
        self._stream = self._t.open(
            "GET", "/v1/events", query=self._query, headers=headers, timeout=READ_TIMEOUT if r is None else min(r, READ_TIMEOUT), retries=0
        )

    def _drop(self) -> None:
        if self._stream is not None:
            s, self._stream = self._stream, None
            s.close()

    def _read_event(self) -> Optional[Event]:
        """The next event, or None at the end of the stream."""
        assert self._stream is not None
        data: List[str] = []
        while True:
            r = self._remaining()
            self._stream.set_timeout(READ_TIMEOUT if r is None else min(r, READ_TIMEOUT))
            raw = self._stream.readline()
            if not raw:
                return None
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line == "":
                if data:
                    return parse_event("\n".join(data))
                continue
            if line.startswith(":"):
                continue  # a comment: the greeting, heartbeats
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                data.append(value)
            # "id" repeats the data's id; "event: reset" its type.


def parse_event(data: str) -> Event:
    try:
        return Event.from_json(json.loads(data))
    except (ValueError, KeyError, TypeError) as e:
        raise ForemanError(f"event stream: bad event {data!r}: {e}") from e
