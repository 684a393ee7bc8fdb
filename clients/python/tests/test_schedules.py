"""Schedules: create, fire, list, pause, resume, trigger, delete."""

from __future__ import annotations

import uuid

import pytest
from conftest import JOB_TIMEOUT, eventually

from foreman import Client, ConflictError, InvalidError, NotFoundError


def test_schedule_lifecycle(client: Client):
    name = "py-" + uuid.uuid4().hex[:8]
    s = client.schedules.create(name, "@every 1s", ["echo", "tick"], max_attempts=1, overlap="forbid")
    assert (s.name, s.cron, s.paused, s.time_zone) == (name, "@every 1s", False, "UTC")
    assert s.next_fire_utc is not None
    try:
        with pytest.raises(ConflictError):
            client.schedules.create(name, "@every 1s", "true")

        fired = eventually("a tick fires a job", lambda: next((f for f in client.schedules.get(name).fires if f.job_id), None))
        job = client.wait(fired.job_id, timeout=JOB_TIMEOUT)
        assert job.succeeded and client.logs(job) == "tick\n"
        assert job.spec["schedule"] == name
        assert name in [x.name for x in client.schedules.list()]

        paused = client.schedules.pause(name)
        assert paused.paused and paused.next_fire is None
        assert client.schedules.get(name).paused

        manual = client.schedules.trigger(name)  # fires even while paused
        assert client.wait(manual, timeout=JOB_TIMEOUT).succeeded
        assert any(f.manual and f.job_id == manual for f in client.schedules.get(name).fires)

        resumed = client.schedules.resume(name)
        assert not resumed.paused and resumed.next_fire is not None
    finally:
        client.schedules.delete(name)
    with pytest.raises(NotFoundError):
        client.schedules.get(name)


def test_bad_schedule_names_the_field(client: Client):
    with pytest.raises(InvalidError) as e:
        client.schedules.create("py-bad", "61 * * * *", "true")
    assert e.value.field == "cron"
    with pytest.raises(InvalidError) as e:
        client.schedules.create("py-bad", "@daily", "true", time_zone="Mars/Olympus")
    assert e.value.field == "time_zone"
    with pytest.raises(InvalidError) as e:
        client.schedules.create("py-bad", "@daily", "true", priority=101)
    assert e.value.field == "job.priority"
