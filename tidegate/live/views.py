"""The API's views of the live control plane: plain values, read under its lock."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from tidegate.autoscale.hpa import status_document
from tidegate.clock import Clock
from tidegate.fleet.bill import Bill
from tidegate.fleet.hybrid import HybridFleet
from tidegate.fleet.pool import POOL_LABEL
from tidegate.live.jobs import JobPhase, LiveJob, NotFound, QueueMetrics
from tidegate.live.queue_manifests import queue_manifest
from tidegate.model.manifests import gpu_index
from tidegate.model.objects import NODE_TYPE_LABEL, Node, Pod, Queue
from tidegate.model.resources import Resources
from tidegate.scheduler.figures import QuotaFigures, gpu_cards
from tidegate.scheduler.online import OnlineScheduler


class PlaneState(Protocol):
    """What the views read of the control plane (`ControlPlane`)."""

    clock: Clock
    jobs: dict[str, LiveJob]
    queues: dict[str, Queue]
    nodes: dict[str, Node]
    fleet: HybridFleet
    bill: Bill
    fleet_events: list[tuple[float, str]]
    core: OnlineScheduler
    #: The pods bound to each node and still to run there, and each pod's job.
    bound: dict[str, dict[str, Pod]]
    pod_job: dict[str, str]

    def reading(self) -> AbstractContextManager[None]:
        """The plane's lock, held while a view reads."""
        ...

    def job(self, key: str, kind: str = "Job", name: str = "") -> LiveJob: ...

    def metrics(self) -> list[QueueMetrics]: ...

    def pending_seconds(self) -> dict[str, float]: ...


