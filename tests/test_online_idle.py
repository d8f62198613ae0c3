"""A job no node could ever take costs nothing per cycle, and gets its turn again when nodes change."""

from __future__ import annotations

from scheduler_builders import PROPORTION, job, node, queue

from tidegate.scheduler.online import OnlineScheduler


def online(*names: str) -> OnlineScheduler:
    return OnlineScheduler([node(n, cpu=32) for n in names], [queue("default")], PROPORTION, report_waiting=False)


def test_a_job_asking_more_than_any_node_has_leaves_the_scheduler_idle_until_nodes_change() -> None:
    s = online("n1", "n2")
    big = job("big", requests={"cpu": 64})
    s.add_group(big.group, big.pods)
    assert not s.idle()
    assert s.cycle(1.0).binds == []
    assert "insufficient cpu" in s.pending_reason(big.key)
    assert s.idle()  # freeing capacity cannot help: only a new node list can
    small = job("small", requests={"cpu": 4})
    s.add_group(small.group, small.pods)
    assert not s.idle()
    assert [b.pod for b in s.cycle(2.0).binds] == ["default/small-0"]
    s.remove_group(small.key)  # capacity freed: still nothing for `big`
    assert s.idle()
    s.add_nodes([node("huge", cpu=128)])
    assert not s.idle()
    assert [(b.pod, b.node) for b in s.cycle(3.0).binds] == [("default/big-0", "huge")]


def test_a_job_that_fits_an_empty_node_is_not_hopeless_while_the_cluster_is_full() -> None:
    s = online("n1")
    first, second = job("first", requests={"cpu": 32}), job("second", requests={"cpu": 32})
    for j in (first, second):
        s.add_group(j.group, j.pods)
    assert [b.pod for b in s.cycle(1.0).binds] == ["default/first-0"]
    assert not s.idle()  # `second` waits for room, not for a node
    s.remove_group(first.key)
    assert [b.pod for b in s.cycle(2.0).binds] == ["default/second-0"]
