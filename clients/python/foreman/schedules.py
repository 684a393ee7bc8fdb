"""Schedules: a job (or a workflow) fired at every tick of a cron spec."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from ._transport import path_escape as _esc
from .models import Schedule
from .specs import Command, job_spec, to_json
from .workflows import Workflow

if TYPE_CHECKING:
    from ._transport import Transport


class Schedules:
    """``client.schedules``: create, list, pause, resume, trigger, delete."""

    def __init__(self, transport: "Transport") -> None:
        self._t = transport

    def create(
        self,
        name: str,
        cron: str,
        command: Optional[Command] = None,
        *,
        job: Optional[Dict[str, Any]] = None,
        workflow: Union[Workflow, Dict[str, Any], None] = None,
        time_zone: Optional[str] = None,
        overlap: Optional[str] = None,
        catch_up: Optional[str] = None,
        max_catch_up: Optional[int] = None,
        start_at: Union[datetime, str, None] = None,
        end_at: Union[datetime, str, None] = None,
        paused: Optional[bool] = None,
        **job_fields: Any,
    ) -> Schedule:
        """Create a schedule. ``cron`` is 5 fields, 6 with seconds, or
        ``@daily``, ``@every 30s``...; the template is ``command`` plus job
        fields (as :func:`foreman.job_spec`), or a ``job`` spec dict, or a
        ``workflow``. ``overlap``: allow | forbid | replace; ``catch_up``:
        skip | latest | all. A name in use raises ConflictError."""
        body = _body(name, cron, command, job, workflow, time_zone, overlap, catch_up, max_catch_up, start_at, end_at, paused, job_fields)
        return Schedule.from_json(self._t.call("POST", "/v1/schedules", json=body).json())

    def update(
        self,
        name: str,
        cron: str,
        command: Optional[Command] = None,
        *,
        job: Optional[Dict[str, Any]] = None,
        workflow: Union[Workflow, Dict[str, Any], None] = None,
        time_zone: Optional[str] = None,
        overlap: Optional[str] = None,
        catch_up: Optional[str] = None,
        max_catch_up: Optional[int] = None,
        start_at: Union[datetime, str, None] = None,
        end_at: Union[datetime, str, None] = None,
        paused: Optional[bool] = None,
        **job_fields: Any,
    ) -> Schedule:
        """Replace a schedule's whole spec (``paused`` included: leaving it
        out resumes a paused schedule); its ticks count from now."""
        body = _body(name, cron, command, job, workflow, time_zone, overlap, catch_up, max_catch_up, start_at, end_at, paused, job_fields)
        return Schedule.from_json(self._t.call("PUT", f"/v1/schedules/{_esc(name)}", json=body, idempotent=True).json())

    def get(self, name: str) -> Schedule:
        return Schedule.from_json(self._t.call("GET", f"/v1/schedules/{_esc(name)}").json())

    def list(self) -> List[Schedule]:
        """Every schedule of the namespace, in name order."""
        d = self._t.call("GET", "/v1/schedules").json()
        return [Schedule.from_json(s) for s in d.get("schedules") or []]

    def pause(self, name: str) -> Schedule:
        """A paused schedule fires nothing, not even catch-up ticks on resume."""
        return Schedule.from_json(self._t.call("POST", f"/v1/schedules/{_esc(name)}/pause", idempotent=True).json())

    def resume(self, name: str) -> Schedule:
        return Schedule.from_json(self._t.call("POST", f"/v1/schedules/{_esc(name)}/resume", idempotent=True).json())

    def trigger(self, name: str) -> str:
        """Fire once now (recorded as manual) and return the job's ID (the
        workflow's, for a workflow schedule). ConflictError when the overlap
        policy skipped it."""
        return str(self._t.call("POST", f"/v1/schedules/{_esc(name)}/trigger").json()["job_id"])

    def delete(self, name: str) -> None:
        """Remove the schedule; the jobs it fired stay."""
        self._t.call("DELETE", f"/v1/schedules/{_esc(name)}")


def _body(
    name: str,
    cron: str,
    command: Optional[Command],
    job: Optional[Dict[str, Any]],
    workflow: Union[Workflow, Dict[str, Any], None],
    time_zone: Optional[str],
    overlap: Optional[str],
    catch_up: Optional[str],
    max_catch_up: Optional[int],
    start_at: Union[datetime, str, None],
    end_at: Union[datetime, str, None],
    paused: Optional[bool],
    job_fields: Dict[str, Any],
) -> Dict[str, Any]:
    body: Dict[str, Any] = {"name": name, "cron": cron}
    if command is not None or job_fields:
        tmpl = dict(to_json(job) if job else {})
        tmpl.update(job_spec(command, **job_fields))
        body["job"] = tmpl
    elif job is not None:
        body["job"] = to_json(job)
    if workflow is not None:
        body["workflow"] = workflow.to_dict() if isinstance(workflow, Workflow) else to_json(workflow)
    extra = {
        "time_zone": time_zone,
        "overlap": overlap,
        "catch_up": catch_up,
        "max_catch_up": max_catch_up,
        "start_at": start_at,
        "end_at": end_at,
        "paused": paused,
    }
    body.update(to_json({k: v for k, v in extra.items() if v is not None}))
    return body
