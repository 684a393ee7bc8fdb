"""Workflows: a DAG of named jobs built in Python, checked before it is sent.

>>> wf = Workflow("etl")
>>> extract = wf.job("extract", "echo rows > $FOREMAN_RESULT")
>>> transform = wf.job("transform", "wc -c $FOREMAN_INPUTS/extract/result")
>>> alert = wf.job("alert", "echo failed", condition="failure")
>>> extract >> transform >> alert
Task('alert')
>>> [t.depends_on for t in wf.jobs]
[[], ['extract'], ['transform']]

:meth:`Workflow.validate` refuses what the server would (an unknown
dependency, a cycle, a duplicate or invalid name, a self-dependency, an
unknown condition), with the field the server would name, so a bad DAG never
leaves the notebook. The server checks again: it is the authority.
"""

from __future__ import annotations

import json
import re
import uuid
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Union

from . import _wait
from ._transport import object_id as _id
from ._transport import path_escape as _esc
from .errors import ForemanError, WorkflowError
from .models import WorkflowRun, WorkflowStatus
from .specs import Command, job_spec, to_json

if TYPE_CHECKING:
    from ._transport import Transport

CONDITIONS = ("success", "failure", "always", "one_success")
MAX_JOBS = 10_000  # fsm.MaxWorkflowJobs
_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")  # fsm.ValidJobName

Parent = Union[str, "Task"]


class Task:
    """One job of a :class:`Workflow`. ``a >> b`` makes b depend on a (and
    returns b, so chains read left to right); ``[a, b] >> c`` makes c wait
    for both."""

    def __init__(self, workflow: "Workflow", name: str, spec: Dict[str, Any], depends_on: List[str], condition: Optional[str]):
        self.workflow = workflow
        self.name = name
        self.spec = spec
        self.depends_on = depends_on
        self.condition = condition

    def after(self, *parents: Union[Parent, Sequence[Parent]]) -> "Task":
        """Make this job depend on parents (tasks or names)."""
        for p in parents:
            if isinstance(p, (list, tuple, set)):
                self.after(*p)
                continue
            name = p.name if isinstance(p, Task) else str(p)
            if name not in self.depends_on:
                self.depends_on.append(name)
        return self

    def __rshift__(self, other: Union["Task", Sequence["Task"]]) -> Any:
        if isinstance(other, (list, tuple)):
            for o in other:
                o.after(self)
            return other
        return other.after(self)

    def __rrshift__(self, other: Sequence["Task"]) -> "Task":
        return self.after(*other)

    def to_dict(self) -> Dict[str, Any]:
        d = dict(self.spec)
        d["name"] = self.name
        if self.depends_on:
            d["depends_on"] = list(self.depends_on)
        if self.condition:
            d["condition"] = self.condition
        return d

    def __repr__(self) -> str:
        return f"Task({self.name!r})"


