"""What the API returns, as small dataclasses.

Each keeps the decoded JSON it came from in ``raw``: fields this package does
not name yet are there, as the server sent them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional

TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "skipped"})
LIVE_ATTEMPT_STATES = frozenset({"assigned", "running"})

# The exit codes `foreman run` uses for jobs that did not exit on their own
# (cli/run.go).
EXIT_TIMEOUT = 124
EXIT_OOM = 137
EXIT_CANCELLED = 130
EXIT_OTHER = 1

_FRACTION = re.compile(r"\.(\d+)")


def parse_time(s: Optional[str]) -> Optional[datetime]:
    """An RFC 3339 time as the server writes it (nanoseconds, ``Z``)."""
    if not s:
        return None
    s = s.replace("Z", "+00:00")
    s = _FRACTION.sub(lambda m: "." + m.group(1)[:6].ljust(6, "0"), s, count=1)
    try:
        t = datetime.fromisoformat(s)
    except ValueError:
        return None
    if t.year <= 1:  # Go's zero time
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


@dataclass
class GPU:
    """One NVIDIA device the leader picked for an attempt."""

    uuid: str
    index: int  # nvidia-smi's, CUDA's under CUDA_DEVICE_ORDER=PCI_BUS_ID
    minor: int  # the N of /dev/nvidiaN
    model: str
    memory_mib: int
    compute: str  # compute capability, "9.0"

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "GPU":
        return cls(
            uuid=d.get("uuid", ""),
            index=int(d.get("index", 0)),
            minor=int(d.get("minor", 0)),
            model=d.get("model", ""),
            memory_mib=int(d.get("memory_mib", 0)),
            compute=d.get("compute", ""),
        )


@dataclass
class GPUDeviceUse:
    """What a running attempt's processes use on one of its GPUs; None
    where nvidia-smi could not say."""

    uuid: str
    index: int
    memory_bytes: Optional[int]
    sm_ratio: Optional[float]  # 0..1 of the device's SM time over ~1 s

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "GPUDeviceUse":
        return cls(uuid=d.get("uuid", ""), index=int(d.get("index", 0)),
                   memory_bytes=d.get("memory_bytes"), sm_ratio=d.get("sm_ratio"))


@dataclass
class GPUUsage:
    """GET /v1/jobs/{id}/gpu-usage: measured by the attempt's node."""

    job_id: str
    attempt: int
    node: str
    at: Optional[datetime]
    devices: List[GPUDeviceUse]
    note: str  # why a value is missing

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "GPUUsage":
        return cls(job_id=d.get("job_id", ""), attempt=int(d.get("attempt", 0)), node=d.get("node", ""),
                   at=parse_time(d.get("at")), devices=[GPUDeviceUse.from_json(x) for x in d.get("devices") or []],
                   note=d.get("note", ""))


@dataclass
class NamespaceShare:
    """One namespace's fair-share standing (GET /v1/namespaces/shares).

    ``share`` 0 means not set (it counts as 1 while fair share is on);
    ``recent`` and ``live`` are allocations ``{"cpu": millicores, "memory":
    MiB, "gpus": n}``; ``factor`` is (recent + live) dominant share / share,
    lowest placed first among equal priorities."""

    name: str
    share: int
    normalized: float
    recent: Dict[str, float]
    recent_dominant: float
    live: Dict[str, float]
    live_dominant: float
    factor: float

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "NamespaceShare":
        return cls(name=d.get("name", ""), share=int(d.get("share", 0)), normalized=float(d.get("normalized", 0)),
                   recent=dict(d.get("recent") or {}), recent_dominant=float(d.get("recent_dominant", 0)),
                   live=dict(d.get("live") or {}), live_dominant=float(d.get("live_dominant", 0)),
                   factor=float(d.get("factor", 0)))


@dataclass
class NamespaceShares:
    """GET /v1/namespaces/shares: fair share on or off, the half-life of
    recent use, the cluster's capacity and every namespace's standing."""

    enabled: bool
    half_life_seconds: float
    capacity: Dict[str, float]
    namespaces: List[NamespaceShare]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "NamespaceShares":
        return cls(enabled=bool(d.get("enabled")), half_life_seconds=float(d.get("half_life_seconds", 0)),
                   capacity=dict(d.get("capacity") or {}),
                   namespaces=[NamespaceShare.from_json(x) for x in d.get("namespaces") or []])


