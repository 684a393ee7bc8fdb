"""Artifacts: the files a job leaves under ``$FOREMAN_ARTIFACTS``
(``/foreman/artifacts`` in a container), kept on its node and served by any."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, List, Optional

from ._transport import object_id as _id
from ._transport import path_escape as _esc
from .errors import ForemanConnectionError
from .models import ArtifactList

if TYPE_CHECKING:
    from ._transport import Transport


class Artifacts:
    """``client.artifacts``: list, read and download a job's artifacts."""

    def __init__(self, transport: "Transport") -> None:
        self._t = transport

    def list(self, job: Any, *, attempt: Optional[int] = None) -> ArtifactList:
        """The artifacts of an attempt (default: the job's last finished one)."""
        d = self._t.call("GET", f"/v1/jobs/{_esc(_id(job))}/artifacts", query={"attempt": attempt}).json()
        return ArtifactList.from_json(d)

    def read(self, job: Any, path: str, *, attempt: Optional[int] = None) -> bytes:
        """One artifact's bytes (``path`` as listed, e.g. ``out/data.csv``)."""
        return self._t.call("GET", _artifact_path(_id(job), path), query={"attempt": attempt}).body

    def download(self, job: Any, dest: str = ".", *, path: Optional[str] = None, attempt: Optional[int] = None) -> List[str]:
        """Write the attempt's artifacts (or only ``path``) under ``dest``,
        keeping their relative paths; return the local paths written."""
        jid = _id(job)
        listing = self.list(jid, attempt=attempt)
        wanted = [a for a in listing.artifacts if path is None or a.path == path]
        if path is not None and not wanted:
            # Let the server say why (404 naming the path).
            self.read(jid, path, attempt=listing.attempt)
        root = os.path.realpath(dest)
        written = []
        for a in wanted:
            local = os.path.realpath(os.path.join(root, *a.path.split("/")))
            if not local.startswith(root + os.sep):
                raise ValueError(f"artifact path {a.path!r} leaves {dest!r}")
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with self._t.open("GET", _artifact_path(jid, a.path), query={"attempt": listing.attempt}) as s, open(local, "wb") as f:
                n = 0
                while True:
                    chunk = s.read1(1 << 16)
                    if not chunk:
                        break
                    f.write(chunk)
                    n += len(chunk)
            if n != a.size:
                raise ForemanConnectionError(f"artifact {a.path} of {jid}: got {n} of {a.size} bytes")
            written.append(local)
        return written


def _artifact_path(job_id: str, path: str) -> str:
    return f"/v1/jobs/{_esc(job_id)}/artifacts/" + "/".join(_esc(e) for e in path.split("/"))
