"""The scheduling core as the simulator drives it: a cluster that changes between cycles.

`OnlineScheduler` (the default) keeps one long-lived session and costs what changed each cycle.
`SnapshotCore` keeps nodes, groups and pods and runs the pure `schedule(snapshot, config)` every
cycle, as a control plane observing a cluster from scratch would; it is the reference the
online core is tested against (same decisions), and O(cluster) per cycle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Protocol

from tidegate.model.objects import Node, Pod, PodGroup, PodPhase, Queue, SchedulerConfiguration
from tidegate.scheduler.scheduler import schedule
from tidegate.scheduler.snapshot import Decisions, Snapshot


class Core(Protocol):
    """What the simulator needs from the scheduler: mutate the cluster, then run a cycle."""

    def add_nodes(self, nodes: Sequence[Node]) -> None: ...

    def remove_nodes(self, names: Iterable[str]) -> None: ...

    def set_schedulable(self, name: str, schedulable: bool) -> None: ...

    def add_group(self, group: PodGroup, pods: Sequence[Pod]) -> None: ...

    def remove_group(self, key: str) -> None: ...

    def set_queue(self, queue: Queue) -> None: ...

    def cycle(self, now: float) -> Decisions: ...

    def idle(self) -> bool:
        """A cycle now would do nothing, and removing groups cannot change that."""
        ...

    def pending_reason(self, key: str) -> str:
        """Why the group is still pending after the last cycle ("" if it is not)."""
        ...

    def has_queue(self, name: str) -> bool: ...

    def namespace_refusal(self, queue: str, namespace: str) -> str | None:
        """Why the queue (or an ancestor) does not take work from the namespace; None if it does."""
        ...


class SnapshotCore:
    """Builds a fresh Snapshot each cycle; bound pods become Running on their node."""

    def __init__(self, queues: Sequence[Queue], config: SchedulerConfiguration) -> None:
        self.config = config
        self.queues = {q.name: q for q in queues}
        self.nodes: dict[str, Node] = {}
        self.groups: dict[str, PodGroup] = {}
        self.pods: dict[str, list[Pod]] = {}
        self.reasons: dict[str, str] = {}

    def add_nodes(self, nodes: Sequence[Node]) -> None:
        for node in nodes:
            self.nodes[node.name] = node

    def remove_nodes(self, names: Iterable[str]) -> None:
        gone = set(names)
        for name in gone:
            self.nodes.pop(name, None)
        for pods in self.pods.values():
            for i, pod in enumerate(pods):
                if pod.node_name in gone:
                    pods[i] = dataclasses.replace(pod, node_name="", phase=PodPhase.PENDING, gpu_indices=())

    def set_schedulable(self, name: str, schedulable: bool) -> None:
        node = self.nodes.get(name)
        if node is not None:
            self.nodes[name] = dataclasses.replace(node, unschedulable=not schedulable)

    def add_group(self, group: PodGroup, pods: Sequence[Pod]) -> None:
        self.groups[group.key] = group
        self.pods[group.key] = list(pods)

    def remove_group(self, key: str) -> None:
        self.groups.pop(key, None)
        self.pods.pop(key, None)

    def set_queue(self, queue: Queue) -> None:
        self.queues[queue.name] = queue

    def cycle(self, now: float) -> Decisions:
        pods = [pod for group_pods in self.pods.values() for pod in group_pods]
        snapshot = Snapshot(
            list(self.nodes.values()), list(self.queues.values()), list(self.groups.values()), pods, now
        )
        decisions = schedule(snapshot, self.config)
        self.reasons = {p.job: p.reason for p in decisions.pending}
        by_key = {
            pod.key: (group_key, i) for group_key, group_pods in self.pods.items() for i, pod in enumerate(group_pods)
        }
        for bind in decisions.binds:
            group_key, i = by_key[bind.pod]
            pod = self.pods[group_key][i]
            self.pods[group_key][i] = dataclasses.replace(
                pod, node_name=bind.node, nominated_node_name="", phase=PodPhase.RUNNING, gpu_indices=bind.gpu_indices
            )
        nominated = {p.pod: p for p in decisions.pipelined}
        for group_pods in self.pods.values():
            for i, pod in enumerate(group_pods):
                if pod.node_name:
                    continue
                nomination = nominated.get(pod.key)
                node, cards = (nomination.node, nomination.gpu_indices) if nomination else ("", ())
                if pod.nominated_node_name != node or pod.gpu_indices != cards:
                    group_pods[i] = dataclasses.replace(pod, nominated_node_name=node, gpu_indices=cards)
        for status in decisions.groups:
            group = self.groups.get(status.group)
            if group is not None and group.phase is not status.phase:
                self.groups[status.group] = dataclasses.replace(group, phase=status.phase)
        return decisions

    def idle(self) -> bool:
        return False  # every cycle schedules a fresh snapshot and records its reasons and phases

    def pending_reason(self, key: str) -> str:
        return self.reasons.get(key, "")

    def has_queue(self, name: str) -> bool:
        return name in self.queues

    def namespace_refusal(self, queue: str, namespace: str) -> str | None:
        seen: set[str] = set()
        at = self.queues.get(queue)
        while at is not None and at.name not in seen:  # the queue and its ancestors, as the session walks them
            seen.add(at.name)
            refusal = at.refuses(namespace)
            if refusal:
                return refusal
            at = self.queues.get(at.parent) if at.parent else None
        return None
