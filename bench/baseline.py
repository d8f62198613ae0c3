"""A straightforward scheduler without numpy: the baseline tidegate's throughput is measured against.

What a competent engineer would write first: for each pod, loop over every node in Python, check
that the node is schedulable, matches the pod's nodeSelector, has no untolerated NoSchedule/NoExecute
taint and has room (dicts of free resources), score the fitting nodes least-allocated (cpu and
memory, as kube-scheduler's LeastAllocated), take the best and update that node. A gang (PodGroup with
minMember > 1) is all-or-nothing: when one of its pods does not fit, the gang's placements are rolled
back. Whole GPUs are counted as the `nvidia.com/gpu` resource.

Jobs go in their PodGroups' priority order (highest first), then by creation time and name; pods in their own.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidegate.model.objects import Node, Pod, PodGroup, TaintEffect
from tidegate.model.resources import CPU, MEMORY, PODS


@dataclass(frozen=True, slots=True)
class Placement:
    pod: str
    node: str


def _tolerated(pod: Pod, node: Node) -> bool:
    for taint in node.taints:
        if taint.effect is TaintEffect.PREFER_NO_SCHEDULE:
            continue
        if not any(tol.tolerates(taint) for tol in pod.tolerations):
            return False
    return True


def _selected(pod: Pod, node: Node) -> bool:
    labels = node.labels
    for key, value in pod.node_selector.items():
        if labels.get(key) != value:
            return False
    return pod.affinity is None or pod.affinity.required_matches(labels)


class BaselineScheduler:
    """Per-node Python loops over dicts; the same inputs as tidegate's Snapshot."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = [n for n in nodes if n.ready and not n.unschedulable]
        self.free: list[dict[str, int]] = []
        for node in self.nodes:
            free = dict(node.allocatable)
            free.setdefault(PODS, 2**62)  # no pods limit given: unlimited, as in tidegate
            self.free.append(free)

    def _fits(self, pod: Pod, i: int) -> bool:
        free = self.free[i]
        if free[PODS] < 1000:
            return False
        return all(free.get(name, 0) >= amount for name, amount in pod.requests.items())

    def _score(self, pod: Pod, i: int) -> float:
        alloc = self.nodes[i].allocatable
        free = self.free[i]
        total = 0.0
        for name in (CPU, MEMORY):
            cap = alloc[name]
            if cap > 0:
                total += (free.get(name, 0) - pod.requests[name]) / cap
        return total / 2

    def _take(self, pod: Pod, i: int, sign: int) -> None:
        free = self.free[i]
        free[PODS] -= sign * 1000
        for name, amount in pod.requests.items():
            free[name] = free.get(name, 0) - sign * amount

    def place(self, pod: Pod) -> int | None:
        """The index of the best node for the pod (first on ties), or None."""
        best, best_score = None, -1.0
        for i, node in enumerate(self.nodes):
            if not self._fits(pod, i) or not _tolerated(pod, node) or not _selected(pod, node):
                continue
            score = self._score(pod, i)
            if score > best_score:
                best, best_score = i, score
        return best

    def schedule(self, groups: list[PodGroup], pods: list[Pod]) -> list[Placement]:
        """Place pending pods job by job; gangs all or nothing."""
        by_group: dict[tuple[str, str], list[Pod]] = {}
        for pod in pods:
            if not pod.node_name:
                by_group.setdefault((pod.namespace, pod.group), []).append(pod)
        order = sorted(groups, key=lambda g: (-g.priority, g.created, g.key))
        out: list[Placement] = []
        for group in order:
            members = sorted(
                by_group.get((group.namespace, group.name), []), key=lambda p: (-p.priority, p.created, p.key)
            )
            if len(members) < group.min_member:
                continue
            placed: list[tuple[Pod, int]] = []
            for pod in members:
                i = self.place(pod)
                if i is None:
                    continue
                self._take(pod, i, 1)
                placed.append((pod, i))
            if len(placed) < group.min_member:
                for pod, i in reversed(placed):  # roll the gang back
                    self._take(pod, i, -1)
                continue
            out.extend(Placement(pod.key, self.nodes[i].name) for pod, i in placed)
        return out
