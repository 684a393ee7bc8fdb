"""HTTP to one agent: auth, TLS, namespaces, typed errors and retries.

Retries (the Go client's rules, httpapi/client.go, plus indeterminate
writes):

* 429 ``overloaded``: the server took nothing; every request is sent again
  after ``Retry-After`` (capped at 30 s).
* A refused connection: nothing was sent; every request is sent again.
* 502, 503, 504 and connections that broke after the request was sent: the
  outcome of a write is unknown, so only requests that are safe to repeat
  are sent again: reads, and writes the caller marks idempotent (submits
  carry an ``Idempotency-Key`` the server deduplicates inside the raft
  apply, so the retry answers with the first job). ``Retry-After`` is
  honoured when present, else the delay doubles from 0.25 s up to 5 s.
"""

from __future__ import annotations

import http.client
import json as jsonlib
import os
import random
import socket
import ssl
import time
import uuid
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlencode, urlsplit

from . import __version__
from .errors import APIError, ForemanConnectionError, api_error

DEFAULT_ADDR = "http://127.0.0.1:7070"
MAX_RETRY_AFTER = 30.0  # seconds, as the Go client caps one 429 wait

QueryValue = Union[str, int, bool, Sequence[str], None]


@dataclass
class Response:
    status: int
    headers: Dict[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        return jsonlib.loads(self.body) if self.body else None


class Stream:
    """A 2xx answer whose body the caller reads as it arrives; close it."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self._conn = conn
        self._resp = resp
        # http.client hands a close-delimited answer's socket (the event
        # stream's) to the response and forgets it: keep it for timeouts.
        self.sock: Optional[socket.socket] = getattr(conn, "_foreman_sock", None)
        self.status = resp.status
        self.headers = {k.lower(): v for k, v in resp.getheaders()}

    def set_timeout(self, seconds: Optional[float]) -> None:
        """Bound each following read (None: block)."""
        if self.sock is not None:
            self.sock.settimeout(seconds)

    def readline(self) -> bytes:
        return self._resp.readline()

    def read1(self, n: int = 65536) -> bytes:
        return self._resp.read1(n)

    def close(self) -> None:
        try:
            self._resp.close()
        finally:
            self._conn.close()

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _NotSent(Exception):
    """The connection was refused: nothing reached the server."""


def _env(name: str) -> Optional[str]:
    v = os.environ.get(name, "")
    return v or None


class Transport:
    def __init__(
        self,
        url: Optional[str] = None,
        *,
        token: Optional[str] = None,
        namespace: Optional[str] = None,
        ca_file: Optional[str] = None,
        cert_file: Optional[str] = None,
        key_file: Optional[str] = None,
        ssl_context: Optional[ssl.SSLContext] = None,
        timeout: float = 30.0,
        retries: int = 8,
    ) -> None:
        url = url or _env("FOREMAN_ADDR") or DEFAULT_ADDR
        if "://" not in url:
            url = "http://" + url
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"address {url!r}: want http://host:port or https://host:port")
        self.url = url.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._prefix = parts.path.rstrip("/")
        self.token = token if token is not None else _env("FOREMAN_TOKEN")
        self.namespace = namespace if namespace is not None else _env("FOREMAN_NAMESPACE")
        self.timeout = timeout
        self.retries = retries
        self._ssl: Optional[ssl.SSLContext] = None
        if self._https:
            if ssl_context is None:
                ssl_context = ssl.create_default_context(cafile=ca_file or _env("FOREMAN_CACERT"))
                cert = cert_file or _env("FOREMAN_CLIENT_CERT")
                if cert:
                    ssl_context.load_cert_chain(cert, key_file or _env("FOREMAN_CLIENT_KEY"))
            self._ssl = ssl_context

    # ---- requests ----

    def call(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, QueryValue]] = None,
        json: Any = None,
        body: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
        idempotent: Optional[bool] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
    ) -> Response:
        """Send a request and return its 2xx answer; raise APIError otherwise."""
        conn, resp = self._send(method, path, query, json, body, headers, idempotent, timeout, retries)
        try:
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise ForemanConnectionError(f"{method} {path}: reading the answer from {self.url}: {e}") from e
        finally:
            conn.close()
        return Response(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)

    def open(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, QueryValue]] = None,
        headers: Optional[Mapping[str, str]] = None,
        timeout: Optional[float] = None,
        retries: Optional[int] = None,
    ) -> Stream:
        """Send a request and return its 2xx answer unread, for streaming."""
        conn, resp = self._send(method, path, query, None, None, headers, None, timeout, retries)
        return Stream(conn, resp)

    def upgrade(
        self,
        method: str,
        path: str,
        protocol: str,
        *,
        query: Optional[Mapping[str, QueryValue]] = None,
        json: Any = None,
        timeout: Optional[float] = None,
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        """Send a request asking to switch the connection to protocol (an
        HTTP/1.1 upgrade; never retried) and return the connection, whose
        socket the caller writes, and the 101 answer, whose fp it reads.
        Raise APIError when the server refuses (a JSON error)."""
        hdrs = {"User-Agent": f"foreman-python/{__version__}", "Connection": "Upgrade", "Upgrade": protocol,
                "Content-Type": "application/json", "X-Request-ID": "py-" + uuid.uuid4().hex[:20]}
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        try:
            conn, resp = self._once(method, self._target(path, query), jsonlib.dumps(json).encode(), hdrs,
                                    self.timeout if timeout is None else timeout)
        except _NotSent as e:
            raise ForemanConnectionError(f"{method} {path}: {self.url}: {e.__cause__}") from e
        except (OSError, http.client.HTTPException) as e:
            raise ForemanConnectionError(f"{method} {path}: {self.url}: {e}") from e
        if resp.status != 101:
            try:
                raise self._error(resp)
            finally:
                conn.close()
        return conn, resp

    # ---- internals ----

    def _send(
        self,
        method: str,
        path: str,
        query: Optional[Mapping[str, QueryValue]],
        json: Any,
        body: Optional[bytes],
        headers: Optional[Mapping[str, str]],
        idempotent: Optional[bool],
        timeout: Optional[float],
        retries: Optional[int],
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        if retries is None:
            retries = self.retries
        if idempotent is None:
            idempotent = method in ("GET", "HEAD")
        target = self._target(path, query)
        hdrs = {
            "User-Agent": f"foreman-python/{__version__}",
            "Accept": "application/json",
            # One ID for every try of this request, so the agent's log lines
            # about its retries can be found together.
            "X-Request-ID": "py-" + uuid.uuid4().hex[:20],
        }
        if self.token:
            hdrs["Authorization"] = "Bearer " + self.token
        if json is not None:
            body = jsonlib.dumps(json).encode()
            hdrs["Content-Type"] = "application/json"
        elif body is not None:
            hdrs["Content-Type"] = "application/octet-stream"
        if headers:
            hdrs.update(headers)
        attempt = 0
        while True:
            wait: Optional[float] = None
            try:
                conn, resp = self._once(method, target, body, hdrs, self.timeout if timeout is None else timeout)
            except _NotSent as e:
                err: Exception = ForemanConnectionError(f"{method} {path}: {self.url}: {e.__cause__}")
            except ssl.SSLError as e:
                # A certificate the client does not trust (or the reverse)
                # fails the same way every time.
                raise ForemanConnectionError(f"{method} {path}: {self.url}: TLS: {e}") from e
            except (OSError, http.client.HTTPException) as e:
                err = ForemanConnectionError(f"{method} {path}: {self.url}: {e}")
                if not idempotent:
                    raise err from e
            else:
                if 200 <= resp.status < 300:
                    return conn, resp
                try:
                    err = self._error(resp)
                finally:
                    conn.close()
                assert isinstance(err, APIError)
                retryable = err.status == 429 or (idempotent and err.status in (502, 503, 504))
                if not retryable:
                    raise err
                wait = err.retry_after
            if attempt >= retries:
                raise err
            if wait is None:
                wait = min(0.25 * 2**attempt, 5.0) * random.uniform(0.8, 1.2)
            time.sleep(min(wait, MAX_RETRY_AFTER))
            attempt += 1

    def _once(
        self, method: str, target: str, body: Optional[bytes], headers: Mapping[str, str], timeout: Optional[float]
    ) -> Tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn: http.client.HTTPConnection
        if self._https:
            conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        try:
            conn.connect()
        except ConnectionRefusedError as e:
            conn.close()
            raise _NotSent() from e
        except socket.gaierror as e:
            conn.close()
            raise _NotSent() from e
        except BaseException:
            conn.close()
            raise
        conn._foreman_sock = conn.sock  # type: ignore[attr-defined]
        try:
            conn.request(method, target, body=body, headers=dict(headers))
            return conn, conn.getresponse()
        except BaseException:
            conn.close()
            raise

    def _target(self, path: str, query: Optional[Mapping[str, QueryValue]]) -> str:
        q: Dict[str, Any] = {}
        if self.namespace:
            q["namespace"] = self.namespace
        for k, v in (query or {}).items():
            if v is None or v is False or v == "":
                continue
            q[k] = "true" if v is True else v
        target = self._prefix + path
        if q:
            target += "?" + urlencode(q, doseq=True)
        return target

    def _error(self, resp: http.client.HTTPResponse) -> APIError:
        raw = resp.read(64 << 10)
        code, msg = "", ""
        try:
            body = jsonlib.loads(raw)
            if isinstance(body, dict):
                code, msg = str(body.get("code", "")), str(body.get("error", ""))
        except ValueError:
            pass
        if not msg:
            msg = raw.decode("utf-8", "replace").strip() or f"HTTP {resp.status} {resp.reason}"
        retry_after: Optional[float] = None
        ra = resp.getheader("Retry-After")
        if ra:
            try:
                retry_after = max(float(ra), 0.0)
            except ValueError:
                pass
        return api_error(resp.status, code, msg, request_id=resp.getheader("X-Request-ID"), retry_after=retry_after)


def path_escape(s: str) -> str:
    """One path element, escaped as Go's url.PathEscape does."""
    return quote(s, safe="")


def object_id(x: Any) -> str:
    """An ID from a string or anything with an ``id`` (Job, Submitted, WorkflowRun)."""
    return x if isinstance(x, str) else str(x.id)
