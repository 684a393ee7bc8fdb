"""Retries, against a scripted HTTP server (a real agent cannot be made to
answer 429 or lose an answer on demand): Retry-After is honoured, a submit
that may have landed is sent again with the same idempotency key, and a
write that is not safe to repeat is not."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import List, Tuple

import pytest

from foreman import Client, OverloadedError, UnavailableError, UnreachableError


class Script:
    """Answers requests in order from a list of (status, headers, body)."""

    def __init__(self, answers: List[Tuple[int, dict, dict]]):
        self.answers = list(answers)
        self.requests: List[Tuple[str, str, dict, float]] = []


@pytest.fixture
def scripted():
    servers = []

    def start(answers):
        script = Script(answers)

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                script.requests.append((self.command, self.path, dict(self.headers), time.monotonic()))
                status, headers, body = script.answers.pop(0)
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, *args):
                pass

        srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return Client(f"http://127.0.0.1:{srv.server_address[1]}", token="tok", namespace="", retries=3), script

    yield start
    for s in servers:
        s.shutdown()
        s.server_close()


OVERLOADED = (429, {"Retry-After": "1"}, {"error": "overloaded: 20000 jobs queued", "code": "overloaded"})
NO_LEADER = (503, {}, {"error": "no leader: leadership lost", "code": "no_leader"})
CREATED = (201, {}, {"id": "01JOB", "duplicate": False})
DUPLICATE = (200, {}, {"id": "01JOB", "duplicate": True})


def test_429_waits_retry_after_then_sends_again(scripted):
    client, script = scripted([OVERLOADED, CREATED])
    assert client.submit("true").id == "01JOB"
    (m1, p1, h1, t1), (m2, p2, h2, t2) = script.requests
    assert t2 - t1 >= 0.9  # Retry-After: 1
    assert h1["Authorization"] == "Bearer tok"


def test_429_gives_up_after_retries(scripted):
    client, script = scripted([OVERLOADED] * 4)
    client._t.retries = 1
    with pytest.raises(OverloadedError) as e:
        client.submit("true")
    assert (e.value.status, e.value.code, e.value.retry_after) == (429, "overloaded", 1.0)
    assert len(script.requests) == 2


def test_indeterminate_submit_is_resent_with_the_same_key(scripted):
    client, script = scripted([NO_LEADER, (502, {}, {"error": "x", "code": "node_unreachable"}), DUPLICATE])
    assert client.submit("true").id == "01JOB"
    keys = [h["Idempotency-Key"] for _, _, h, _ in script.requests]
    assert len(keys) == 3 and len(set(keys)) == 1 and keys[0].startswith("py-")
    rids = {h["X-Request-ID"] for _, _, h, _ in script.requests}
    assert len(rids) == 1  # one logical request in the agent's logs


def test_unsafe_write_is_not_resent(scripted):
    client, script = scripted([NO_LEADER, NO_LEADER])
    with pytest.raises(UnavailableError) as e:
        client.cancel("01JOB")
    assert (e.value.status, e.value.code) == (503, "no_leader")
    assert len(script.requests) == 1


def test_reads_are_resent(scripted):
    detail = {"job": {"id": "01JOB", "state": "running", "spec": {}}, "attempts": []}
    client, script = scripted([(502, {}, {"error": "node n2 unreachable", "code": "node_unreachable"}), (200, {}, detail)])
    assert client.job("01JOB").state == "running"
    assert [m for m, _, _, _ in script.requests] == ["GET", "GET"]


def test_error_without_a_json_body(scripted):
    client, script = scripted([(502, {}, "upstream gone")])
    client._t.retries = 0
    with pytest.raises(UnreachableError) as e:
        client.job("01JOB")
    assert e.value.code == "" and e.value.status == 502
