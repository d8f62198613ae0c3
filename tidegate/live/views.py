"""The API's views of the live control plane: plain values, read under its lock."""

from __future__ import annotations

import threading
from typing import Any

from tidegate.autoscale.hpa import status_document
from tidegate.clock import Clock
from tidegate.fleet.budget import Budget
from tidegate.fleet.pool import pinned_to_idc
from tidegate.fleet.scaling import CloudFleet, QueueTree
from tidegate.live.bill import Bill
from tidegate.live.jobs import JobPhase, LiveJob, NotFound, QueueMetrics
from tidegate.live.queue_manifests import queue_manifest
from tidegate.model.manifests import gpu_index
from tidegate.model.objects import Node, Pod, PodPhase, Queue
from tidegate.model.resources import Resources
from tidegate.scheduler.online import OnlineScheduler


class PlaneViews:
    """What `ControlPlane` shows: queues, jobs, nodes and their agents' pods, pools, the budget, metrics."""

    clock: Clock
    jobs: dict[str, LiveJob]
    queues: dict[str, Queue]
    nodes: dict[str, Node]
    fleet: CloudFleet
    bill: Bill
    budget: Budget | None
    fleet_events: list[tuple[float, str]]
    links_down: dict[str, tuple[float, str]]
    notices: dict[str, float]
    core: OnlineScheduler
    _lock: threading.RLock
    _tree: QueueTree
    _pod_job: dict[str, str]
    _node_pods: dict[str, dict[str, Pod]]

    def queue_view(self, name: str) -> dict[str, Any]:
        with self._lock:
            if name not in self.queues:
                raise NotFound(f"queue {name} does not exist", "Queue", name)
            (row,) = [m for m in self.metrics() if m.queue == name]
            return self._queue_view(row)

    def queues_view(self) -> list[dict[str, Any]]:
        with self._lock:
            return [self._queue_view(row) for row in self.metrics()]

    def _queue_view(self, row: QueueMetrics) -> dict[str, Any]:
        queue = self.queues[row.queue]
        jobs = [job for job in self.jobs.values() if job.group.queue == row.queue]
        return {
            "name": row.queue,
            "spec": (queue.raw or queue_manifest(queue)).get("spec", {}),
            "namespaces": list(queue.namespaces),  # whose work it takes (tidegate.io/namespaces); [] for every one
            "jobs": {phase.value: sum(1 for job in jobs if job.phase is phase) for phase in JobPhase},
            "allocated": row.allocated.to_dict(),
            "pending_jobs_duration_seconds": row.pending_seconds,
        }

    def job_view(self, key: str) -> dict[str, Any]:
        with self._lock:
            job = self._job(key)
            return {
                "key": key,
                "queue": job.group.queue,
                "phase": job.phase.value,
                "reason": job.reason,
                "submitted": job.submitted,
                "started": job.started,
                "finished": job.finished,
                "retries": job.retries,
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

    def jobs_view(self, queue: str = "", phase: str = "") -> list[dict[str, Any]]:
        with self._lock:
            return [
                self.job_view(key)
                for key, job in self.jobs.items()
                if (not queue or job.group.queue == queue) and (not phase or job.phase.value == phase)
            ]

    def nodes_view(self) -> list[dict[str, Any]]:
        with self._lock:
            out = []
            for name, node in self.nodes.items():
                pods = self._node_pods.get(name, {})
                used = Resources()
                for pod in pods.values():
                    used = used + pod.requests
                out.append(
                    {
                        "name": name,
                        "labels": dict(node.labels),
                        "allocatable": node.allocatable.to_dict(),
                        "requested": used.to_dict(),
                        "pods": len(pods),
                        "schedulable": name in self.core.nodes and not self.core.nodes[name].unschedulable,
                        "interrupted_at": self.notices.get(name),
                    }
                )
            return out

    def node_pods(self, name: str) -> list[dict[str, Any]]:
        """The pods bound to a node and still to run there: what the node's agent starts and stops."""
        with self._lock:
            if name not in self.nodes:
                raise NotFound(f"node {name} does not exist", "Node", name)
            return [
                {
                    "name": pod.key,
                    "job": self._pod_job[pod.key],
                    "requests": pod.requests.to_dict(),
                    "gpu_index": gpu_index(pod.gpu_indices),
                }
                for pod in self._node_pods[name].values()
            ]

    def pending_seconds(self) -> dict[str, float]:
        """volcano_queue_pending_jobs_duration_seconds: per queue, the seconds its waiting jobs that may burst
        (not pinned to the IDC) have waited, summed; a parent queue adds its children's. What the cloud
        pools' HPAs read, as the simulator computes it."""
        with self._lock:
            now = self.clock.now()
            own: dict[str, float] = {}
            for job in self.jobs.values():
                if job.waiting and not any(pinned_to_idc(pod) for pod in job.template):
                    queue = job.group.queue
                    own[queue] = own.get(queue, 0.0) + (now - job.queued_since)
            return self._tree.totals(own)

    def pools_view(self) -> list[dict[str, Any]]:
        """Each node pool: its nodes, nodes on the way or draining, what it bills for, and its HPA with the
        status it last wrote (replicas, current metrics, conditions)."""
        with self._lock:
            scalers = {scaler.pool.name: scaler for scaler in self.fleet.autoscalers}
            now = self.clock.now()
            out = []
            for name, pool in self.fleet.pools.items():
                scaler = scalers.get(name)
                out.append(
                    {
                        "name": name,
                        "cloud": pool.is_cloud,
                        "nodes": list(pool.nodes),
                        "provisioning": pool.provisioning,
                        "draining": list(pool.draining),
                        "billed_nodes": self.bill.nodes[name],
                        "spent": self.bill.pool_spent(name, now),
                        "hpa": None if scaler is None else scaler.spec.name,
                        "hpa_status": None if scaler is None else status_document(scaler.controller.status),
                        "events": [{"time": t, "message": m} for t, m in self.fleet_events if m.startswith(f"{name}:")],
                    }
                )
            return out

    def budget_view(self) -> dict[str, Any]:
        """The cloud budget: its queue, the period, what it has spent of it, and its changes."""
        with self._lock:
            budget = self.budget
            if budget is None:
                raise NotFound("no budget is served (a Scenario's spec.budget, with burst)", "Budget")
            now = self.clock.now()
            return {
                "queue": budget.spec.queue,
                "per_period": budget.spec.per_period,
                "period_hours": budget.spec.period_hours,
                "period": budget.period,
                "period_start": budget.period_start,
                "spent": budget.spent(now),
                "thresholds_crossed": budget.crossed,
                "hpa_capped": budget.capped,
                "events": [{"time": t, "message": m} for t, m in self.fleet_events if m.startswith("budget:")],
            }

    def links_view(self) -> list[dict[str, Any]]:
        """Each served cloud cluster's link to the IDC: up, or down since when and why."""
        with self._lock:
            clouds = sorted({pool.cluster_name for pool in self.fleet.pools.values() if pool.is_cloud})
            out = []
            for cluster in clouds:
                since, reason = self.links_down.get(cluster, (None, ""))
                out.append({"cluster": cluster, "up": since is None, "down_since": since, "reason": reason})
            return out

    def metrics(self) -> list[QueueMetrics]:
        """Per queue: `pending_seconds`, its waiting and running jobs, what its running pods hold, its weight."""
        with self._lock:
            pending = self.pending_seconds()
            out = {name: QueueMetrics(name, queue.weight, pending[name]) for name, queue in self.queues.items()}
            for job in self.jobs.values():
                row = out.get(job.group.queue)
                if row is None:
                    continue
                if job.waiting:
                    row.pending += 1
                elif job.phase is JobPhase.RUNNING:
                    row.running += 1
                    for pod in job.pods:
                        if pod.phase is PodPhase.RUNNING:
                            row.allocated = row.allocated + pod.requests
            return list(out.values())

    def _job(self, key: str, kind: str = "Job", name: str = "") -> LiveJob:
        """The job of that key; NotFound names the object asked for (the job, or `kind` `name`: a pod)."""
        job = self.jobs.get(key)
        if job is None:
            raise NotFound(f"{kind.lower()} {name or key} does not exist", kind, name or key)
        return job