class Workflow:
    """A named DAG of named jobs, submitted atomically with
    ``client.workflows.submit(wf)``."""

    def __init__(self, name: str, *, namespace: Optional[str] = None) -> None:
        self.name = name
        self.namespace = namespace
        self._tasks: Dict[str, Task] = {}

    @property
    def jobs(self) -> List[Task]:
        return list(self._tasks.values())

    def __getitem__(self, name: str) -> Task:
        return self._tasks[name]

    def job(
        self,
        name: str,
        command: Optional[Command] = None,
        *,
        depends_on: Iterable[Parent] = (),
        condition: Optional[str] = None,
        spec: Optional[Dict[str, Any]] = None,
        **fields: Any,
    ) -> Task:
        """Add a job: a name unique in the workflow, its command and any job
        field (as :func:`foreman.job_spec`); ``depends_on`` names parents
        (or their tasks), which may be added later; ``condition`` is
        ``success`` (default), ``failure``, ``always`` or ``one_success``.
        A name already used raises :class:`WorkflowError` at once."""
        if name in self._tasks:
            i = list(self._tasks).index(name)
            raise WorkflowError(f"jobs[{len(self._tasks)}].name", f"{_q(name)} is also the name of jobs[{i}]; names are unique within a workflow")
        s = dict(to_json(spec) if spec else {})
        s.update(job_spec(command, **fields))
        for k in ("name", "depends_on", "condition"):
            s.pop(k, None)
        t = Task(self, name, s, [], condition)
        t.after(*depends_on)
        self._tasks[name] = t
        return t

    def validate(self) -> None:
        """Raise :class:`WorkflowError` for what the server would refuse."""
        if not self.name:
            raise WorkflowError("name", "must not be empty")
        if len(self.name) > 200 or any(ord(c) < 32 or ord(c) == 127 for c in self.name):
            raise WorkflowError("name", "must be at most 200 printable characters")
        tasks = self.jobs
        if not tasks:
            raise WorkflowError("jobs", "a workflow needs at least one job")
        if len(tasks) > MAX_JOBS:
            raise WorkflowError("jobs", f"at most {MAX_JOBS} jobs per workflow (got {len(tasks)})")
        pos: Dict[str, int] = {}
        for i, t in enumerate(tasks):
            if not _NAME.match(t.name) or t.name in (".", ".."):
                raise WorkflowError(f"jobs[{i}].name", f"{_q(t.name)}: use letters, digits, '-', '_' and '.' (at most 128)")
            if t.name in pos:
                raise WorkflowError(f"jobs[{i}].name", f"{_q(t.name)} is also the name of jobs[{pos[t.name]}]; names are unique within a workflow")
            pos[t.name] = i
        for i, t in enumerate(tasks):
            if t.condition is not None and t.condition not in CONDITIONS:
                raise WorkflowError(f"jobs[{i}].condition", f"unknown condition {_q(t.condition)} (want {', '.join(CONDITIONS)})")
            if t.condition is not None and not t.depends_on:
                raise WorkflowError(f"jobs[{i}].condition", "needs depends_on")
            seen = set()
            for k, d in enumerate(t.depends_on):
                field = f"jobs[{i}].depends_on[{k}]"
                if d not in pos:
                    raise WorkflowError(field, f"no job named {_q(d)} in this workflow")
                if d == t.name:
                    raise WorkflowError(field, f"{_q(d)} depends on itself")
                if d in seen:
                    raise WorkflowError(field, f"{_q(d)} is listed twice")
                seen.add(d)
        cycle = find_cycle(tasks, pos)
        if cycle:
            raise WorkflowError(f"jobs[{cycle[0]}].depends_on", "cycle " + " -> ".join(tasks[i].name for i in cycle))

    def to_dict(self) -> Dict[str, Any]:
        """The body of POST /v1/workflows (validated first)."""
        self.validate()
        d: Dict[str, Any] = {"name": self.name, "jobs": [t.to_dict() for t in self.jobs]}
        if self.namespace:
            d["namespace"] = self.namespace
        return d


def _q(s: str) -> str:
    """s quoted as Go's %q quotes it, so messages read as the server's."""
    return json.dumps(s, ensure_ascii=False)


def find_cycle(tasks: List[Task], pos: Dict[str, int]) -> Optional[List[int]]:
    """The positions of the jobs on one cycle, the first repeated at the end
    ("a -> b": a depends on b), or None; as fsm.FindCycle."""
    unseen, on_path, done = 0, 1, 2
    mark = [unseen] * len(tasks)
    for start in range(len(tasks)):
        if mark[start] != unseen:
            continue
        stack = [[start, 0]]
        mark[start] = on_path
        while stack:
            top = stack[-1]
            deps = tasks[top[0]].depends_on
            if top[1] == len(deps):
                mark[top[0]] = done
                stack.pop()
                continue
            p = pos.get(deps[top[1]])
            top[1] += 1
            if p is None:
                continue
            if mark[p] == unseen:
                mark[p] = on_path
                stack.append([p, 0])
            elif mark[p] == on_path:
                k = len(stack) - 1
                while stack[k][0] != p:
                    k -= 1
                return [f[0] for f in stack[k:]] + [p]
    return None


