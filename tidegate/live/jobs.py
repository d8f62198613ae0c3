"""The live control plane's jobs as the API shows them, the errors its calls raise, and the marks of what
changed since the store was last written."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from tidegate.fleet.burst import burstable
from tidegate.lifecycle.policies import JobPolicy
from tidegate.model.errors import ManifestError
from tidegate.model.objects import Pod, PodGroup
from tidegate.model.resources import Resources


class JobPhase(StrEnum):
    PENDING = "Pending"  # waiting for admission (enqueue) or for room
    INQUEUE = "Inqueue"  # admitted, not placed yet
    RUNNING = "Running"
    COMPLETED = "Completed"
    FAILED = "Failed"


FINISHED = (JobPhase.COMPLETED, JobPhase.FAILED)


class _AboutObject(Exception):
    """An error about one object: its message, and the object's kind and name ("" when none)."""

    def __init__(self, message: str, kind: str = "", name: str = "") -> None:
        super().__init__(message)
        self.message, self.kind, self.name = message, kind, name

    def __str__(self) -> str:
        return self.message


class NotFound(_AboutObject, KeyError):
    """No object of that kind and name (the API answers 404)."""


class Conflict(_AboutObject, ValueError):
    """The request contradicts the object's state (the API answers 409)."""


class AlreadyExists(Conflict):
    """A submission whose only problem is jobs that exist already (the API answers 409 AlreadyExists, as
    kube-apiserver answers the create of a name it holds): `errors` names each, as a manifest problem."""

    def __init__(self, errors: list[ManifestError]) -> None:
        texts = [str(error) for error in errors]
        message = texts[0] if len(texts) == 1 else f"{len(texts)} jobs exist already: {'; '.join(texts)}"
        objects = {(error.kind, error.name) for error in errors}
        kind, name = next(iter(objects)) if len(objects) == 1 else ("", "")
        super().__init__(message, kind, name)
        self.errors = errors


class Forbidden(_AboutObject, PermissionError):
    """The caller may not do this (the API answers 403)."""


@dataclass(slots=True)
class LiveJob:
    """A submitted job: its PodGroup, its pods as they are now, and what happened to it."""

    group: PodGroup
    #: The pods as submitted; a restart recreates them from these.
    template: tuple[Pod, ...]
    pods: list[Pod]
    #: Lifecycle policies by task name ("" for pods of no vcjob task).
    policies: Mapping[str, JobPolicy]
    submitted: float
    #: When it last entered the queue (submission or restart): what pending time counts from.
    queued_since: float
    phase: JobPhase = JobPhase.PENDING
    reason: str = ""
    retries: int = 0
    started: float | None = None
    finished: float | None = None
    events: list[tuple[float, str]] = field(default_factory=list)
    #: The id of the batch it was submitted in (what a store rebuilds it from).
    batch: str = ""
    #: The queue and pods it was submitted with: what an overflowed job goes back to while the cloud is cut off.
    home: tuple[str, tuple[Pod, ...]] = ("", ())

    @property
    def key(self) -> str:
        return self.group.key

    @property
    def waiting(self) -> bool:
        return self.phase in (JobPhase.PENDING, JobPhase.INQUEUE)

    def overflow_to(self, queue: str) -> None:
        """The job goes to the burst queue: its pods, pending or running, tolerate the cloud nodes' taint; a
        pending pod's nomination (room reclaimed for it in its queue) is dropped."""
        self.group = replace(self.group, queue=queue)
        self.template = tuple(burstable(pod) for pod in self.template)
        self.pods = [
            burstable(pod if pod.node_name else replace(pod, nominated_node_name="", gpu_indices=()))
            for pod in self.pods
        ]

    def back_home(self) -> None:
        """A waiting job goes back to the queue and pods it was submitted with."""
        queue, template = self.home
        self.group = replace(self.group, queue=queue)
        self.template = template
        self.pods = list(template)


@dataclass(slots=True)
class QueueMetrics:
    """What `GET /metrics` exports for one queue."""

    queue: str
    weight: int
    pending_seconds: float = 0.0
    pending: int = 0
    running: int = 0
    allocated: Resources = field(default_factory=Resources)


class Marked(dict[str, None]):
    """Names marked changed, in the order first marked: jobs are written (and numbered) in submission order."""

    def add(self, name: str) -> None:
        self[name] = None

    def discard(self, name: str) -> None:
        self.pop(name, None)
