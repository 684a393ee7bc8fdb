"""Jobs against a real dev agent: submit, run, wait, exit codes, logs,
cancel, retry, listing and idempotency."""

from __future__ import annotations

import io
import os
import uuid

import pytest
from conftest import JOB_TIMEOUT, eventually

from foreman import Client, ConflictError, InvalidError, Job


@pytest.fixture
def gate(agent) -> str:
    """A path a job waits for (`until [ -e $GATE ]`) and the test creates:
    it orders what the job does against what the test sees, without sleeps.
    Under the agent's root, which the job's user (nobody) can traverse."""
    d = os.path.join(agent.root, "gates")
    os.makedirs(d, mode=0o755, exist_ok=True)
    os.chmod(d, 0o755)
    return os.path.join(d, uuid.uuid4().hex)


def open_gate(path: str) -> None:
    with open(path, "w"):
        pass


@pytest.mark.parametrize(
    "command, fields, state, exit_status",
    [
        ("true", {}, "succeeded", 0),
        ("exit 3", {}, "failed", 3),
        ("sleep 30", {"timeout": "300ms"}, "failed", 124),
    ],
    ids=["success", "exit-3", "timeout"],
)
def test_submit_wait_exit_status(client: Client, command, fields, state, exit_status):
    sub = client.submit(command, max_attempts=1, **fields)
    job = client.wait(sub, timeout=JOB_TIMEOUT)
    assert job.id == sub.id
    assert job.state == state
    assert job.exit_status == exit_status
    assert len(job.attempts) == 1


def test_run_returns_exit_code_and_streams_output(client: Client):
    out = io.StringIO()
    code = client.run(["sh", "-c", "echo one; echo two; exit 5"], stdout=out, timeout=JOB_TIMEOUT)
    assert code == 5
    assert out.getvalue() == "one\ntwo\n"


def test_run_is_one_attempt_unless_asked(client: Client):
    name = "run-once-" + uuid.uuid4().hex[:8]
    assert client.run("exit 1", name=name, timeout=JOB_TIMEOUT) == 1
    (job,) = client.jobs(name=name).jobs
    assert job.spec["max_attempts"] == 1


def test_logs_of_both_streams(client: Client):
    sub = client.submit(["sh", "-c", "echo out; echo err >&2"])
    client.wait(sub, timeout=JOB_TIMEOUT)
    assert client.logs(sub) == "out\n"
    assert client.logs(sub, stream="stderr") == "err\n"


def test_follow_logs_streams_while_the_job_runs(client: Client, gate: str):
    # The job cannot print "last" before the test has seen "first": the
    # lines arrive while it runs, not when it has ended.
    sub = client.submit(["sh", "-c", f'echo first; until [ -e {gate} ]; do sleep 0.05; done; printf last'])
    seen = []
    for line in client.follow_logs(sub, timeout=JOB_TIMEOUT):
        seen.append(line)
        if line == "first":
            assert client.job(sub).state == "running"
            open_gate(gate)
    assert seen == ["first", "last"]  # the unterminated last line too
    assert client.wait(sub, timeout=JOB_TIMEOUT).succeeded


def test_follow_logs_follows_every_attempt(client: Client):
    sub = client.submit(
        ["sh", "-c", 'echo "attempt $FOREMAN_ATTEMPT"; exit 1'],
        max_attempts=2,
        backoff={"initial": "10ms", "max": "10ms"},
    )
    lines = list(client.follow_logs(sub, timeout=JOB_TIMEOUT))
    assert len(lines) == 2 and lines[0] != lines[1], lines
    assert client.wait(sub, timeout=JOB_TIMEOUT).state == "failed"


def test_cancel_a_running_job(client: Client, gate: str):
    sub = client.submit(["sh", "-c", f"until [ -e {gate} ]; do sleep 0.05; done"])
    eventually("the job runs", lambda: client.job(sub).state == "running" or None)
    client.cancel(sub, reason="test")
    job = client.wait(sub, timeout=JOB_TIMEOUT)
    assert job.state == "cancelled"
    assert job.exit_status == 130
    with pytest.raises(ConflictError) as e:
        client.cancel(sub)
    assert e.value.status == 409 and e.value.code == "conflict"


def test_retry_a_failed_job(client: Client, gate: str):
    sub = client.submit(["test", "-e", gate], max_attempts=1)
    assert client.wait(sub, timeout=JOB_TIMEOUT).state == "failed"
    open_gate(gate)
    again = client.retry(sub)
    assert not again.terminal
    job = client.wait(sub, timeout=JOB_TIMEOUT)
    assert job.state == "succeeded"
    assert [a.state for a in job.attempts] == ["failed", "succeeded"]


