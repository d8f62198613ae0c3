"""What `tidegate kube` shows on its metrics port for the dashboard (read-only): the cluster as its last cycle
read and decided it, in the shapes `tidegate serve`'s API answers (`GET /queues`, `/jobs`, `/nodes`, ...), so
the one page reads both.

The scheduling loop owns the scheduler's state; the metrics port's threads must not read it while a cycle
changes it. So the loop takes a snapshot after a cycle (`ClusterViews.refresh`), only while someone looked
at the dashboard in the last minute, and the port serves the last snapshot. A job is a PodGroup (or a bare
pod's one-pod group) as the scheduler saw it; times are its creation's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from tidegate.kube.scheduler import ClusterScheduler
from tidegate.model.manifests import gpu_index
from tidegate.model.objects import NODE_TYPE_LABEL, Pod, PodGroupPhase
from tidegate.model.resources import Resources
from tidegate.scheduler.figures import gpu_cards
from tidegate.scheduler.info import TaskStatus

#: Seconds after the last look at the dashboard during which the loop keeps the snapshot fresh.
WATCHED_SECONDS = 60.0
#: Job phases as tidegate serve names them, from a PodGroup's.
_PHASES = {
    PodGroupPhase.PENDING: "Pending",
    PodGroupPhase.INQUEUE: "Inqueue",
    PodGroupPhase.RUNNING: "Running",
    PodGroupPhase.COMPLETED: "Completed",
}
_POD_PHASES = {
    TaskStatus.PENDING: "Pending",
    TaskStatus.ALLOCATED: "Running",
    TaskStatus.PIPELINED: "Pending",
    TaskStatus.RUNNING: "Running",
    TaskStatus.RELEASING: "Running",
    TaskStatus.SUCCEEDED: "Succeeded",
    TaskStatus.FAILED: "Failed",
}


class ClusterViews:
    """The last snapshot of the cluster for the dashboard, and whether anyone is looking."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._views: dict[str, Any] = {"queues": [], "jobs": [], "nodes": [], "taken": None}
        self._looked = -WATCHED_SECONDS

    @property
    def watched(self) -> bool:
        return self.clock() - self._looked < WATCHED_SECONDS

    def get(self, name: str) -> Any:
        """One view of the last snapshot ("queues", "jobs", "nodes", "taken": its Unix time); a look."""
        self._looked = self.clock()
        with self._lock:
            return self._views[name]

    def refresh(self, scheduler: ClusterScheduler, now: float, force: bool = False) -> None:
        """Take the snapshot after a cycle (the loop's thread), while the dashboard is watched (or `force`)."""
        if not (force or self.watched) or scheduler.core is None:
            return
        views = cluster_views(scheduler, now)
        with self._lock:
            self._views = views


def cluster_views(scheduler: ClusterScheduler, now: float) -> dict[str, Any]:
    """Queues, jobs and nodes as `tidegate serve` shows them, from the scheduler's last cycle."""
    core = scheduler.core
    assert core is not None
    jobs: list[dict[str, Any]] = []
    by_node: dict[str, list[Pod]] = {}
    counts: dict[str, dict[str, int]] = {}
    waiting: dict[str, dict[str, int]] = {}
    for key, job in core.jobs.items():
        phase = _PHASES.get(job.phase, job.phase.value)
        queue = job.group.queue
        counts.setdefault(queue, {}).setdefault(phase, 0)
        counts[queue][phase] += 1
        reason = core.pending_reason(key)
        if key in core.waiting:
            why = reason or "not scheduled yet"
            waiting.setdefault(queue, {}).setdefault(why, 0)
            waiting[queue][why] += 1
        pods = []
        for task in job.tasks:
            on = core.node_name(task.node) or task.pod.node_name
            pipelined = task.status is TaskStatus.PIPELINED
            pods.append(
                {
                    "name": task.pod.key,
                    "phase": _POD_PHASES.get(task.status, "Pending"),
                    "node": "" if pipelined else on,
                    "nominated_node": on if pipelined else "",
                    "gpu_index": gpu_index(task.cards or task.pod.gpu_indices),
                }
            )
            if on and not pipelined:
                by_node.setdefault(on, []).append(task.pod)
        created = job.group.created or now
        jobs.append(
            {
                "key": key,
                "namespace": job.group.namespace,
                "name": job.group.name,
                "labels": dict(job.tasks[0].pod.labels) if job.tasks else {},
                "queue": queue,
                "phase": phase,
                "reason": reason,
                "submitted": created,
                "started": None,
                "finished": None,
                "retries": 0,
                "queued_since": created,
                "wait_seconds": max(now - created, 0.0) if key in core.waiting else 0.0,
                "pods": pods,
                "events": [],
            }
        )
    figures = core.quota_figures()
    queues: list[dict[str, Any]] = []
    for name, read in scheduler.queues.items():
        quota = figures.get(name)
        spec = dict(read.raw.get("spec", {}))
        phases = counts.get(name, {})
        queues.append(
            {
                "name": name,
                "labels": dict((read.raw.get("metadata") or {}).get("labels") or {}),
                "spec": spec,
                "namespaces": list(read.namespaces),
                "jobs": {p: phases.get(p, 0) for p in ("Pending", "Inqueue", "Running", "Completed", "Failed")},
                "allocated": quota.allocated.to_dict() if quota else {},
                "allocated_with_children": quota.allocated.to_dict() if quota else {},
                "pending_jobs_duration_seconds": 0.0,
                "deserved": None if quota is None or quota.deserved is None else quota.deserved.to_dict(),
                "request": quota.request.to_dict() if quota else {},
                "share": quota.share if quota else 0.0,
                "overused": bool(quota and quota.overused),
                "waiting": waiting.get(name, {}),
            }
        )
    pending = scheduler.pending_seconds(now)
    for row in queues:
        row["pending_jobs_duration_seconds"] = pending.get(str(row["name"]), 0.0)
    nodes: list[dict[str, Any]] = []
    for name, node in scheduler.nodes.items():
        ours: list[Pod] = by_node.get(name, [])
        others = list(scheduler.others_on(name))
        used = Resources()
        for pod in (*ours, *others):
            used = used + pod.requests
        nodes.append(
            {
                "name": name,
                "labels": dict(node.labels),
                "allocatable": node.allocatable.to_dict(),
                "requested": used.to_dict(),
                "pods": len(ours) + len(others),
                "schedulable": not node.unschedulable and node.ready,
                "interrupted_at": None,
                "type": node.labels.get(NODE_TYPE_LABEL, ""),
                "pool": None,
                "draining": False,
                "gpu_cards": gpu_cards(node, [*ours, *others]),
            }
        )
    return {"queues": queues, "jobs": jobs, "nodes": nodes, "taken": now}