class PlaneViews:
    """What the API shows of the control plane: queues, jobs, nodes and their agents' pods, pools, the budget,
    the links; each a plain value read at once (under the plane's lock)."""

    def __init__(self, plane: PlaneState) -> None:
        self.plane = plane

    def queue_view(self, name: str) -> dict[str, Any]:
        with self.plane.reading():
            if name not in self.plane.queues:
                raise NotFound(f"queue {name} does not exist", "Queue", name)
            (row,) = [m for m in self.plane.metrics() if m.queue == name]
            return self._queue_view(row, self.quota_figures())

    def queues_view(self) -> list[dict[str, Any]]:
        with self.plane.reading():
            figures = self.quota_figures()
            return [self._queue_view(row, figures) for row in self.plane.metrics()]

    def quota_figures(self) -> dict[str, QuotaFigures]:
        """Each queue's deserved share, request, share and overuse as the last cycle left them."""
        with self.plane.reading():
            return self.plane.core.quota_figures()

    def _queue_view(self, row: QueueMetrics, figures: dict[str, QuotaFigures]) -> dict[str, Any]:
        queue = self.plane.queues[row.queue]
        jobs = [job for job in self.plane.jobs.values() if job.group.queue == row.queue]
        waiting: dict[str, int] = {}
        for job in jobs:
            if job.waiting:
                why = job.reason or "not scheduled yet"
                waiting[why] = waiting.get(why, 0) + 1
        quota = figures.get(row.queue)
        deserved = quota.deserved if quota is not None else None
        manifest = queue.raw or queue_manifest(queue)
        return {
            "name": row.queue,
            "labels": dict((manifest.get("metadata") or {}).get("labels") or {}),
            "spec": manifest.get("spec", {}),
            "namespaces": list(queue.namespaces),  # whose work it takes (tidegate.io/namespaces); [] for every one
            "jobs": {phase.value: sum(1 for job in jobs if job.phase is phase) for phase in JobPhase},
            "allocated": row.allocated.to_dict(),
            "pending_jobs_duration_seconds": row.pending_seconds,
            # as the last cycle's quota plugin (proportion or capacity) computed them
            "deserved": None if deserved is None else deserved.to_dict(),
            "allocated_with_children": row.allocated.to_dict() if quota is None else quota.allocated.to_dict(),
            "request": {} if quota is None else quota.request.to_dict(),
            "share": 0.0 if quota is None else quota.share,
            "overused": quota is not None and quota.overused,
            "waiting": dict(sorted(waiting.items(), key=lambda item: (-item[1], item[0]))),  # why its jobs wait
        }

    def job_view(self, key: str) -> dict[str, Any]:
        with self.plane.reading():
            job = self.plane.job(key)
            return {
                "key": key,
                "namespace": job.group.namespace,
                "name": job.group.name,
                "labels": _labels(job),
                "queue": job.group.queue,
                "phase": job.phase.value,
                "reason": job.reason,
                "submitted": job.submitted,
                "started": job.started,
                "finished": job.finished,
                "retries": job.retries,
                "queued_since": job.queued_since,
                "wait_seconds": self._waited(job),
                "pods": [
                    {
                        "name": pod.key,
                        "phase": pod.phase.value,
                        "node": pod.node_name,
                        "nominated_node": pod.nominated_node_name,
                        "gpu_index": gpu_index(pod.gpu_indices),
                    }
                    for pod in job.pods
                ],
                "events": [{"time": when, "message": text} for when, text in job.events],
            }

    def jobs_view(self, queue: str = "", phase: str = "", namespace: str = "") -> list[dict[str, Any]]:
        with self.plane.reading():
            return [
                self.job_view(key)
                for key, job in self.plane.jobs.items()
                if (not queue or job.group.queue == queue)
                and (not phase or job.phase.value == phase)
                and (not namespace or job.group.namespace == namespace)
            ]

    def nodes_view(self) -> list[dict[str, Any]]:
        with self.plane.reading():
            out = []
            for name, node in self.plane.nodes.items():
                pods = self.plane.bound.get(name, {})
                used = Resources()
                for pod in pods.values():
                    used = used + pod.requests
                pool = self._pool_name(node)
                out.append(
                    {
                        "name": name,
                        "labels": dict(node.labels),
                        "allocatable": node.allocatable.to_dict(),
                        "requested": used.to_dict(),
                        "pods": len(pods),
                        "schedulable": name in self.plane.core.nodes and not self.plane.core.nodes[name].unschedulable,
                        "interrupted_at": self.plane.fleet.spot.noticed.get(name),
                        "type": node.labels.get(NODE_TYPE_LABEL, ""),  # idc, cloud-spot, cloud-ondemand
                        "pool": pool,
                        "draining": pool is not None and name in self.plane.fleet.pools[pool].draining,
                        "gpu_cards": gpu_cards(node, pods.values()),
                    }
                )
            return out

    def node_pods(self, name: str) -> list[dict[str, Any]]:
        """The pods bound to a node and still to run there: what the node's agent starts and stops."""
        with self.plane.reading():
            if name not in self.plane.nodes:
                raise NotFound(f"node {name} does not exist", "Node", name)
            return [
                {
                    "name": pod.key,
                    "job": self.plane.pod_job[pod.key],
                    "requests": pod.requests.to_dict(),
                    "gpu_index": gpu_index(pod.gpu_indices),
                }
                for pod in self.plane.bound[name].values()
            ]

    def pools_view(self) -> list[dict[str, Any]]:
        """Each node pool: its nodes, nodes on the way or draining, what it bills for, and its HPA with the
        status it last wrote (replicas, current metrics, conditions)."""
        with self.plane.reading():
            scalers = {scaler.pool.name: scaler for scaler in self.plane.fleet.sizing.autoscalers}
            now = self.plane.clock.now()
            out = []
            for name, pool in self.plane.fleet.pools.items():
                scaler = scalers.get(name)
                out.append(
                    {
                        "name": name,
                        "cloud": pool.is_cloud,
                        "nodes": list(pool.nodes),
                        "provisioning": pool.provisioning,
                        "draining": list(pool.draining),
                        "billed_nodes": self.plane.bill.nodes[name],
                        "spent": self.plane.bill.pool_spent(name, now),
                        "hpa": None if scaler is None else scaler.spec.name,
                        "hpa_status": None if scaler is None else status_document(scaler.controller.status),
                        "events": [
                            {"time": t, "message": m} for t, m in self.plane.fleet_events if m.startswith(f"{name}:")
                        ],
                    }
                )
            return out

    def budget_view(self) -> dict[str, Any]:
        """The cloud budget: its queue, the period, what it has spent of it, and its changes."""
        with self.plane.reading():
            budget = self.plane.fleet.budget
            if budget is None:
                raise NotFound("no budget is served (a Scenario's spec.budget, with burst)", "Budget")
            now = self.plane.clock.now()
            return {
                "queue": budget.spec.queue,
                "per_period": budget.spec.per_period,
                "period_hours": budget.spec.period_hours,
                "period": budget.period,
                "period_start": budget.period_start,
                "spent": budget.spent(now),
                "thresholds_crossed": budget.crossed,
                # what each threshold does, in order (the first `thresholds_crossed` of them are in force)
                "thresholds": [t.model_dump(by_alias=True, exclude_none=True) for t in budget.spec.thresholds],
                "hpa_capped": budget.capped,
                "events": [{"time": t, "message": m} for t, m in self.plane.fleet_events if m.startswith("budget:")],
            }

    def links_view(self) -> list[dict[str, Any]]:
        """Each served cloud cluster's link to the IDC: up, or down since when and why."""
        with self.plane.reading():
            clouds = sorted({pool.cluster_name for pool in self.plane.fleet.pools.values() if pool.is_cloud})
            out = []
            for cluster in clouds:
                since, reason = self.plane.fleet.links.down.get(cluster, (None, ""))
                out.append({"cluster": cluster, "up": since is None, "down_since": since, "reason": reason})
            return out

    def _waited(self, job: LiveJob) -> float:
        """How long the job waited: while it waits, since it last entered the queue; else from its submission
        to its first start (or to its end, if it never started)."""
        if job.waiting:
            return max(self.plane.clock.now() - job.queued_since, 0.0)
        end = job.started if job.started is not None else job.finished
        return max((end if end is not None else self.plane.clock.now()) - job.submitted, 0.0)

    def _pool_name(self, node: Node) -> str | None:
        """The served pool the node belongs to (None: a node of the folder's own)."""
        name = node.labels.get(POOL_LABEL, "")
        return name if name in self.plane.fleet.pools else None


def _labels(job: LiveJob) -> dict[str, str]:
    """A job's labels: its pods' (their template's, and Volcano's volcano.sh/job-name, queue-name...), with a
    submitted PodGroup's own."""
    labels = dict(job.template[0].labels) if job.template else {}
    metadata = job.group.raw.get("metadata")
    own = metadata.get("labels") if isinstance(metadata, dict) else None
    if isinstance(own, dict):
        labels.update({str(k): str(v) for k, v in own.items()})
    return labels