@dataclass
class UsageRow:
    """One key's use in one period of a UsageReport: ``usage`` holds the
    exact integer sums (milliseconds), the other fields the same in seconds
    and GiB-seconds."""

    start: Optional[datetime]
    key: str
    usage: Dict[str, int]
    cpu_seconds: float
    cpu_requested_seconds: float
    memory_gib_seconds: float
    memory_gib_seconds_requested: float
    gpu_seconds: float
    gpu_memory_gib_seconds: float
    wall_seconds: float

    @property
    def attempts(self) -> int:
        return int(self.usage.get("attempts", 0))

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "UsageRow":
        f = lambda k: float(d.get(k, 0))  # noqa: E731
        return cls(start=parse_time(d.get("start")), key=d.get("key", ""), usage=dict(d.get("usage") or {}),
                   cpu_seconds=f("cpu_seconds"), cpu_requested_seconds=f("cpu_requested_seconds"),
                   memory_gib_seconds=f("memory_gib_seconds"),
                   memory_gib_seconds_requested=f("memory_gib_seconds_requested"),
                   gpu_seconds=f("gpu_seconds"), gpu_memory_gib_seconds=f("gpu_memory_gib_seconds"),
                   wall_seconds=f("wall_seconds"))


@dataclass
class UsageReport:
    """GET /v1/usage: what finished attempts used over [since, until)."""

    since: Optional[datetime]
    until: Optional[datetime]
    by: str
    step: str
    enabled: bool  # accounting is on
    labels: List[str]  # the label keys by="label:KEY" may name
    rows: List[UsageRow]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "UsageReport":
        return cls(since=parse_time(d.get("since")), until=parse_time(d.get("until")), by=d.get("by", ""),
                   step=d.get("step", ""), enabled=bool(d.get("enabled")), labels=list(d.get("labels") or []),
                   rows=[UsageRow.from_json(r) for r in d.get("rows") or []])


@dataclass
class Attempt:
    """One execution of a job on one node (a gang has one per task)."""

    num: int
    node: str
    state: str
    reason: Optional[str]
    exit_code: Optional[int]
    task: Optional[int]  # the gang task's index; None outside gangs
    started_at: Optional[datetime]
    finished_at: Optional[datetime]
    stderr_tail: str
    raw: Dict[str, Any] = field(repr=False)
    gpus: List[GPU] = field(default_factory=list)  # the exact devices, by the leader's pick

    @property
    def live(self) -> bool:
        return self.state in LIVE_ATTEMPT_STATES

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Attempt":
        task = d.get("task") or None
        return cls(
            num=int(d.get("attempt", 0)),
            node=d.get("node", ""),
            state=d.get("state", ""),
            reason=d.get("reason") or None,
            exit_code=d.get("exit_code"),
            task=task.get("index") if task else None,
            started_at=parse_time(d.get("started_at")),
            finished_at=parse_time(d.get("finished_at")),
            stderr_tail=d.get("stderr_tail", ""),
            raw=d,
            gpus=[GPU.from_json(g) for g in d.get("gpus") or []],
        )


