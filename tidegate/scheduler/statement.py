"""A Statement records tentative placements and evictions so a gang commits all or nothing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tidegate.scheduler.info import TaskInfo, TaskStatus

if TYPE_CHECKING:
    from tidegate.scheduler.session import Session


@dataclass(slots=True)
class _Op:
    kind: str  # allocate | pipeline | evict
    task: TaskInfo
    previous: TaskStatus
    row: int
    cards: tuple[int, ...]
    reason: str = ""


class Statement:
    """Operations applied to the session at once and undone in reverse by discard()."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.ops: list[_Op] = []

    def allocate(self, task: TaskInfo, row: int) -> None:
        cards = self.ssn.select_cards(task, row)
        self.ops.append(_Op("allocate", task, task.status, row, cards))
        self.ssn.apply_allocate(task, row, cards, TaskStatus.ALLOCATED)

    def pipeline(self, task: TaskInfo, row: int, cards: tuple[int, ...] = ()) -> None:
        """Nominate the node to the task (and hold `cards` there for its GPU slice) while victims leave."""
        self.ops.append(_Op("pipeline", task, task.status, row, cards))
        self.ssn.apply_pipeline(task, row, cards)

    def evict(self, task: TaskInfo, reason: str) -> None:
        self.ops.append(_Op("evict", task, task.status, task.node, task.cards, reason))
        self.ssn.apply_evict(task, reason)

    def merge(self, other: Statement) -> None:
        self.ops.extend(other.ops)
        other.ops = []

    def discard(self) -> None:
        for op in reversed(self.ops):
            if op.kind == "allocate":
                self.ssn.undo_allocate(op.task, op.row, op.cards, op.previous)
            elif op.kind == "pipeline":
                self.ssn.undo_pipeline(op.task, op.row, op.previous)
            else:
                self.ssn.undo_evict(op.task, op.previous)
        self.ops = []

    def commit(self) -> None:
        for op in self.ops:
            if op.kind == "evict":
                self.ssn.evictions[op.task.key] = op.reason
        self.ops = []
