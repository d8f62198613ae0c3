"""Enqueue over a long backlog costs what a pass judges, and decides and explains exactly as the eager pass
that writes every waiting job (hypothesis): queues capped below what is asked, gangs of mixed sizes arriving
and leaving, cycles in between; after every cycle the same jobs are admitted and placed, and every job reads
the same phase and reason. The eager pass is enqueue as it was before waiting jobs were kept in order and
judged through the queue's record (pending.py): it is the reference here, run on a twin scheduler.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scheduler_builders import conf, job, node, queue

from tidegate.model.objects import PodGroupPhase, Queue, SchedulerConfiguration
from tidegate.scheduler import online
from tidegate.scheduler.actions.enqueue import _admission_state, _only_grew
from tidegate.scheduler.info import QueueInfo
from tidegate.scheduler.online import OnlineScheduler
from tidegate.scheduler.session import Session

CAPPED = conf(
    "enqueue, allocate, backfill, reclaim",
    "priority, gang",
    "drf, predicates, capacity, nodeorder, binpack",
)
#: sla permits admission once a job has waited: the pass that writes every job (`_admit_each`).
PERMITTING = conf(
    "enqueue, allocate, backfill",
    "priority, gang, sla",
    "drf, predicates, capacity, nodeorder, binpack",
    sla={"sla-waiting-time": "30s"},
)


class EagerEnqueue:
    """Enqueue as it was: every waiting job judged or written each pass (the reference)."""

    name: ClassVar[str] = "enqueue"

    def execute(self, ssn: Session) -> None:
        for q in ssn.queues.values():
            q.inqueue.fill(0)  # the reservations are made again every pass
        for q in ssn.queues.values():
            for j in q.jobs.values():
                from tidegate.scheduler.actions.enqueue import _reservation

                reserved = _reservation(j)[2]
                if reserved is not None:
                    for level in (q, *q.ancestors):
                        level.inqueue += reserved
        for q in ssn.in_queue_order(q for q in ssn.queues.values() if q.has_jobs):
            self._admit(ssn, q)

    @staticmethod
    def _admit(ssn: Session, q: QueueInfo) -> None:
        permits = bool(ssn.ext.job_enqueue_permit)
        pending = [j for j in q.pending if j.enqueue_blocked_at != ssn.freed or (permits and ssn.enqueue_permitted(j))]
        if any(j.enqueue_seen for j in pending) and _only_grew(q.admission_state, _admission_state(ssn, q)):
            pending = [j for j in pending if not j.enqueue_seen or (permits and ssn.enqueue_permitted(j))]
        if not pending:
            return
        ordered = ssn.in_job_order(pending)
        refused: dict[bytes, str] = {}
        floors: Any = None
        probed: bytes | None = None
        waiting = False
        refused_after = -1
        for i, j in enumerate(ordered):
            permitted = permits and ssn.enqueue_permitted(j)
            if 0 <= refused_after < i and not permitted:
                continue
            j.enqueue_seen = True
            outside = ssn.namespace_refusal(q, j.group.namespace)
            reason: str | None = outside
            if not reason:
                asked = j.min_resources.tobytes()
                reason = (None if permitted else refused.get(asked)) or ssn.job_not_enqueueable_reason(j)
                if reason and not permitted:
                    refused[asked] = reason
            if not reason:
                ssn.set_phase(j, PodGroupPhase.INQUEUE)
                j.reason = ssn.job_invalid_reason(j) or ""
                refused.clear()
                probed = None
                for level in (q, *q.ancestors):
                    level.inqueue += j.min_resources
                continue
            j.reason = reason
            j.enqueue_blocked_at = ssn.freed
            waiting = True
            if outside or i + 1 == len(ordered):
                continue
            if floors is None:
                floors = np.minimum.accumulate(np.stack([o.min_resources for o in ordered])[::-1])[::-1]
            floor = floors[i + 1]
            if probed == floor.tobytes():
                continue
            probed = floor.tobytes()
            refusal = ssn.job_not_enqueueable_reason(dataclasses.replace(j, min_resources=floor))
            if refusal and refused_after < 0:
                for rest in ordered[i + 1 :]:
                    if permits and ssn.enqueue_permitted(rest):
                        continue
                    rest.enqueue_seen = True
                    namespace = ssn.namespace_refusal(q, rest.group.namespace)
                    rest.reason = namespace or refused.get(rest.min_resources.tobytes()) or refusal
                    rest.enqueue_blocked_at = ssn.freed
                if not permits:
                    break
                refused_after = i
        q.admission_state = _admission_state(ssn, q) if waiting else ()


@contextmanager
def eager() -> Iterator[None]:
    kept = online.ACTIONS["enqueue"]
    online.ACTIONS["enqueue"] = EagerEnqueue()  # type: ignore[assignment]
    try:
        yield
    finally:
        online.ACTIONS["enqueue"] = kept


def queues(namespaces: bool) -> list[Queue]:
    team = queue("team", capability={"nvidia.com/gpu": 24, "cpu": 1000}, deserved={"nvidia.com/gpu": 16})
    other = queue("other", parent="team", capability={"nvidia.com/gpu": 12}, deserved={"nvidia.com/gpu": 8})
    mine = queue("mine", parent="team", capability={"nvidia.com/gpu": 16}, deserved={"nvidia.com/gpu": 8})
    if namespaces:
        other = dataclasses.replace(other, namespaces=("default", "lab"))
    return [team, other, mine]


STEP = st.one_of(
    st.tuples(
        st.just("job"),
        st.sampled_from(["other", "mine"]),
        st.sampled_from([1, 1, 1, 2, 4, 8, 16]),
        st.integers(1, 3),
        st.sampled_from([0, 0, 0, 10]),
        st.sampled_from(["default", "default", "lab", "far"]),
    ),
    st.tuples(st.just("leave"), st.integers(0, 1_000)),
    st.tuples(st.just("cycle")),
)


def run(steps: list[tuple[Any, ...]], config: SchedulerConfiguration, namespaces: bool) -> None:
    nodes = [node(f"n{i}", cpu=64, gpus=8) for i in range(3)]
    fast = OnlineScheduler(nodes, queues(namespaces), config, report_waiting=False)
    slow = OnlineScheduler(nodes, queues(namespaces), config, report_waiting=False)
    now, made = 0.0, 0
    for step in [*steps, ("cycle",), ("cycle",)]:
        if step[0] == "job":
            _, into, gpus, replicas, priority, namespace = step
            made += 1
            new = job(
                f"j{made}",
                queue=into,
                replicas=replicas,
                requests={"cpu": 2 * gpus, "nvidia.com/gpu": gpus},
                min_resources={"cpu": 2 * gpus * replicas, "nvidia.com/gpu": gpus * replicas},
                priority=priority,
                created=now,
                namespace=namespace,
            )
            fast.add_group(new.group, new.pods)
            slow.add_group(dataclasses.replace(new.group), new.pods)
        elif step[0] == "leave" and fast.jobs:
            keys = sorted(fast.jobs)
            key = keys[step[1] % len(keys)]
            fast.remove_group(key)
            slow.remove_group(key)
        elif step[0] == "cycle":
            now += 10.0
            got = fast.cycle(now)
            with eager():
                want = slow.cycle(now)
            assert [(b.pod, b.node) for b in got.binds] == [(b.pod, b.node) for b in want.binds]
            assert [e.pod for e in got.evictions] == [e.pod for e in want.evictions]
        assert sorted(fast.jobs) == sorted(slow.jobs)
        for key, mine in fast.jobs.items():
            theirs = slow.jobs[key]
            assert (mine.phase, mine.reason, mine.enqueue_seen) == (theirs.phase, theirs.reason, theirs.enqueue_seen)
            assert mine.enqueue_blocked_at == theirs.enqueue_blocked_at, key
            assert fast.pending_reason(key) == slow.pending_reason(key)


def runs(into: str) -> list[tuple[Any, ...]]:
    """`into` fills up with 4-GPU jobs; then, one a cycle (so job order is arrival order), big jobs wait ahead
    of small ones; then room frees twice: a pass meets runs of big jobs refused by memo between its votes,
    and stops at a probe (other's cap is 12 GPUs, mine's 16)."""
    sizes = [8, 8, 8, 2, 8, 8, 1, 8, 2, 8, 1, 1]
    namespaces = ["default", "default", "lab", "default", "far", "default", "default", "lab", "default", "far"]
    return [
        *[("job", into, 4, 1, 0, "default")] * 3,
        ("cycle",),
        *[
            step
            for i, gpus in enumerate(sizes)
            for step in (("job", into, gpus, 1, 0, namespaces[i % len(namespaces)]), ("cycle",))
        ],
        ("leave", 0),
        ("cycle",),
        ("leave", 1),
        ("cycle",),
        ("cycle",),
    ]


@pytest.mark.parametrize(("into", "namespaces"), [("mine", False), ("mine", True), ("other", True)])
def test_enqueue_over_runs_of_refused_jobs_decides_and_explains_as_the_eager_pass(into: str, namespaces: bool) -> None:
    run(runs(into), CAPPED, namespaces)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, min_size=5, max_size=60), st.booleans())
def test_enqueue_decides_and_explains_as_the_eager_pass(steps: list[tuple[Any, ...]], namespaces: bool) -> None:
    run(steps, CAPPED, namespaces)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(STEP, min_size=5, max_size=40))
def test_enqueue_with_permits_decides_and_explains_as_the_eager_pass(steps: list[tuple[Any, ...]]) -> None:
    run(steps, PERMITTING, False)


def test_a_pass_after_a_departure_does_not_walk_the_refused_backlog() -> None:
    """A queue with hundreds of refused jobs of a few sizes: a job's departure lets a pass admit what fits and
    vote once per size, not judge each waiting job (`Session.job_not_enqueueable_reason` is counted)."""
    nodes = [node(f"n{i}", cpu=64, gpus=8) for i in range(3)]
    s = OnlineScheduler(nodes, queues(False), CAPPED, report_waiting=False)
    for i in range(400):
        gpus = (8, 4, 2, 1)[i % 4]
        asks = {"cpu": 2 * gpus, "nvidia.com/gpu": gpus}
        new = job(f"j{i}", queue="mine", requests=asks, min_resources=asks, created=float(i))
        s.add_group(new.group, new.pods)
    s.cycle(1.0)
    s.cycle(2.0)
    placed = next(key for key, j in s.jobs.items() if j.phase is PodGroupPhase.RUNNING)
    votes = 0
    vote = s.ssn.job_not_enqueueable_reason

    def counted(j: Any) -> str | None:
        nonlocal votes
        votes += 1
        return vote(j)

    s.ssn.job_not_enqueueable_reason = counted  # type: ignore[method-assign]
    s.remove_group(placed)
    s.cycle(3.0)
    assert 0 < votes <= 12
    assert all(s.pending_reason(key) for key, j in s.jobs.items() if j.phase is PodGroupPhase.PENDING)


def test_what_admitted_jobs_reserve_is_summed_again_when_one_of_them_goes() -> None:
    """Enqueue keeps a queue's sum of reservations while its jobs' memos are the same (`QueueInfo.reserved_sum`),
    and sums them again when one came or went: j1, j3 and j4 wait admitted (no node has 3 GPUs),
    reserving 10 of the queue's 12; j2 asks 6 and is refused. Once j1 is gone, 3 + 3 + 6 fit: j2 is admitted
    (and waits for a node), and then j5's 2 do not."""
    nodes = [node(f"n{i}", cpu=64, gpus=2) for i in range(6)]
    s = OnlineScheduler(nodes, [queue("a", capability={"nvidia.com/gpu": 12})], CAPPED)
    for name, gpus in (("j1", 4), ("j3", 3), ("j4", 3)):
        admitted = job(name, queue="a", requests={"nvidia.com/gpu": gpus}, min_resources={"nvidia.com/gpu": gpus})
        s.add_group(admitted.group, admitted.pods)
    s.cycle(1.0)
    late = job("j2", queue="a", requests={"nvidia.com/gpu": 6}, min_resources={"nvidia.com/gpu": 6})
    s.add_group(late.group, late.pods)
    s.cycle(2.0)
    assert "capability" in s.pending_reason(late.key)
    s.remove_group("default/j1")
    s.cycle(3.0)
    assert "capability" not in s.pending_reason(late.key) and "nodes" in s.pending_reason(late.key)
    # j1 went and j2 came since the sum was kept: 3 + 3 + 6 reserved, so j5's 2 more are refused
    last = job("j5", queue="a", requests={"nvidia.com/gpu": 3}, min_resources={"nvidia.com/gpu": 2})
    s.add_group(last.group, last.pods)
    s.cycle(4.0)
    assert "capability" in s.pending_reason(last.key)
