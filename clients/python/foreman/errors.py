"""Typed errors.

Every non-2xx answer of the API becomes an :class:`APIError` (or one of its
subclasses, chosen by the server's ``code``), carrying the HTTP status, the
server's ``code`` and message, and the field the message names. The server's
error body is ``{"error": "<field>: <reason>", "code": "<code>"}``
(httpapi/errors.go); for ``invalid`` the message starts with the field.
"""

from __future__ import annotations

import re
from typing import Optional

__all__ = [
    "ForemanError",
    "APIError",
    "InvalidError",
    "UnauthorizedError",
    "ForbiddenError",
    "NotFoundError",
    "NoAttemptError",
    "ConflictError",
    "TooLargeError",
    "OverloadedError",
    "UnavailableError",
    "UnreachableError",
    "ApplyTimeoutError",
    "ForemanConnectionError",
    "WaitTimeout",
    "WorkflowError",
]


class ForemanError(Exception):
    """Base of every error this package raises."""


class APIError(ForemanError):
    """A non-2xx answer from an agent.

    Attributes:
        status: the HTTP status (400, 404, ...).
        code: the server's error code (``invalid``, ``not_found``, ``conflict``, ...).
        message: the server's one-line message.
        field: the request field the message names (``priority``,
            ``jobs[1].depends_on``), or None when it names none.
        request_id: the ``X-Request-ID`` of the answer (the agent's logs carry it).
        retry_after: seconds from ``Retry-After``, when the server sent one.
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        request_id: Optional[str] = None,
        retry_after: Optional[float] = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field_of(code, message)
        self.request_id = request_id
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"{self.message} (HTTP {self.status} {self.code})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(status={self.status}, code={self.code!r}, field={self.field!r}, message={self.message!r})"


class InvalidError(APIError, ValueError):
    """400 ``invalid`` (and ``acl_disabled``, ``bad_snapshot``): bad input; ``field`` names it."""


class UnauthorizedError(APIError):
    """401 ``unauthorized``: no token, or an unknown, revoked or expired one."""


class ForbiddenError(APIError, PermissionError):
    """403 ``forbidden``: the token lacks the permission the route needs."""


class NotFoundError(APIError, LookupError):
    """404 ``not_found``: unknown job, workflow, schedule, artifact or endpoint."""


class NoAttemptError(NotFoundError):
    """404 ``no_attempt``: logs asked for before the job was placed."""


class ConflictError(APIError):
    """409 ``conflict``, ``refused``, ``stale_token``: the object's state does not allow it."""


class TooLargeError(APIError):
    """413 ``body_too_large`` or ``batch_too_large``."""


class OverloadedError(APIError):
    """429 ``overloaded``: nothing was accepted; send it again after ``retry_after``."""


class UnavailableError(APIError):
    """503 ``no_leader``, ``not_ready``, ``unavailable``: retry shortly."""


class UnreachableError(APIError):
    """502 ``node_unreachable``: a write's outcome is unknown (retry with the same idempotency key)."""


class ApplyTimeoutError(APIError):
    """504 ``timeout``: the raft apply did not finish in time; the outcome is unknown."""


class ForemanConnectionError(ForemanError, ConnectionError):
    """The agent could not be reached, or the connection broke mid-answer."""


class WaitTimeout(ForemanError, TimeoutError):
    """A wait (job, workflow, log follow) did not end within its timeout."""


class WorkflowError(ForemanError, ValueError):
    """A workflow the client refuses before sending it (unknown dependency,
    cycle, duplicate name, ...). ``field`` names the job as the server would
    (``jobs[2].depends_on[0]``)."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field or None
        self.reason = reason


_BY_CODE = {
    "invalid": InvalidError,
    "acl_disabled": InvalidError,
    "bad_snapshot": InvalidError,
    "unsupported_snapshot": InvalidError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "not_found": NotFoundError,
    "no_attempt": NoAttemptError,
    "conflict": ConflictError,
    "refused": ConflictError,
    "stale_token": ConflictError,
    "body_too_large": TooLargeError,
    "batch_too_large": TooLargeError,
    "overloaded": OverloadedError,
    "no_leader": UnavailableError,
    "not_ready": UnavailableError,
    "unavailable": UnavailableError,
    "node_unreachable": UnreachableError,
    "timeout": ApplyTimeoutError,
}

_BY_STATUS = {
    400: InvalidError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: TooLargeError,
    429: OverloadedError,
    502: UnreachableError,
    503: UnavailableError,
    504: ApplyTimeoutError,
}

# "jobs[3].resources.cpu: ...", "Idempotency-Key: ...", "body: malformed JSON ..."
_FIELD = re.compile(r"^([A-Za-z_][A-Za-z0-9_\-]*(?:\[\d+\])*(?:\.[A-Za-z_][A-Za-z0-9_\-]*(?:\[\d+\])*)*): ")


def field_of(code: str, message: str) -> Optional[str]:
    """The field an ``invalid`` message starts with, or None."""
    if code != "invalid":
        return None
    m = _FIELD.match(message)
    return m.group(1) if m else None


def api_error(
    status: int,
    code: str,
    message: str,
    *,
    request_id: Optional[str] = None,
    retry_after: Optional[float] = None,
) -> APIError:
    """The APIError subclass for an answer: by code, else by status."""
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or APIError
    return cls(status, code, message, request_id=request_id, retry_after=retry_after)
