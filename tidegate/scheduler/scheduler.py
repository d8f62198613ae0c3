"""schedule(snapshot, config) -> Decisions: one pure scheduling cycle."""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from tidegate.model.objects import SchedulerConfiguration
from tidegate.scheduler.actions.allocate import Allocate
from tidegate.scheduler.actions.backfill import Backfill
from tidegate.scheduler.actions.enqueue import Enqueue
from tidegate.scheduler.actions.preempt import Preempt
from tidegate.scheduler.actions.reclaim import Reclaim
from tidegate.scheduler.framework import Action, PluginRegistry
from tidegate.scheduler.info import JobInfo, TaskStatus
from tidegate.scheduler.pending import PendingJobs
from tidegate.scheduler.plugins import default_registry
from tidegate.scheduler.session import Session
from tidegate.scheduler.snapshot import Bind, Decisions, Evict, GroupStatus, PendingJob, Pipeline, Snapshot

ACTIONS: dict[str, Action] = {
    action.name: action for action in (Enqueue(), Allocate(), Backfill(), Preempt(), Reclaim())
}


def schedule(
    snapshot: Snapshot,
    config: SchedulerConfiguration | None = None,
    registry: PluginRegistry | None = None,
) -> Decisions:
    """Run the configured actions over the snapshot; the same input always gives the same output."""
    config = config or SchedulerConfiguration()
    unknown = [name for name in config.actions if name not in ACTIONS]
    if unknown:
        raise ValueError(f"unknown action(s) {', '.join(unknown)}; known: {', '.join(ACTIONS)}")
    with cyclic_gc_paused():
        ssn = Session(snapshot, config, registry or default_registry())
        for name in config.actions:
            ACTIONS[name].execute(ssn)
        decisions = decide(ssn)
        ssn.close()
        _dismantle(ssn)
    return decisions


def _dismantle(ssn: Session) -> None:
    """Break the session's reference cycles (job <-> task, queue <-> job, session <-> plugins) so reference
    counting frees it here, rather than leaving a heap of cyclic garbage for the collector."""
    for job in ssn.jobs:
        job.tasks = []
    for queue in ssn.queues.values():
        queue.jobs, queue.children, queue.ancestors = {}, [], []
        queue.pending, queue.running = PendingJobs(), None
    ssn.running = None
    ssn.forget_plugins()  # plugins (and the bound methods the session keeps) point back at the session


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Hold off Python's cyclic garbage collector for a burst of allocations that stay alive (reference
    counting still frees memory); collection resumes, as configured, afterwards. Left alone when it is off.

    A cycle allocates many small containers, which triggers full collections; each walks the whole heap
    (the snapshot and the caller's objects included) and, on 5,000 nodes, took over a tenth of the
    cycle while finding nothing the cycle still uses.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def decide(ssn: Session) -> Decisions:
    """What the session concluded, as values for adapters to apply."""
    return decide_jobs(ssn, ssn.jobs)


def decide_jobs(ssn: Session, jobs: Iterable[JobInfo]) -> Decisions:
    """Binds, evictions and pipelined pods of the session, and the statuses of `jobs`."""
    out = Decisions()
    names = ssn.table.names
    # The log keeps every allocation, including ones a Statement later discarded; a task discarded and then
    # allocated again (allocate, then backfill) appears twice. Bind it once, in its final placement order.
    binds: dict[str, Bind] = {}
    allocated, pending_status, pipelined_status = TaskStatus.ALLOCATED, TaskStatus.PENDING, TaskStatus.PIPELINED
    for task in ssn.allocation_log:
        if task.status is allocated and task.node >= 0:
            key = task.key
            binds.pop(key, None)
            binds[key] = Bind(key, names[task.node], task.cards)
    out.binds.extend(binds.values())
    for key, reason in ssn.evictions.items():
        task = ssn.tasks[key]
        out.evictions.append(Evict(key, names[task.node], reason))
    for job in jobs:
        counts = job.counts
        pipelined = counts.get(pipelined_status, 0)
        if pipelined:
            for task in job.tasks:
                if task.status is pipelined_status:
                    out.pipelined.append(Pipeline(task.key, names[task.node], task.cards))
        phase = ssn.final_phase(job)
        waiting = counts[pending_status] + pipelined
        ready, needed = job.ready_num, job.min_available
        if ready < needed:
            waiting = max(waiting, needed - ready)
        reason = job.reason if waiting else ""
        if waiting and not reason:
            reason = "pods pipelined; waiting for evictions" if pipelined else "waiting for a scheduling turn"
        job_key, queue_name = job.key, job.queue.name
        out.groups.append(GroupStatus(job_key, queue_name, phase, reason))
        if waiting:
            out.pending.append(PendingJob(job_key, queue_name, reason))
    wakes = ssn.ext.wake_at
    if wakes:  # most configurations have none (sla does)
        out.wake_at = min(wake() for wake in wakes)
    return out