@dataclass
class Job:
    """A job. ``attempts`` is filled by :meth:`Client.job` (and the calls
    that return a job's detail: wait, cancel, retry); listings leave it empty
    and say how many there are in ``attempt_count``."""

    id: str
    name: str
    state: str
    reason: Optional[str]
    exit_code: Optional[int]
    attempt_count: int
    workflow: Optional[str]
    namespace: Optional[str]
    submitted_at: Optional[datetime]
    finished_at: Optional[datetime]
    spec: Dict[str, Any] = field(repr=False)
    attempts: List[Attempt] = field(default_factory=list, repr=False)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def succeeded(self) -> bool:
        return self.state == "succeeded"

    @property
    def exit_status(self) -> Optional[int]:
        """What ``foreman run`` exits with for this job: 0 when it succeeded,
        its exit code when its last attempt failed with one, 124 for a
        timeout, 137 for oom, 130 when cancelled, else 1. None while the job
        has not ended. Needs ``attempts`` (a job from :meth:`Client.job`)."""
        if not self.terminal:
            return None
        if self.state == "succeeded":
            return 0
        last = self.attempts[-1] if self.attempts else None
        if last is not None and last.state == "killed":
            return {"timeout": EXIT_TIMEOUT, "oom": EXIT_OOM, "cancelled": EXIT_CANCELLED}.get(last.reason or "", EXIT_OTHER)
        if self.state == "cancelled":
            return EXIT_CANCELLED
        if last is not None and last.state == "failed" and last.exit_code:
            return last.exit_code
        return EXIT_OTHER

    @classmethod
    def from_json(cls, d: Dict[str, Any], attempts: Optional[List[Dict[str, Any]]] = None) -> "Job":
        spec = d.get("spec") or {}
        return cls(
            id=d["id"],
            name=spec.get("name", ""),
            state=d.get("state", ""),
            reason=d.get("reason") or None,
            exit_code=d.get("exit_code"),
            attempt_count=int(d.get("attempts", 0)),
            workflow=d.get("workflow") or None,
            namespace=spec.get("namespace") or None,
            submitted_at=parse_time(d.get("submitted_at")),
            finished_at=parse_time(d.get("finished_at")),
            spec=spec,
            attempts=[Attempt.from_json(a) for a in attempts or []],
            raw=d,
        )

    @classmethod
    def from_detail(cls, d: Dict[str, Any]) -> "Job":
        """From GET /v1/jobs/{id}: ``{"job": ..., "attempts": [...]}``."""
        j = cls.from_json(d["job"], d.get("attempts"))
        j.raw = d
        return j


@dataclass
class JobPage:
    """One page of GET /v1/jobs, newest first."""

    jobs: List[Job]
    next_cursor: Optional[str]


@dataclass
class Event:
    """One event of GET /v1/events or of a job's timeline.

    ``id`` is ``INDEX-SEQ``, the same on every node: pass it back as
    ``after`` to resume. ``type`` is ``job.succeeded``, ``attempt.started``,
    ``node.dead``, ``schedule.fired``, ... or ``reset`` (the stream lost its
    place: re-list what you cache, then carry on)."""

    id: str
    index: int
    seq: int
    topic: str
    type: str
    job_id: Optional[str]
    attempt: Optional[int]
    node: Optional[str]
    state: Optional[str]
    reason: Optional[str]
    workflow: Optional[str]
    schedule: Optional[str]
    namespace: Optional[str]
    at: Optional[datetime]
    raw: Dict[str, Any] = field(repr=False)

    @property
    def is_reset(self) -> bool:
        return self.type == "reset"

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Event":
        return cls(
            id=str(d.get("id", "")),
            index=int(d.get("index", 0)),
            seq=int(d.get("seq", 0)),
            topic=d.get("topic", ""),
            type=d.get("type", ""),
            job_id=d.get("job_id") or None,
            attempt=d.get("attempt") or None,
            node=d.get("node") or None,
            state=d.get("state") or None,
            reason=d.get("reason") or None,
            workflow=d.get("workflow") or None,
            schedule=d.get("schedule") or None,
            namespace=d.get("namespace") or None,
            at=parse_time(d.get("at")),
            raw=d,
        )


@dataclass
class Artifact:
    path: str
    size: int


