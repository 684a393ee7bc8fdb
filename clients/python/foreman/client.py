"""The client: jobs, logs and events, with workflows, schedules and
artifacts under ``client.workflows``, ``client.schedules`` and
``client.artifacts``. It reads like the CLI: ``foreman submit`` is
``client.submit``, ``foreman run`` is ``client.run``, ``foreman logs -f`` is
``client.follow_logs``."""

from __future__ import annotations

import http.client
import ssl
import uuid
from dataclasses import dataclass
from typing import IO, Any, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from . import _wait
from ._transport import Transport
from ._transport import object_id as _id
from ._transport import path_escape as _esc
from .artifacts import Artifacts
from .errors import (
    ForemanConnectionError,
    ForemanError,
    NotFoundError,
    UnavailableError,
    UnreachableError,
    WaitTimeout,
)
from .events import EventStream

# The exec stream (api/exec.go): frames of one kind byte, a 4-byte
# big-endian length and at most 64 KiB of payload.
EXEC_PROTOCOL = "foreman-exec/1"
EXEC_FRAME_MAX = 64 << 10


@dataclass
class ExecResult:
    """What an exec ended with: the command's exit code (128+N when signal
    N killed it) and what it wrote."""

    exit_code: int
    stdout: bytes
    stderr: bytes


def _exec_frame(kind: int, payload: bytes) -> bytes:
    return bytes([kind]) + len(payload).to_bytes(4, "big") + payload


def _read_exactly(fp: Any, n: int) -> bytes:
    b = fp.read(n) if n else b""
    if len(b) != n:
        raise ConnectionError("the exec stream ended before its exit frame")
    return b
from .models import TERMINAL_STATES, Event, GPUUsage, Job, JobPage, NamespaceShares, UsageReport
from .schedules import Schedules
from .specs import Command, merge_spec
from .workflows import Workflows


@dataclass
class Submitted:
    """A submitted job: its ID, and whether the idempotency key named a job
    that existed already (nothing new was created)."""

    id: str
    duplicate: bool = False

    def __str__(self) -> str:
        return self.id


