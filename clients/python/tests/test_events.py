"""The event stream: filters, resume from the last event ID, and a broken
connection resumed without a gap or a repeat."""

from __future__ import annotations

import socket

from conftest import JOB_TIMEOUT

from foreman import Client


def job_events_until_end(stream, out):
    for e in stream:
        out.append(e)
        if e.type.startswith("job.") and e.state in ("succeeded", "failed", "cancelled", "skipped"):
            return True
    return False


def test_resume_from_last_event_id(client: Client):
    # Read the job's first two events, stop, then resume from the last ID
    # on a new stream: together they are exactly the job's timeline.
    r = client.submit("echo hi", max_attempts=1)
    first = []
    with client.events(job=r, after=0, timeout=JOB_TIMEOUT) as es:
        for e in es:
            first.append(e)
            if len(first) == 2:
                break
        last_id = es.last_id
    assert last_id == first[-1].id
    rest = []
    with client.events(job=r, after=last_id, timeout=JOB_TIMEOUT) as es:
        assert job_events_until_end(es, rest), [e.type for e in rest]
    timeline = client.timeline(r)
    got = [e.id for e in first + rest]
    assert got == [e.id for e in timeline][: len(got)]
    assert got[0] == timeline[0].id and first[0].type == "job.submitted"
    assert all(e.job_id == r.id and e.topic == "job" for e in first + rest)


def test_broken_stream_resumes_transparently(client: Client):
    r = client.submit("echo hi", max_attempts=1)
    seen = []
    with client.events(job=r, after=0, timeout=JOB_TIMEOUT) as es:
        seen.append(next(es))
        # Cut the connection under the stream: the next read sees its end
        # and the stream opens again with Last-Event-ID.
        es._stream.sock.shutdown(socket.SHUT_RDWR)
        assert job_events_until_end(es, seen)
        assert es.reconnects >= 1
    ids = [e.id for e in seen]
    assert len(ids) == len(set(ids)), ids
    assert ids == [e.id for e in client.timeline(r)][: len(ids)]


def test_topic_filter_and_timeout(client: Client):
    r = client.submit("true", max_attempts=1)
    client.wait(r, timeout=JOB_TIMEOUT)
    with client.events(topics=["leader"], after=0, timeout=2) as es:
        events = list(es)  # ends after 2 s: the ring's leader events, then nothing
    assert events and all(e.topic == "leader" and e.type == "leader.changed" for e in events)
