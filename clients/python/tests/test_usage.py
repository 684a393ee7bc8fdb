"""client.usage(): what finished attempts used, as `foreman usage`."""

from __future__ import annotations

import pytest
from conftest import eventually

from foreman import Client, InvalidError


def test_usage_counts_a_finished_job(client: Client):
    before = {r.key: r.attempts for r in client.usage(since="1h").rows}
    job = client.wait(client.submit("true", namespace="pyusage"))
    assert job.state == "succeeded"

    def counted():
        rep = client.usage(since="1h", by="namespace")
        rows = {r.key: r for r in rep.rows}
        if not rep.enabled or rows.get("pyusage") is None or rows["pyusage"].attempts <= before.get("pyusage", 0):
            return None
        return rep

    rep = eventually("the job's attempt in usage", counted)
    assert rep.by == "namespace" and rep.step == "total"
    row = next(r for r in rep.rows if r.key == "pyusage")
    assert row.attempts == 1 and row.wall_seconds >= 0 and row.usage["attempts"] == 1


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"by": "colour"}, "by"),
        ({"since": "yesterday"}, "since"),
        ({"since": "400d"}, "since"),
        ({"step": "week"}, "step"),
    ],
)
def test_usage_refusals_name_the_field(client: Client, kwargs, field):
    with pytest.raises(InvalidError) as e:
        client.usage(**kwargs)
    assert (e.value.status, e.value.field) == (400, field), repr(e.value)