class Client:
    """A client of one agent's REST API (any agent: writes are forwarded to
    the leader).

    Args:
        url: ``http://host:7070`` or ``https://...``; default ``$FOREMAN_ADDR``,
            else ``http://127.0.0.1:7070``.
        token: an ACL token (``Authorization: Bearer``); default ``$FOREMAN_TOKEN``.
        namespace: sent as ``?namespace=``; default ``$FOREMAN_NAMESPACE``.
        ca_file: the CA (PEM) that signed the agent's certificate; default
            ``$FOREMAN_CACERT``, else the system's roots.
        cert_file, key_file: a client certificate for agents that require one
            (default ``$FOREMAN_CLIENT_CERT``, ``$FOREMAN_CLIENT_KEY``).
        ssl_context: a ready ``ssl.SSLContext`` instead of the three above.
        timeout: seconds a request may wait for the agent (streams use their own).
        retries: how many times a request is sent again (see ``_transport``).
    """

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
        self._t = Transport(
            url,
            token=token,
            namespace=namespace,
            ca_file=ca_file,
            cert_file=cert_file,
            key_file=key_file,
            ssl_context=ssl_context,
            timeout=timeout,
            retries=retries,
        )
        self.workflows = Workflows(self._t, self)
        self.schedules = Schedules(self._t)
        self.artifacts = Artifacts(self._t)

    @property
    def url(self) -> str:
        return self._t.url

    def __repr__(self) -> str:
        return f"Client({self.url!r})"

    # ---- the agent ----

    def health(self) -> Dict[str, Any]:
        """``{"status": "ok", "node": ...}`` while the agent process answers."""
        return self._t.call("GET", "/v1/health", retries=0).json()

    def ready(self) -> Dict[str, Any]:
        """``{"status": "ready", "leader": ...}``; UnavailableError while no
        leader is known or the agent is catching up."""
        return self._t.call("GET", "/v1/ready", retries=0).json()

    def wait_ready(self, timeout: float = 60.0) -> Dict[str, Any]:
        """Poll /v1/ready until the agent knows a leader (WaitTimeout after timeout)."""
        deadline = _wait.deadline_of(timeout)
        wait = 0.05
        while True:
            try:
                return self.ready()
            except ForemanError as e:
                if _wait.expired(deadline):
                    raise WaitTimeout(f"{self.url} not ready after {timeout}s: {e}") from e
            _wait.sleep(wait, deadline)
            wait = min(wait * 1.5, 0.5)

    # ---- jobs ----

    def submit(
        self,
        command: Optional[Command] = None,
        *,
        spec: Optional[Mapping[str, Any]] = None,
        idempotency_key: Optional[str] = None,
        **fields: Any,
    ) -> Submitted:
        """Submit one job and return its ID.

        ``command`` is an argv list or a shell string; ``fields`` are the
        job's other fields (``name=``, ``env=``, ``cpu=``, ``memory=``,
        ``gpus=``, ``gang=``, ``max_attempts=``, ``timeout=``, ... as
        :func:`foreman.job_spec`), applied over ``spec`` (a dict as in a spec
        file) when given. Bad input raises InvalidError naming the field.

        The submit carries an idempotency key (``idempotency_key``, or one
        made here), so when the answer is lost (a broken connection, a 502,
        503 or 504) it is sent again and the server answers with the same
        job rather than creating another.
        """
        body = merge_spec(spec, command, fields)
        key = idempotency_key or body.pop("idempotency_key", None) or "py-" + uuid.uuid4().hex
        r = self._t.call("POST", "/v1/jobs", json=body, headers={"Idempotency-Key": key}, idempotent=True).json()
        return Submitted(r["id"], bool(r.get("duplicate")))

    def submit_batch(self, specs: Sequence[Mapping[str, Any]]) -> List[Submitted]:
        """Submit jobs atomically, all or none (at most 5,000). Each spec is a
        dict (build them with :func:`foreman.job_spec`); each gets an
        idempotency key unless it has one."""
        jobs = []
        for s in specs:
            body = merge_spec(s, None, {})
            body.setdefault("idempotency_key", "py-" + uuid.uuid4().hex)
            jobs.append(body)
        r = self._t.call("POST", "/v1/jobs", json={"jobs": jobs}, idempotent=True).json()
        return [Submitted(j["id"], bool(j.get("duplicate"))) for j in r["jobs"]]

    def run(
        self,
        command: Optional[Command] = None,
        *,
        spec: Optional[Mapping[str, Any]] = None,
        timeout: Optional[float] = None,
        stdout: Optional[IO[str]] = None,
        **fields: Any,
    ) -> int:
        """Submit a job, wait for it, and return its exit status as ``foreman
        run`` exits: 0, the job's exit code, 124 (timeout), 137 (oom), 130
        (cancelled) or 1. One attempt unless ``max_attempts`` says otherwise.
        ``stdout`` (a text file such as ``sys.stdout``) gets the job's output
        as it runs. Ctrl-C (KeyboardInterrupt) cancels the job; WaitTimeout
        after ``timeout`` seconds (the job keeps running)."""
        fields.setdefault("max_attempts", None if spec and "max_attempts" in spec else 1)
        job = self.submit(command, spec=spec, **fields)
        deadline = _wait.deadline_of(timeout)
        try:
            if stdout is not None:
                for line in self.follow_logs(job, timeout=_wait.left(deadline)):
                    stdout.write(line + "\n")
                    stdout.flush()
            done = self.wait(job, timeout=_wait.left(deadline))
        except KeyboardInterrupt:
            self.cancel(job, reason="cancelled from foreman.Client.run")
            raise
        status = done.exit_status
        return 1 if status is None else status

    def job(self, job: Any) -> Job:
        """A job with its attempts (GET /v1/jobs/{id})."""
        return Job.from_detail(self._t.call("GET", f"/v1/jobs/{_esc(_id(job))}").json())

    def jobs(
        self,
        *,
        state: Optional[str] = None,
        name: Optional[str] = None,
        labels: Optional[Mapping[str, str]] = None,
        queue: Optional[str] = None,
        array: Optional[Any] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> JobPage:
        """One page of jobs, newest first; pass ``page.next_cursor`` as
        ``cursor`` for the next. ``name`` is a prefix; every label must match.
        ``array`` lists the tasks of that array job, by index (without it an
        array is listed as one job)."""
        q: Dict[str, Any] = {"state": state, "name": name, "queue": queue, "limit": limit, "cursor": cursor}
        if array is not None:
            q["array"] = _id(array)
        if labels:
            q["label"] = [f"{k}={v}" for k, v in sorted(labels.items())]
        d = self._t.call("GET", "/v1/jobs", query=q).json()
        return JobPage([Job.from_json(j) for j in d.get("jobs") or []], d.get("next_cursor") or None)

    def iter_jobs(self, **filters: Any) -> Iterator[Job]:
        """Every job matching filters (as :meth:`jobs`), page after page."""
        cursor = None
        while True:
            page = self.jobs(cursor=cursor, **filters)
            yield from page.jobs
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def wait(self, job: Any, *, timeout: Optional[float] = None) -> Job:
        """Wait until the job is terminal and return it with its attempts.

        Woken by the job's events rather than polling: the job is read once,
        then the stream is opened at the raft index of that read, so no
        transition between the two is missed. WaitTimeout after ``timeout``
        seconds."""
        jid = _id(job)
        deadline = _wait.deadline_of(timeout)
        r = self._t.call("GET", f"/v1/jobs/{_esc(jid)}")
        j = Job.from_detail(r.json())
        if j.terminal:
            return j
        index = r.headers.get("x-foreman-index")
        try:
            with self.events(topics=["job"], job=jid, after=int(index) if index else None, timeout=_wait.left(deadline)) as es:
                for e in es:
                    if e.is_reset or (e.type.startswith("job.") and e.state in TERMINAL_STATES):
                        j = self.job(jid)
                        if j.terminal:
                            return j
        except ForemanError:
            pass  # no stream here (or it broke for good): poll instead
        return _wait.poll(lambda: self.job(jid), deadline, f"job {jid}")

    def cancel(self, job: Any, reason: Optional[str] = None, *, indexes: Optional[str] = None) -> Job:
        """Cancel a job (a running one once its node has killed it); of an
        array job, only the tasks ``indexes`` ("3,7-9") when given.
        ConflictError when it has already finished."""
        body = {k: v for k, v in {"reason": reason, "indexes": indexes}.items() if v} or None
        return Job.from_detail(self._t.call("POST", f"/v1/jobs/{_esc(_id(job))}/cancel", json=body).json())

    def retry(self, job: Any, *, indexes: Optional[str] = None) -> Job:
        """Queue a failed, cancelled or skipped job again with a fresh budget
        of attempts (an array: every task that did not succeed, or the tasks
        ``indexes`` such as "3,7-9"). ConflictError otherwise."""
        body = {"indexes": indexes} if indexes else None
        return Job.from_detail(self._t.call("POST", f"/v1/jobs/{_esc(_id(job))}/retry", json=body).json())

    def exec(
        self,
        job: Any,
        command: Sequence[str],
        *,
        stdin: Optional[bytes] = None,
        attempt: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> "ExecResult":
        """Run command inside the job's running attempt (its container, or
        beside a process job) and return its exit code and output
        (POST /v1/jobs/{id}/exec; needs the exec permission). ``stdin`` is
        sent to it, then closed. Every exec is an event of the job naming
        the token. ConflictError when the job is not running."""
        body = {"command": list(command), "stdin": stdin is not None}
        conn, resp = self._t.upgrade("POST", f"/v1/jobs/{_esc(_id(job))}/exec", EXEC_PROTOCOL,
                                     query={"attempt": attempt}, json=body, timeout=timeout)
        try:
            sock = conn.sock
            if stdin is not None:
                for i in range(0, len(stdin), EXEC_FRAME_MAX):
                    sock.sendall(_exec_frame(1, stdin[i:i + EXEC_FRAME_MAX]))
                sock.sendall(_exec_frame(4, b""))
            out, err = bytearray(), bytearray()
            while True:
                head = _read_exactly(resp.fp, 5)
                payload = _read_exactly(resp.fp, int.from_bytes(head[1:], "big"))
                if head[0] == 2:
                    out += payload
                elif head[0] == 3:
                    err += payload
                elif head[0] == 6:
                    return ExecResult(int.from_bytes(payload, "big", signed=True), bytes(out), bytes(err))
                elif head[0] == 7:
                    raise ForemanError(f"exec into {_id(job)}: {payload.decode('utf-8', 'replace')}")
        except OSError as e:
            raise ForemanConnectionError(f"exec into {_id(job)}: the stream broke: {e}") from e
        finally:
            conn.close()

    def result(self, job: Any) -> bytes:
        """What the job's last finished attempt wrote to ``$FOREMAN_RESULT``."""
        return self._t.call("GET", f"/v1/jobs/{_esc(_id(job))}/result").body

    def timeline(self, job: Any) -> List[Event]:
        """The job's events, oldest first (GET /v1/jobs/{id}/events)."""
        d = self._t.call("GET", f"/v1/jobs/{_esc(_id(job))}/events").json()
        return [Event.from_json(e) for e in d.get("events") or []]

    def gpu_usage(self, job: Any, *, attempt: Optional[int] = None) -> GPUUsage:
        """What a running attempt (default: the latest) uses on each GPU it
        holds: memory and SM share, measured by its node. ConflictError once
        it has ended."""
        q = {"attempt": attempt}
        return GPUUsage.from_json(self._t.call("GET", f"/v1/jobs/{_esc(_id(job))}/gpu-usage", query=q).json())

    # ---- namespaces ----

    def set_namespace(self, name: str, **fields: Any) -> Dict[str, Any]:
        """Replace a namespace's record (management): ``max_running``,
        ``max_cpu``, ``max_memory``, ``drivers``, ``allow_root``, ``volumes``,
        ``share`` (fair share, 1..1000000). An absent field is unset; a bad
        one raises InvalidError naming it and changes nothing."""
        return self._t.call("PUT", f"/v1/namespaces/{_esc(name)}", json=fields, idempotent=True).json()

    def namespace_shares(self) -> NamespaceShares:
        """Every namespace's fair share, recent and live allocation and
        current factor (GET /v1/namespaces/shares)."""
        return NamespaceShares.from_json(self._t.call("GET", "/v1/namespaces/shares").json())

    def usage(
        self,
        *,
        since: Optional[str] = None,
        until: Optional[str] = None,
        by: Optional[str] = None,
        step: Optional[str] = None,
        namespace: Optional[str] = None,
    ) -> UsageReport:
        """What finished attempts used (GET /v1/usage), as ``foreman usage``:
        since/until a duration back ("30d", "12h"), an RFC 3339 time or a
        date; by "namespace", "user" or "label:KEY"; step "hour", "day" or
        "total"; namespace one namespace or "*" (default: every one the token
        may read). InvalidError naming the field for bad input."""
        q = {"since": since, "until": until, "by": by, "step": step, "namespace": namespace}
        return UsageReport.from_json(self._t.call("GET", "/v1/usage", query=q).json())

    # ---- logs ----

    def logs(self, job: Any, *, stream: str = "stdout", attempt: Optional[int] = None) -> str:
        """An attempt's log as it is now (default: the latest attempt).
        NoAttemptError before the job was placed."""
        q = {"stream": stream, "attempt": attempt}
        return self._t.call("GET", f"/v1/jobs/{_esc(_id(job))}/logs", query=q).body.decode("utf-8", "replace")

    def follow_logs(
        self,
        job: Any,
        *,
        stream: str = "stdout",
        attempt: Optional[int] = None,
        task: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> Iterator[str]:
        """Yield the job's log lines (without their newline) as they are
        written, attempt after attempt, until the job has ended and its last
        log is drained, as ``foreman logs -f``.

        ``attempt`` follows that attempt only; ``task`` the attempts of one
        task of a gang (its ``GANG_INDEX``). Waits for the job to be placed.
        A broken connection is resumed where it stopped. WaitTimeout after
        ``timeout`` seconds."""
        jid = _id(job)
        deadline = _wait.deadline_of(timeout)
        if attempt is not None:
            yield from self._follow_attempt(jid, attempt, stream, deadline)
            return
        last = 0
        while True:
            wait = 0.05
            while True:
                j = self.job(jid)
                nums = [a.num for a in j.attempts if a.num > last and (task is None or a.task == task)]
                if nums:
                    break
                if j.terminal:
                    return
                if _wait.expired(deadline):
                    raise WaitTimeout(f"job {jid} is still {j.state}")
                _wait.sleep(wait, deadline)
                wait = min(wait * 1.5, 1.0)
            last = min(nums)
            yield from self._follow_attempt(jid, last, stream, deadline)

    def _follow_attempt(self, jid: str, num: int, stream: str, deadline: Optional[float]) -> Iterator[str]:
        q = {"stream": stream, "follow": True, "attempt": num}
        got = 0  # bytes delivered: a reconnect skips them
        pending = b""
        wait = 0.05
        while True:
            try:
                s = self._t.open("GET", f"/v1/jobs/{_esc(jid)}/logs", query=q, timeout=_read_timeout(deadline))
            except (NotFoundError, UnavailableError, UnreachableError):
                # Not started yet (no_attempt, or its files not there yet), or
                # its node is gone: ask again while the attempt is live.
                a = next((a for a in self.job(jid).attempts if a.num == num), None)
                if a is None or not a.live:
                    return
                if _wait.expired(deadline):
                    raise WaitTimeout(f"attempt {num} of job {jid} has no log yet")
                _wait.sleep(wait, deadline)
                wait = min(wait * 1.5, 1.0)
                continue
            skip = got
            try:
                while True:
                    s.set_timeout(_read_timeout(deadline))
                    chunk = s.read1(1 << 16)
                    if not chunk:
                        break
                    if skip:
                        dropped = min(skip, len(chunk))
                        chunk, skip = chunk[dropped:], skip - dropped
                    got += len(chunk)
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        yield line.decode("utf-8", "replace")
            except (OSError, http.client.HTTPException) as e:
                if _wait.expired(deadline):
                    raise WaitTimeout(f"following attempt {num} of job {jid}: {e}") from e
                continue  # resume after what was delivered
            finally:
                s.close()
            if pending:
                yield pending.decode("utf-8", "replace")
            return

    # ---- events ----

    def events(
        self,
        *,
        topics: Optional[Sequence[str]] = None,
        job: Any = None,
        workflow: Any = None,
        schedule: Optional[str] = None,
        namespace: Optional[str] = None,
        after: Union[str, int, None] = None,
        timeout: Optional[float] = None,
        reconnect: bool = True,
    ) -> EventStream:
        """The event stream (GET /v1/events), as an iterator of Events.

        ``topics``: job, node, leader, schedule, workflow (default: all).
        ``after``: resume after this event ID (``"1042-1"``, e.g. a previous
        stream's ``last_id``), or after every event of a raft index (an
        int, e.g. a read's ``X-Foreman-Index``); None: from now on.
        ``timeout`` ends the iteration after that many seconds; a broken
        stream is opened again from the last event unless ``reconnect`` is
        False."""
        return EventStream(
            self._t,
            topics=topics,
            job=_id(job) if job is not None else None,
            workflow=_id(workflow) if workflow is not None else None,
            schedule=schedule,
            namespace=namespace,
            after=after,
            timeout=timeout,
            reconnect=reconnect,
        )


def _read_timeout(deadline: Optional[float]) -> Optional[float]:
    r = _wait.left(deadline)
    return None if r is None else max(r, 0.001)

