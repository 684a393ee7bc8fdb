"""Workflows built in Python: refused before submit when the server would
refuse them (with the server's own words), and run as a DAG."""

from __future__ import annotations

import pytest
from conftest import JOB_TIMEOUT

from foreman import Client, InvalidError, Workflow, WorkflowError


def bad_dags():
    unknown = Workflow("unknown")
    unknown.job("a", "true")
    unknown.job("b", "true", depends_on=["a", "x"])

    cycle = Workflow("cycle")
    cycle.job("a", "true", depends_on=["c"])
    cycle.job("b", "true", depends_on=["a"])
    cycle.job("c", "true", depends_on=["b"])

    selfdep = Workflow("self")
    selfdep.job("a", "true", depends_on=["a"])

    condition = Workflow("condition")
    condition.job("a", "true")
    condition.job("b", "true", depends_on=["a"], condition="sometimes")

    badname = Workflow("badname")
    badname.job("no spaces", "true")
    return [
        ("unknown", unknown, "jobs[1].depends_on[1]", 'no job named "x"'),
        ("cycle", cycle, "jobs[0].depends_on", "cycle a -> c -> b -> a"),
        ("self", selfdep, "jobs[0].depends_on[0]", "depends on itself"),
        ("condition", condition, "jobs[1].condition", "unknown condition"),
        ("name", badname, "jobs[0].name", "use letters"),
    ]


@pytest.mark.parametrize("wf, field, words", [c[1:] for c in bad_dags()], ids=[c[0] for c in bad_dags()])
def test_refused_before_submit(client: Client, wf: Workflow, field, words):
    with pytest.raises(WorkflowError) as e:
        wf.validate()
    assert e.value.field == field
    assert words in str(e.value)
    # The same DAG sent as it is: the server refuses it naming the same field.
    body = {"name": wf.name, "jobs": [t.to_dict() for t in wf.jobs]}
    with pytest.raises(InvalidError) as s:
        client.workflows.submit(body)
    assert s.value.field == field, s.value
    with pytest.raises(WorkflowError):
        client.workflows.submit(wf)


def test_cycle_message_is_the_servers(client: Client):
    wf = bad_dags()[1][1]
    with pytest.raises(WorkflowError) as e:
        wf.validate()
    with pytest.raises(InvalidError) as s:
        client.workflows.submit({"name": wf.name, "jobs": [t.to_dict() for t in wf.jobs]})
    assert str(e.value) == s.value.message


def test_duplicate_name_raises_at_once():
    wf = Workflow("dup")
    wf.job("a", "true")
    with pytest.raises(WorkflowError) as e:
        wf.job("a", "false")
    assert e.value.field == "jobs[1].name"
    assert "unique" in str(e.value)


def test_operators_build_edges():
    wf = Workflow("ops")
    a, b, c, d = (wf.job(n, "true") for n in "abcd")
    a >> [b, c] >> d
    assert [t.depends_on for t in wf.jobs] == [[], ["a"], ["a"], ["b", "c"]]
    wf.validate()


def test_dag_runs(client: Client):
    # extract -> (count, copy) -> report; alert only on failure: skipped.
    wf = Workflow("py-etl")
    extract = wf.job("extract", 'printf "a\\nb\\nc\\n" > "$FOREMAN_RESULT"')
    count = wf.job("count", 'wc -l < "$FOREMAN_INPUTS/extract/result" > "$FOREMAN_RESULT"')
    copy = wf.job("copy", 'cp "$FOREMAN_INPUTS/extract/result" "$FOREMAN_RESULT"')
    report = wf.job("report", 'echo "$(cat $FOREMAN_INPUTS/count/result) lines"')
    alert = wf.job("alert", "echo failed", condition="failure")
    extract >> [count, copy]
    [count, copy] >> report >> alert

    run = client.workflows.submit(wf)
    assert set(run.jobs) == {"extract", "count", "copy", "report", "alert"}
    status = client.workflows.wait(run, timeout=JOB_TIMEOUT)
    assert status.state == "succeeded"
    states = {n: j.state for n, j in status.jobs.items()}
    assert states == {"extract": "succeeded", "count": "succeeded", "copy": "succeeded", "report": "succeeded", "alert": "skipped"}
    assert (status.jobs["alert"].decision, status.jobs["alert"].decided_by) == ("skipped", "report")
    assert client.logs(run.jobs["report"]).strip() == "3 lines"
    assert client.result(run.jobs["copy"]) == b"a\nb\nc\n"
    assert any(w.id == run.id for w in client.workflows.list())
