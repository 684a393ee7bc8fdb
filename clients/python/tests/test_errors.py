"""Bad input comes back as typed errors carrying the server's status, code
and the field its message names."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from foreman import Client, InvalidError, NoAttemptError, NotFoundError, job_spec


@pytest.mark.parametrize(
    "fields, field, words",
    [
        ({"priority": 200}, "priority", "between 0 and 100"),
        ({"bogus": 1}, "bogus", "unknown field"),
        ({"max_attempts": 0}, "max_attempts", "between 1 and 100"),
        ({"gpus": 5}, "resources.gpus", "no node has 5 GPUs"),
        ({"gpus": -1}, "resources.gpus", "between 0 and"),
        ({"gpu_memory": "lots"}, "resources.gpu_memory", "not a memory quantity"),
        ({"constraints": ["gpu.vram >= 1GiB"]}, "constraints[0]", "unknown GPU attribute gpu.vram"),
        ({"env": {"FOREMAN_X": "1"}}, "env.FOREMAN_X", "set by foreman"),
        ({"gang": 1}, "gang.size", ""),
    ],
)
def test_submit_refusals_name_the_field(client: Client, fields, field, words):
    with pytest.raises(InvalidError) as e:
        client.submit("true", **fields)
    err = e.value
    assert (err.status, err.code, err.field) == (400, "invalid", field), repr(err)
    assert words in err.message
    assert err.request_id
    assert isinstance(err, ValueError)  # catchable the Python way too


def test_batch_refusal_names_the_job(client: Client):
    with pytest.raises(InvalidError) as e:
        client.submit_batch([job_spec("true"), job_spec("true", timeout="soon")])
    assert e.value.field == "jobs[1].timeout"


def test_unknown_job_is_not_found(client: Client):
    with pytest.raises(NotFoundError) as e:
        client.job("01NOSUCHJOB")
    assert (e.value.status, e.value.code, e.value.field) == (404, "not_found", None)
    assert isinstance(e.value, LookupError)


def test_logs_before_placement(client: Client):
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    sub = client.submit("true", run_at=later)
    try:
        with pytest.raises(NoAttemptError) as e:
            client.logs(sub)
        assert (e.value.status, e.value.code) == (404, "no_attempt")
    finally:
        client.cancel(sub)


def test_bad_query_parameters(client: Client):
    with pytest.raises(InvalidError) as e:
        client.jobs(state="exploded")
    assert e.value.field == "state"
    with pytest.raises(InvalidError) as e:
        next(iter(client.events(topics=["nope"], timeout=10)))
    assert e.value.field == "topic"
