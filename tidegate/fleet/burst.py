"""Cloud burst: which waiting jobs move to the burst queue, and how their pods change when they do.

The simulator, `tidegate serve` and `tidegate kube` apply the same rule: a waiting job that is not pinned
to the IDC, has no pod running, and is not in the burst queue already moves there once it has waited
`after_seconds`, or at once when its queue is at capability (its local cap is reached). Its pods then
tolerate the cloud taint and prefer IDC nodes, so they land on a cloud node only when no IDC node has room.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tidegate.fleet.pool import CLOUD_TOLERATION, PREFER_IDC, pinned_to_idc
from tidegate.model.objects import Pod
from tidegate.scheduler.plugins.quota import AT_CAPABILITY


@dataclass(frozen=True, slots=True)
class Burst:
    """Where jobs overflow to, and after how long a wait (a Scenario's `spec.burst`)."""

    queue: str
    after_seconds: float = 600.0

    def moves(self, queue: str, pods: Sequence[Pod], waited: float, reason: str) -> bool:
        """Whether a waiting job in `queue` with these pods moves to the burst queue now (not one with no pod
        yet: moving gives its pods the cloud toleration, and those to come would lack it)."""
        if not pods or queue == self.queue or any(pinned_to_idc(pod) for pod in pods):
            return False  # no pod yet, already there, or pinned
        if any(pod.node_name for pod in pods):
            return False  # part of its gang runs (evicted pods being replaced)
        return waited >= self.after_seconds or AT_CAPABILITY in reason


def burstable(pod: Pod) -> Pod:
    """The pod as the burst queue runs it: tolerating the cloud taint, preferring IDC nodes (unless it says
    where it prefers to run)."""
    tolerations = pod.tolerations if CLOUD_TOLERATION in pod.tolerations else (*pod.tolerations, CLOUD_TOLERATION)
    affinity = pod.affinity
    if affinity is None or not affinity.preferred:
        affinity = PREFER_IDC if affinity is None else replace(affinity, preferred=PREFER_IDC.preferred)
    return replace(pod, tolerations=tolerations, affinity=affinity)
