"""A Python client of foreman's REST API (docs/api.md), standard library only.

>>> from foreman import Client
>>> client = Client()                      # $FOREMAN_ADDR, else http://127.0.0.1:7070
>>> job = client.submit(["echo", "hello"])
>>> client.wait(job).state
'succeeded'
"""

__version__ = "0.1.0"

from .client import Client, ExecResult, Submitted  # noqa: E402
from .errors import (  # noqa: E402
    APIError,
    ApplyTimeoutError,
    ConflictError,
    ForbiddenError,
    ForemanConnectionError,
    ForemanError,
    InvalidError,
    NoAttemptError,
    NotFoundError,
    OverloadedError,
    TooLargeError,
    UnauthorizedError,
    UnavailableError,
    UnreachableError,
    WaitTimeout,
    WorkflowError,
)
from .events import EventStream  # noqa: E402
from .models import (  # noqa: E402
    Artifact,
    ArtifactList,
    GPU,
    GPUDeviceUse,
    GPUUsage,
    UsageReport,
    UsageRow,
    Attempt,
    Event,
    Fire,
    Job,
    JobPage,
    NamespaceShare,
    NamespaceShares,
    Schedule,
    WorkflowJob,
    WorkflowRun,
    WorkflowStatus,
)
from .specs import job_spec  # noqa: E402
from .workflows import Task, Workflow  # noqa: E402

__all__ = [
    "Client",
    "ExecResult",
    "Submitted",
    "Workflow",
    "Task",
    "job_spec",
    "EventStream",
    "Job",
    "JobPage",
    "GPU",
    "GPUUsage",
    "NamespaceShare",
    "NamespaceShares",
    "UsageReport",
    "UsageRow",
    "GPUDeviceUse",
    "Attempt",
    "Event",
    "Artifact",
    "ArtifactList",
    "Schedule",
    "Fire",
    "WorkflowRun",
    "WorkflowStatus",
    "WorkflowJob",
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