@dataclass
class ArtifactList:
    """The artifacts of one attempt (GET /v1/jobs/{id}/artifacts)."""

    job_id: str
    attempt: int
    node: str
    artifacts: List[Artifact]
    total_bytes: int
    warning: Optional[str]
    raw: Dict[str, Any] = field(repr=False)
    # The object store the node uploads to (None without one) and where the
    # upload stands: "pending", "stored" or "partial" (then not_stored).
    store: Optional[str] = None
    stored: Optional[str] = None
    not_stored: List[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ArtifactList":
        return cls(
            job_id=d.get("job_id", ""),
            attempt=int(d.get("attempt", 0)),
            node=d.get("node", ""),
            artifacts=[Artifact(a["path"], int(a.get("size", 0))) for a in d.get("artifacts") or []],
            total_bytes=int(d.get("total_bytes", 0)),
            warning=d.get("warning") or None,
            raw=d,
            store=d.get("store") or None,
            stored=d.get("stored") or None,
            not_stored=list(d.get("not_stored") or []),
        )


@dataclass
class WorkflowRun:
    """The answer to a workflow submit: its ID and each job's ID by name."""

    id: str
    duplicate: bool
    jobs: Dict[str, str]


@dataclass
class WorkflowJob:
    """One job of a workflow's status, with the edge that decided it."""

    name: str
    id: str
    state: str
    reason: Optional[str]
    depends_on: List[str]
    condition: Optional[str]
    decision: Optional[str]  # released | skipped
    decided_by: Optional[str]  # the parent's name
    attempts: int
    exit_code: Optional[int]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "WorkflowJob":
        return cls(
            name=d.get("name", ""),
            id=d.get("id", ""),
            state=d.get("state", ""),
            reason=d.get("reason") or None,
            depends_on=list(d.get("depends_on") or []),
            condition=d.get("condition") or None,
            decision=d.get("decision") or None,
            decided_by=d.get("decided_by") or None,
            attempts=int(d.get("attempts", 0)),
            exit_code=d.get("exit_code"),
        )


@dataclass
class WorkflowStatus:
    """A workflow (GET /v1/workflows/{id}); ``jobs`` by name, in submit
    order (every page read); a listing leaves ``jobs`` empty."""

    id: str
    name: str
    state: str  # running | succeeded | failed | cancelled
    job_count: int
    counts: Dict[str, int]
    submitted_at: Optional[datetime]
    finished_at: Optional[datetime]
    jobs: Dict[str, WorkflowJob] = field(default_factory=dict, repr=False)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def terminal(self) -> bool:
        return self.state != "running"

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "WorkflowStatus":
        return cls(
            id=d.get("id", ""),
            name=d.get("name", ""),
            state=d.get("state", ""),
            job_count=int(d.get("jobs", 0)),
            counts=dict(d.get("counts") or {}),
            submitted_at=parse_time(d.get("submitted_at")),
            finished_at=parse_time(d.get("finished_at")),
            jobs={j["name"]: WorkflowJob.from_json(j) for j in d.get("job_list") or []},
            raw=d,
        )


@dataclass
class Fire:
    """One decided tick of a schedule: fired (``job_id``) or skipped (why)."""

    tick: Optional[datetime]
    at: Optional[datetime]
    job_id: Optional[str]  # the workflow's ID when ``workflow``
    manual: bool
    skipped: Optional[str]
    outcome: Optional[str]  # the job's (workflow's) state, "gone" after GC
    workflow: bool

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Fire":
        return cls(
            tick=parse_time(d.get("tick")),
            at=parse_time(d.get("at")),
            job_id=d.get("job_id") or None,
            manual=bool(d.get("manual")),
            skipped=d.get("skipped") or None,
            outcome=d.get("outcome") or None,
            workflow=bool(d.get("workflow")),
        )


@dataclass
class Schedule:
    """A schedule with its next tick and its last fires (oldest first)."""

    name: str
    cron: str
    time_zone: str
    paused: bool
    next_fire: Optional[str]  # in the schedule's zone, RFC 3339
    next_fire_utc: Optional[datetime]
    fired: int
    skipped: int
    fires: List[Fire]
    spec: Dict[str, Any] = field(repr=False)
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Schedule":
        spec = d.get("spec") or {}
        return cls(
            name=spec.get("name", ""),
            cron=spec.get("cron", ""),
            time_zone=spec.get("time_zone") or "UTC",
            paused=bool(spec.get("paused")),
            next_fire=d.get("next_fire") or None,
            next_fire_utc=parse_time(d.get("next_fire_utc")),
            fired=int(d.get("fired", 0)),
            skipped=int(d.get("skipped", 0)),
            fires=[Fire.from_json(f) for f in d.get("fires") or []],
            spec=spec,
            raw=d,
        )
