"""Allocate's shortcuts for turns that change nothing: a queue whose job's turn placed nothing takes its next
turn at once when no other queue would come first, and jobs of a queue that tried the same shapes and found
no node share what the first one found while the state stands. Neither may change a decision or a reason:
the reference is allocate's plain loop (one turn per pop of the queue heap, every remembered turn asked in
full), kept here as the oracle."""

from __future__ import annotations

import heapq
from itertools import count

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scheduler_builders import conf, job, node, queue

from tidegate.model.objects import PluginOption, SchedulerConfiguration, Tier
from tidegate.scheduler import scheduler
from tidegate.scheduler.actions.allocate import Allocate, _Line, bind_nominated, schedulable_jobs
from tidegate.scheduler.info import QueueInfo, TaskStatus
from tidegate.scheduler.online import OnlineScheduler
from tidegate.scheduler.session import Session


class PlainAllocate(Allocate):
    """Allocate as Volcano loops: pop the queue with the lowest key, give its next job one turn, push it back."""

    def execute(self, ssn: Session) -> None:
        bind_nominated(ssn)
        seq = count()
        jobs: dict[str, _Line] = {}
        queue_heap: list[tuple[tuple[object, ...], int, QueueInfo]] = []
        for info in ssn.queues.values():
            ready = schedulable_jobs(ssn, info, skip_blocked=True)
            if ready:
                jobs[info.name] = _Line([(ssn.job_key(j), next(seq), j) for j in ready])
                queue_heap.append((ssn.queue_key(info), next(seq), info))
        heapq.heapify(queue_heap)
        while queue_heap:
            _, _, info = heapq.heappop(queue_heap)
            line = jobs[info.name]
            if not line:
                continue
            reason = ssn.queue_overused_reason(info)
            if reason:
                for _, _, waiting in line:
                    waiting.reason = waiting.reason or reason
                continue
            _, _, turn = line.pop()
            if self.allocate_turn(ssn, info, turn):
                line.push((ssn.job_key(turn), next(seq), turn))
            heapq.heappush(queue_heap, (ssn.queue_key(info), next(seq), info))


def config(hierarchy: bool) -> SchedulerConfiguration:
    drf = PluginOption("drf", switches={"enableHierarchy": hierarchy})
    others = ("predicates", "nodeorder", "binpack") if hierarchy else ("predicates", "proportion", "binpack")
    return SchedulerConfiguration(
        actions=("allocate",),
        tiers=(Tier((PluginOption("priority"), PluginOption("gang"))), Tier((drf, *(PluginOption(p) for p in others)))),
    )


def cluster(hierarchy: bool) -> OnlineScheduler:
    if hierarchy:
        queues = [queue("p", weight=2), queue("a", parent="p"), queue("b", parent="p", weight=3), queue("c")]
    else:
        queues = [queue("a"), queue("b", weight=3), queue("c", weight=2)]
    nodes = [node(f"n{i}", cpu=16, gpus=8) for i in range(3)]
    return OnlineScheduler(nodes, queues, config(hierarchy), report_waiting=False)


#: A job: its queue, pods, GPUs a pod, priority; one asking 16 GPUs a pod fits no node.
jobs = st.lists(
    st.tuples(st.sampled_from("abc"), st.integers(1, 3), st.sampled_from([1, 2, 4, 8, 16]), st.sampled_from([0, 5])),
    min_size=1,
    max_size=14,
)


def run(plain: bool, hierarchy: bool, arrivals: list[tuple[str, int, int, int]], leaving: list[int]) -> list[object]:
    """Decisions and reasons of three cycles: the jobs arrive, then some leave (room freed), then a cycle more."""
    seen: list[object] = []
    with pytest.MonkeyPatch.context() as patch:
        if plain:
            patch.setitem(scheduler.ACTIONS, "allocate", PlainAllocate())
        online = cluster(hierarchy)
        keys = []
        for i, (name, pods, gpus, priority) in enumerate(arrivals):
            made = job(f"j{i}", name, pods, {"cpu": 1, "nvidia.com/gpu": gpus}, priority=priority)
            online.add_group(made.group, made.pods)
            keys.append(made.key)
        for now in (1.0, 2.0, 3.0):
            decisions = online.cycle(now)
            seen.append([(b.pod, b.node) for b in decisions.binds])
            seen.append([(key, online.pending_reason(key)) for key in keys])
            if now == 1.0:
                for i in leaving:
                    if i < len(keys):
                        online.remove_group(keys[i])
    return seen


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs, st.lists(st.integers(0, 13), max_size=4), st.booleans())
def test_allocate_places_and_explains_as_its_plain_loop(
    arrivals: list[tuple[str, int, int, int]], leaving: list[int], hierarchy: bool
) -> None:
    assert run(False, hierarchy, arrivals, leaving) == run(True, hierarchy, arrivals, leaving)


def test_a_shared_no_node_verdict_holds_only_while_the_state_it_was_found_in_stands() -> None:
    no_quota = conf("allocate", "gang", "predicates")  # only the node stops a pod
    online = OnlineScheduler([node("n1", cpu=16, gpus=8)], [queue("q")], no_quota, report_waiting=False)
    hog, first, second = (job(name, "q", 1, {"cpu": 1, "nvidia.com/gpu": 8}) for name in ("a-hog", "first", "second"))
    for made in (hog, first, second):
        online.add_group(made.group, made.pods)
    online.cycle(1.0)  # hog takes the node; first and second find none, and remember it
    ssn = online.ssn
    info = ssn.queues["q"]
    waiting = [online.waiting[first.key], online.waiting[second.key]]
    assert all(j.no_node_memo is not None for j in waiting)
    turn, verdicts = Allocate(), {}  # type: ignore[var-annotated]
    assert not turn.allocate_turn(ssn, info, waiting[0], verdicts)
    assert verdicts  # first's finding, kept for jobs of the queue that tried the same shapes
    online.remove_group(hog.key)  # the node is free: the finding no longer holds
    turn.allocate_turn(ssn, info, waiting[1], verdicts)
    assert waiting[1].counts[TaskStatus.ALLOCATED] == 1