class Workflows:
    """``client.workflows``: submit, read, wait for, cancel and retry workflows."""

    def __init__(self, transport: "Transport", client: Any) -> None:
        self._t = transport
        self._client = client

    def submit(self, workflow: Union[Workflow, Dict[str, Any]], *, idempotency_key: Optional[str] = None) -> WorkflowRun:
        """Submit a workflow: all its jobs or none. A :class:`Workflow` is
        validated first (raising :class:`WorkflowError`). The submit carries
        an idempotency key (one is made when none is given), so a retry after
        a lost answer returns the first workflow."""
        body = workflow.to_dict() if isinstance(workflow, Workflow) else to_json(dict(workflow))
        key = idempotency_key or body.pop("idempotency_key", None) or "py-" + uuid.uuid4().hex
        r = self._t.call("POST", "/v1/workflows", json=body, headers={"Idempotency-Key": key}, idempotent=True).json()
        return WorkflowRun(id=r["id"], duplicate=bool(r.get("duplicate")), jobs={j["name"]: j["id"] for j in r.get("jobs") or []})

    def get(self, workflow_id: Any) -> WorkflowStatus:
        """The workflow with every job (all pages)."""
        wid = _id(workflow_id)
        d = self._t.call("GET", f"/v1/workflows/{_esc(wid)}").json()
        while d.get("next_from"):
            page = self._t.call("GET", f"/v1/workflows/{_esc(wid)}", query={"from": d["next_from"]}).json()
            d["job_list"] = (d.get("job_list") or []) + (page.get("job_list") or [])
            d["next_from"] = page.get("next_from")
        return WorkflowStatus.from_json(d)

    def list(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> List[WorkflowStatus]:
        """One page of workflows, newest first (without their jobs)."""
        d = self._t.call("GET", "/v1/workflows", query={"limit": limit, "cursor": cursor}).json()
        return [WorkflowStatus.from_json(w) for w in d.get("workflows") or []]

    def cancel(self, workflow_id: Any, reason: Optional[str] = None) -> WorkflowStatus:
        """Cancel every job of the workflow that has not finished."""
        d = self._t.call("DELETE", f"/v1/workflows/{_esc(_id(workflow_id))}", json={"reason": reason} if reason else None).json()
        return WorkflowStatus.from_json(d)

    def retry(self, workflow_id: Any) -> WorkflowStatus:
        """Re-run the failed, cancelled and skipped jobs, keeping the succeeded ones."""
        d = self._t.call("POST", f"/v1/workflows/{_esc(_id(workflow_id))}/retry").json()
        return WorkflowStatus.from_json(d)

    def wait(self, workflow_id: Any, *, timeout: Optional[float] = None) -> WorkflowStatus:
        """Wait until the workflow has finished (woken by its
        ``workflow.finished`` event) and return it; :class:`WaitTimeout`
        after ``timeout`` seconds."""
        wid = _id(workflow_id)
        deadline = _wait.deadline_of(timeout)
        r = self._t.call("GET", f"/v1/workflows/{_esc(wid)}", query={"limit": 1})
        if WorkflowStatus.from_json(r.json()).terminal:
            return self.get(wid)
        after = r.headers.get("x-foreman-index")
        try:
            with self._client.events(topics=["workflow"], workflow=wid, after=int(after) if after else None, timeout=_wait.left(deadline)) as es:
                for e in es:
                    if e.is_reset or e.type == "workflow.finished":
                        w = self.get(wid)
                        if w.terminal:
                            return w
        except ForemanError:
            pass  # no stream here: poll
        return _wait.poll(lambda: self.get(wid), deadline, f"workflow {wid}")