def test_get_and_list(client: Client):
    name = "listed-" + uuid.uuid4().hex[:8]
    a = client.submit("true", name=name + "-a", labels={"team": "py"})
    b = client.submit("true", name=name + "-b")
    client.wait(a, timeout=JOB_TIMEOUT)
    client.wait(b, timeout=JOB_TIMEOUT)
    assert [j.id for j in client.jobs(name=name).jobs] == [b.id, a.id]  # newest first
    assert [j.id for j in client.jobs(name=name, labels={"team": "py"}).jobs] == [a.id]
    page = client.jobs(name=name, limit=1)
    assert len(page.jobs) == 1 and page.next_cursor
    assert [j.id for j in client.iter_jobs(name=name, limit=1)] == [b.id, a.id]
    job = client.job(a)
    assert isinstance(job, Job) and job.name == name + "-a" and job.spec["labels"] == {"team": "py"}


def test_after_a_job_submitted_earlier(client: Client, gate: str):
    parent = client.submit(f"until [ -e {gate} ]; do sleep 0.05; done", max_attempts=1)
    ok = client.submit("true", after=[f"{parent.id}:ok"])
    notok = client.submit("true", after=[{"job": parent.id, "on": "failed"}])
    assert client.job(ok).state == "waiting"
    open_gate(gate)
    assert client.wait(ok, timeout=JOB_TIMEOUT).state == "succeeded"
    cancelled = client.wait(notok, timeout=JOB_TIMEOUT)
    assert cancelled.state == "cancelled"
    assert cancelled.reason == f"dependency after {parent.id}:failed cannot be met: job {parent.id} is succeeded"
    assert client.job(ok).spec["after"] == [{"job": parent.id, "on": "ok"}]


def test_array(client: Client):
    arr = client.submit('[ "$FOREMAN_ARRAY_INDEX" != 2 ]', array="0-4%2", max_attempts=1)
    done = client.wait(arr, timeout=JOB_TIMEOUT)
    assert done.state == "failed" and done.reason == "1 of 5 tasks failed"
    tasks = client.jobs(array=arr, limit=10).jobs
    assert [t.id for t in tasks] == [f"{arr.id}.{i}" for i in range(5)]
    assert [t.state for t in tasks] == ["succeeded", "succeeded", "failed", "succeeded", "succeeded"]
    assert client.job(arr).spec["array"] == {"start": 0, "end": 4, "parallel": 2}
    with pytest.raises(InvalidError):
        client.retry(arr, indexes="9")
    assert client.retry(arr, indexes="2").state == "running"


def test_exec(client: Client):
    job = client.submit("echo job-data > f; exec sleep 60", max_attempts=1)

    def started():
        a = client.job(job).attempts
        return a if a and a[-1].state == "running" else None

    eventually("the job's attempt running", started)
    r = client.exec(job, ["sh", "-c", "cat f; echo oops >&2; exit 3"])
    assert (r.exit_code, r.stdout, r.stderr) == (3, b"job-data\n", b"oops\n")
    assert client.exec(job, ["tr", "a-z", "A-Z"], stdin=b"hello").stdout == b"HELLO"
    assert [e.reason for e in client.timeline(job) if e.type == "attempt.exec"] == [
        "anonymous ran sh with 2 argument(s)", "anonymous ran tr with 2 argument(s)"]
    client.cancel(job)
    client.wait(job, timeout=JOB_TIMEOUT)
    with pytest.raises(ConflictError):
        client.exec(job, ["true"])


def test_idempotency_key_dedupes(client: Client):
    key = "py-test-" + uuid.uuid4().hex
    first = client.submit("true", idempotency_key=key)
    second = client.submit("true", idempotency_key=key)
    assert second.id == first.id
    assert (first.duplicate, second.duplicate) == (False, True)


def test_batch_is_all_or_nothing(client: Client):
    from foreman import InvalidError, job_spec

    name = "batch-" + uuid.uuid4().hex[:8]
    with pytest.raises(InvalidError) as e:
        client.submit_batch([job_spec("true", name=name), job_spec("true", name=name, max_attempts=0)])
    assert e.value.field == "jobs[1].max_attempts"
    assert client.jobs(name=name).jobs == []
    subs = client.submit_batch([job_spec("true", name=name), job_spec("true", name=name)])
    assert len({s.id for s in subs}) == 2


def test_gpu_usage_of_a_running_job(client: Client, gate: str):
    # The dev agent has no GPUs: the attempt holds none, which the node
    # says; once the attempt has ended the read is a conflict.
    sub = client.submit(["sh", "-c", f"until [ -e {gate} ]; do sleep 0.05; done"])
    eventually("the job runs", lambda: client.job(sub).state == "running" or None)
    u = client.gpu_usage(sub)
    assert u.job_id == sub.id and u.attempt == 1 and u.devices == [] and "no GPU" in u.note, u
    open_gate(gate)
    assert client.wait(sub, timeout=JOB_TIMEOUT).state == "succeeded"
    with pytest.raises(ConflictError):
        client.gpu_usage(sub)
