"""What the store keeps, as plain values: the control plane builds them and reads them back. No SQLAlchemy
here, so importing the control plane (and every `tidegate` command) does not load it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class StoreError(RuntimeError):
    """The store cannot be opened or used (bad URL, missing driver, unreachable, newer schema)."""


@dataclass(frozen=True, slots=True)
class Batch:
    """A submission as it came: its text (YAML or JSON documents) and the file name its errors named."""

    id: str
    file: str
    text: str


@dataclass(frozen=True, slots=True)
class PodState:
    """One pod as it is now: bound to `node` with `gpu_indices` while Running; Pending has no node, but may be
    `nominated` to one (pipelined: the node's room, and `gpu_indices` on it, held for it)."""

    key: str
    phase: str
    node: str = ""
    gpu_indices: tuple[int, ...] = ()
    nominated: str = ""


@dataclass(frozen=True, slots=True)
class JobState:
    """A job's state: everything but its spec (its batch's text) and its events."""

    key: str
    batch: str
    phase: str
    reason: str
    retries: int
    submitted: float
    queued_since: float
    started: float | None
    finished: float | None
    pods: tuple[PodState, ...]
    #: The queue the job is in now: the burst queue once it overflowed ("" from a store written before
    #: this was kept, which means the queue it was submitted to).
    queue: str = ""


#: An event as stored: its position in the job's list, time, message.
EventRow = tuple[int, float, str]


@dataclass(frozen=True, slots=True)
class StoredJob:
    state: JobState
    events: tuple[tuple[float, str], ...]


@dataclass(frozen=True, slots=True)
class Saved:
    """Everything a store holds, as a control plane restores it."""

    batches: Mapping[str, Batch]
    #: In submission order.
    jobs: Sequence[StoredJob]
    #: Patched queues' manifests by name.
    queues: Mapping[str, dict[str, Any]]
    #: Node pools' states by name: {"created": n, "nodes": [...], "draining": [...], "arriving": [due, ...]}.
    pools: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    #: Controllers' states by name, e.g. "budget": where its period stands.
    controllers: Mapping[str, dict[str, Any]] = field(default_factory=dict)
