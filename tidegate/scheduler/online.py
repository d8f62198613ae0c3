"""A scheduler that lives across cycles: the cluster changes between cycles (jobs arrive and
finish, nodes come and go, queues are edited) and each cycle costs what changed, not the cluster.

`schedule(snapshot, config)` opens a session per cycle, which is right for one-off decisions and
costs O(nodes + pods). A simulator replaying a month, or a live control loop, keeps one
`OnlineScheduler` instead: same session, actions and plugins, same decisions for the same state.

It is the port the core offers its hosts (the simulator, `tidegate serve`, `tidegate kube`): they change
the cluster with its `add_*`/`remove_*`/`set_*` methods and read it through its queries (`jobs`, `waiting`,
`pending_reason`, `namespace_refusal`, `quota_figures`, ...); the session behind it is the scheduler's own
(tests/test_layering.py keeps hosts from reaching into it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence

from tidegate.model.objects import Node, Pod, PodGroup, Queue, SchedulerConfiguration
from tidegate.scheduler.figures import QuotaFigures, quota_figures
from tidegate.scheduler.framework import PluginRegistry
from tidegate.scheduler.info import JobInfo, TaskStatus
from tidegate.scheduler.plugins import default_registry
from tidegate.scheduler.refusal import Refusal
from tidegate.scheduler.scheduler import ACTIONS, decide_jobs
from tidegate.scheduler.session import Session
from tidegate.scheduler.snapshot import Decisions, Snapshot


class OnlineScheduler:
    """Mutate the cluster with add_*/remove_*/set_*, then call `cycle(now)`; bound pods stay bound."""

    def __init__(
        self,
        nodes: Sequence[Node],
        queues: Sequence[Queue],
        config: SchedulerConfiguration | None = None,
        registry: PluginRegistry | None = None,
        resources: Collection[str] = (),
        report_waiting: bool = True,
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
        explain_nodes: bool = True,
    ) -> None:
        """With `report_waiting` False a cycle's decisions list only the groups it placed or whose pods are
        pipelined (not every waiting one, which costs a long queue's length each cycle); ask
        `pending_reason` instead. With `explain_nodes` False a pod no node takes is not told why node by node
        (`Session.explain`: counting the nodes changed since, for each pod shape, after each placement): for a
        host that reads no reasons but refusals' codes."""
        self.config = config or SchedulerConfiguration()
        unknown = [name for name in self.config.actions if name not in ACTIONS]
        if unknown:
            raise ValueError(f"unknown action(s) {', '.join(unknown)}; known: {', '.join(ACTIONS)}")
        self.nodes = {node.name: node for node in nodes}
        labels = {name: dict(those) for name, those in (namespaces or {}).items()}
        snapshot = Snapshot(list(nodes), list(queues), [], [], namespaces=labels)
        self.ssn = Session(snapshot, self.config, registry or default_registry(), extra_resources=resources)
        self.ssn.explain_nodes = explain_nodes
        self.jobs: dict[str, JobInfo] = {}
        #: Jobs with pods not yet placed, in arrival order (what each cycle reports as pending).
        self.waiting: dict[str, JobInfo] = {}
        #: The node list changed in a way only rebuilding the node table takes (`Session.replace_nodes`).
        self._nodes_changed = False
        #: Nodes changed only in their allocatable or schedulability since the last cycle (updated in place).
        self._resized: dict[str, Node] = {}
        #: Nodes new since the last cycle (appended to the table) and nodes of the table gone since (its rows
        #: removed), and whether the node list was touched at all (`Session.change_nodes`).
        self._joining: dict[str, Node] = {}
        self._leaving: set[str] = set()
        self._listed = False
        self.report_waiting = report_waiting
        #: A waiting job `idle` last found not hopeless (asked first next time).
        self._not_hopeless: JobInfo | None = None

    # -- the cluster changes ------------------------------------------------------------------------
    def add_nodes(self, nodes: Iterable[Node]) -> None:
        """New nodes, or new versions of known ones: a new node joins the node table after its rows, a node
        changed only in its allocatable or schedulability is updated in place; any other change (a node's
        labels, taints or cards, or a node removed and added again before the next cycle) rebuilds the table."""
        table = self.ssn.table
        for node in nodes:
            name = node.name
            self.nodes[name] = node
            if self._nodes_changed:
                continue
            if name in self._joining:
                self._joining[name] = node  # still new: the node list keeps it where it joined
            elif name in self._leaving:
                self._nodes_changed = True  # back at the end of the node list, with its pods: rebuilt
            elif name not in table.row:
                self._joining[name] = node
                self._listed = True
            elif table.resizes(node):
                self._resized[name] = node
            else:
                self._nodes_changed = True

    def remove_nodes(self, names: Iterable[str]) -> None:
        table = self.ssn.table
        for name in names:
            self.nodes.pop(name, None)
            self._listed = True
            if self._joining.pop(name, None) is None and name in table.row:
                self._leaving.add(name)
                self._resized.pop(name, None)

    def set_schedulable(self, name: str, schedulable: bool) -> None:
        node = self.nodes.get(name)
        if node is not None and node.unschedulable == schedulable:
            self.add_nodes([dataclasses.replace(node, unschedulable=not schedulable)])

    def add_group(self, group: PodGroup, pods: Sequence[Pod]) -> None:
        """A group arrives; it waits until placed. One that arrives placed (a restored control plane's
        running job: its pods bound, or finished) is set aside at once, as the cycle that placed it did."""
        if (self._listed or self._nodes_changed) and any(pod.node_name or pod.nominated_node_name for pod in pods):
            self._sync_nodes()  # its pods' nodes must be in the table to hold their room
        job = self.ssn.add_group(group, pods)
        self.jobs[group.key] = job
        if job.counts[TaskStatus.PENDING] or not job.ready_num or job.ready_num < job.min_available:
            self.waiting[group.key] = job
            return
        self.ssn.set_phase(job, self.ssn.final_phase(job))
        self.ssn.settle(job)

    def remove_group(self, key: str) -> None:
        job = self.jobs.pop(key, None)
        if job is not None:
            self.waiting.pop(key, None)
            self.ssn.remove_job(job)

    def finish_pod(self, key: str, succeeded: bool) -> None:
        """A bound pod ended while its group goes on: its node, cards and quota are free from the next cycle."""
        task = self.ssn.tasks.get(key)
        if task is None:
            raise ValueError(f"pod {key} is not in the scheduler")
        self.ssn.finish_task(task, TaskStatus.SUCCEEDED if succeeded else TaskStatus.FAILED)

    def set_namespaces(self, labels: Mapping[str, Mapping[str, str]]) -> None:
        """The labels of the namespaces that have a Namespace object (pod affinity's namespaceSelector reads
        them), from the next cycle."""
        fresh = {name: dict(those) for name, those in labels.items()}
        if fresh != self.ssn.namespace_labels:
            self.ssn.namespace_labels = fresh
            self.ssn.freed += 1  # other pods may select, or stop selecting, a waiting pod

    def set_queue(self, queue: Queue) -> None:
        """Edit a queue live (e.g. its weight); it takes effect at the next cycle."""
        info = self.ssn.queues.get(queue.name)
        if info is None:
            raise ValueError(f"queue {queue.name} does not exist")
        self.ssn.respec_queue(info, queue)

    # -- a cycle ------------------------------------------------------------------------------------
    def cycle(self, now: float) -> Decisions:
        """One scheduling cycle; binds are applied to the state (the pods run from now on)."""
        ssn = self.ssn
        if self.idle():
            return Decisions()
        if self._listed or self._nodes_changed or self._resized:
            self._sync_nodes()
        ssn.reopen(now)
        for name in self.config.actions:
            ACTIONS[name].execute(ssn)
        allocated = [task for task in ssn.allocation_log if task.status is TaskStatus.ALLOCATED]
        placed = {id(task.job): task.job for task in allocated}
        if self.report_waiting:
            reported: Iterable[JobInfo] = list(self.waiting.values())
        else:
            nominated = {id(task.job): task.job for task in ssn.pipelined.values()}
            reported = (placed | nominated).values() if nominated else placed.values()
        decisions = decide_jobs(ssn, reported)
        for task in allocated:
            task.job.set_status(task, TaskStatus.RUNNING)
        if placed:
            ssn.placed += 1  # bound pods run from now on: new candidate victims
        touched = dict(placed)
        for key in ssn.evictions:
            job = ssn.tasks[key].job
            ssn.unsettle(job)
            self.waiting.setdefault(job.key, job)
            touched[id(job)] = job
        # Only jobs that gained or lost pods this cycle can change phase or stop waiting.
        for job in touched.values():
            ssn.set_phase(job, ssn.final_phase(job))
            if job.key in self.waiting and not job.counts[TaskStatus.PENDING] and job.ready_num >= job.min_available:
                del self.waiting[job.key]
        for job in placed.values():
            ssn.settle(job)
        return decisions

    def _sync_nodes(self) -> None:
        """The session takes the node list as changed since (added, removed, resized, cordoned nodes): in place
        when the table's rows, less the leaving ones, then the joining ones, are the node list in its order
        (`Session.change_nodes`), else by rebuilding the table (`Session.replace_nodes`)."""
        ssn = self.ssn
        if self._listed and not self._nodes_changed:
            names = ssn.table.names
            leaving = self._leaving
            order = [name for name in names if name not in leaving] if leaving else names
            self._nodes_changed = len(order) + len(self._joining) != len(self.nodes) or [
                *order,
                *self._joining,
            ] != list(self.nodes)
        if self._nodes_changed:
            ssn.replace_nodes(list(self.nodes.values()))
        elif self._listed:
            ssn.change_nodes(self._leaving, list(self._joining.values()), list(self._resized.values()))
        else:
            ssn.resize_nodes(list(self._resized.values()))
        self._nodes_changed = self._listed = False
        self._resized, self._joining, self._leaving = {}, {}, set()

    def idle(self) -> bool:
        """Nothing a cycle could do: no node change, no nominated pod, and every waiting job hopeless
        (or none waiting). With `report_waiting` a cycle is never idle: it reports the waiting jobs.
        `remove_group` keeps an idle scheduler idle (the simulator relies on it): it only takes jobs away."""
        ssn = self.ssn
        if self._listed or self._nodes_changed or self._resized or ssn.pipelined or self.report_waiting:
            return False
        waiting = self.waiting
        witness = self._not_hopeless  # the job that last kept it busy: most often it still does
        if witness is not None and waiting.get(witness.key) is witness and not ssn.hopeless(witness):
            return False
        for job in waiting.values():
            if not ssn.hopeless(job):
                self._not_hopeless = job
                return False
        self._not_hopeless = None
        return True

    def pending_reason(self, key: str) -> str:
        """Why the group is still waiting after the last cycle ("" if it is not waiting): a `Refusal`, with
        its code, when a plugin's vote stops it."""
        job = self.waiting.get(key)
        if job is None:
            return ""
        return job.reason or "waiting for a scheduling turn"

    # -- what hosts read ----------------------------------------------------------------------------
    @property
    def resources(self) -> frozenset[str]:
        """The resources the scheduler has a column for (what a pod may ask for)."""
        return frozenset(self.ssn.index.col)

    def has_queue(self, name: str) -> bool:
        return name in self.ssn.queues

    def namespace_refusal(self, queue: str, namespace: str) -> Refusal | None:
        """Why the queue (or an ancestor) does not take work from the namespace; None if it does, or if there
        is no such queue."""
        info = self.ssn.queues.get(queue)
        return None if info is None else self.ssn.namespace_refusal(info, namespace)

    def quota_figures(self) -> dict[str, QuotaFigures]:
        """Each queue's deserved share, request, share and overuse as the last cycle left them."""
        return quota_figures(self.ssn)

    def group_of(self, pod: str) -> str:
        """The key of the group the pod belongs to ("" for a pod the scheduler does not have)."""
        task = self.ssn.tasks.get(pod)
        return task.job.key if task is not None else ""

    def node_name(self, row: int) -> str:
        """The name of the node of a task's row ("" for none)."""
        names = self.ssn.table.names
        return names[row] if 0 <= row < len(names) else ""
