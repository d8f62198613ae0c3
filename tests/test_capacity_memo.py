"""capacity remembers whether a queue may take a pod, per queue and request, while no queue's allocation changes: a
sibling's placement moves the parent's, and so what the queue is told (a memo keyed on the queue's own allocation
alone would miss it)."""

from __future__ import annotations

import dataclasses

import numpy as np
from scheduler_builders import conf, job, node, queue

from tidegate.scheduler.online import OnlineScheduler
from tidegate.scheduler.refusal import Refusal, RefusalCode

CONFIG = conf("enqueue, allocate", "priority, gang", "predicates, capacity")


def test_a_sibling_s_placement_under_a_capped_parent_is_seen_by_the_queue_asked_before() -> None:
    tree = [queue("org", capability={"cpu": 4}), queue("a", parent="org"), queue("b", parent="org")]
    s = OnlineScheduler([node("n0", cpu=16)], tree, CONFIG)
    waiting = job("a1", "a", 1, {"cpu": 2}, node_selector={"zone": "nowhere"})  # fits no node: a stays at 0
    s.add_group(waiting.group, waiting.pods)
    s.cycle(0.0)
    ssn = s.ssn
    task = ssn.tasks[waiting.pods[0].key]
    assert ssn.queue_not_allocatable_reason(ssn.queues["a"], task) is None  # org holds 0 of its 4 cpus
    sibling = job("b1", "b", 1, {"cpu": 3})
    s.add_group(sibling.group, sibling.pods)
    s.cycle(1.0)
    assert ssn.tasks[sibling.pods[0].key].node >= 0  # b1 runs: org holds 3, a still none
    refusal = ssn.queue_not_allocatable_reason(ssn.queues["a"], task)
    assert isinstance(refusal, Refusal) and refusal.code is RefusalCode.AT_CAPABILITY
    assert "queue org at capability cpu 3/4" in str(refusal)


def test_admission_kept_by_the_session_s_vector_still_judges_a_probe_asking_another_floor() -> None:
    """capacity keeps what a minResources vector asks by the session's (read-only) vector; enqueue's probes copy
    a job with another floor (a fresh array, the job's other fields kept, its minResources bytes included), and
    must be judged on that floor, not on what the job's own vector asked."""
    s = OnlineScheduler([node("n0", cpu=16)], [queue("q", capability={"cpu": 4})], CONFIG)
    big = job("big", "q", 1, {"cpu": 8}, min_resources={"cpu": 8})
    s.add_group(big.group, big.pods)
    s.cycle(0.0)
    ssn = s.ssn
    info = ssn.jobs[0]
    refusal = ssn.job_not_enqueueable_reason(info)
    assert isinstance(refusal, Refusal) and refusal.code is RefusalCode.AT_CAPABILITY  # 8 cpus asked, 4 allowed
    floor = np.zeros_like(info.min_resources)
    floor[ssn.index.col["cpu"]] = 2000  # milli-cpus: 2 cpus fit under the cap
    assert ssn.job_not_enqueueable_reason(dataclasses.replace(info, min_resources=floor)) is None
    assert ssn.job_not_enqueueable_reason(info) == refusal  # the job's own vector still asks 8
