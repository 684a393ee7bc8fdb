"""Job specs as the API takes them (docs/api.md, "POST /v1/jobs").

A spec is a plain dict of the API's fields. :func:`job_spec` builds one from
Python values; the server validates it (an unknown or bad field comes back
as an :class:`~foreman.errors.InvalidError` naming it), so nothing here
second-guesses the server's rules.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Mapping, Optional, Sequence, Union

Command = Union[str, Sequence[str]]


def job_spec(command: Optional[Command] = None, **fields: Any) -> Dict[str, Any]:
    """A job spec: ``command`` (an argv list, or a string run by ``/bin/sh
    -c``) plus any field of ``POST /v1/jobs`` as a keyword: ``name``,
    ``env``, ``resources``, ``priority``, ``max_attempts``, ``timeout``,
    ``labels``, ``driver``, ``queue``, ``constraints``, ``gang``,
    ``depends_on``, ``condition``, ``after`` (``["ID:ok", {"job": ID, "on": "any"}]``:
    jobs submitted earlier, each with what it must end as), ``http``, ``notify``, ...

    Conveniences: ``cpu=``, ``memory=``, ``gpus=`` and ``gpu_memory=`` fill ``resources``
    (``cpu="500m"``, ``memory="1GiB"``, ``gpus=1`` is ``gpus: 1``: whole GPUs, the leader picks which;
    ``gpu_memory="20GiB"``: a share of one GPU's memory);
    ``gang=3`` is ``{"size": 3}``; durations may be ``timedelta`` and times
    ``datetime`` (a naive one is taken as UTC); None values are left out.

    >>> job_spec(["echo", "hi"], name="greet", cpu="250m", timeout=timedelta(minutes=5))
    {'command': ['echo', 'hi'], 'name': 'greet', 'timeout': 300.0, 'resources': {'cpu': '250m'}}
    """
    spec: Dict[str, Any] = {}
    if command is not None:
        spec["command"] = command if isinstance(command, str) else [str(a) for a in command]
    cpu, memory, gpus = fields.pop("cpu", None), fields.pop("memory", None), fields.pop("gpus", None)
    gpu_memory = fields.pop("gpu_memory", None)
    for k, v in fields.items():
        if v is not None:
            spec[k] = to_json(v)
    if cpu is not None or memory is not None or gpus is not None or gpu_memory is not None:
        res = dict(spec.get("resources") or {})
        if cpu is not None:
            res["cpu"] = cpu
        if memory is not None:
            res["memory"] = memory
        if gpus is not None:
            res["gpus"] = gpus
        if gpu_memory is not None:
            res["gpu_memory"] = gpu_memory
        spec["resources"] = res
    if isinstance(spec.get("gang"), int):
        spec["gang"] = {"size": spec["gang"]}
    return spec


def merge_spec(spec: Optional[Mapping[str, Any]], command: Optional[Command], fields: Dict[str, Any]) -> Dict[str, Any]:
    """``spec`` (a dict, e.g. read from a YAML or JSON file) with ``command``
    and ``fields`` applied over it."""
    out = dict(to_json(dict(spec)) if spec else {})
    out.update(job_spec(command, **fields))
    return out


def to_json(v: Any) -> Any:
    """v with timedeltas as seconds and datetimes as RFC 3339, recursively."""
    if isinstance(v, timedelta):
        return v.total_seconds()
    if isinstance(v, datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=timezone.utc)
        return v.isoformat()
    if isinstance(v, Mapping):
        return {k: to_json(x) for k, x in v.items() if x is not None}
    if isinstance(v, (list, tuple)):
        return [to_json(x) for x in v]
    return v
