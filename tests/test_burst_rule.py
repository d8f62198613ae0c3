"""Overflow's walk after a cycle (`Overflow.after_cycle`, which inlines the rule for speed) moves exactly the jobs
`Burst.may_move` and `Burst.moves` say, in the host's order, and returns the soonest time one that may move will
have waited long enough; nothing moves while every cloud's link is down."""

from __future__ import annotations

import math
from collections.abc import Iterable

from hypothesis import given, settings
from hypothesis import strategies as st

from tidegate.fleet.burst import Burst, Overflow
from tidegate.fleet.port import EventKind, WaitingJob
from tidegate.scheduler.refusal import Refusal, RefusalCode, refusal_code

BURST = "burst-cloud"
QUEUES = ("dev", "prod", BURST)
REASONS = (
    "",
    "waiting for a scheduling turn",
    Refusal("queue dev would exceed its capability", RefusalCode.AT_CAPABILITY),
    Refusal("queue dev holds its deserved share", RefusalCode.AT_DESERVED),
    Refusal("0/3 nodes are available", RefusalCode.UNSPECIFIED),
)


class Host:
    """A burst host that keeps the jobs it is shown and records what overflow does to them."""

    def __init__(self, jobs: list[WaitingJob], reasons: dict[str, str], refused: set[str]) -> None:
        self.jobs = jobs
        self.reasons = reasons
        self.refused = refused  # namespaces the burst queue does not take
        self.moves: list[tuple[str, str]] = []
        self.events: list[tuple[str, EventKind, str]] = []
        self.cycles = 0

    def waiting(self, outside: str = "") -> Iterable[WaitingJob]:
        return [job for job in self.jobs if not outside or job.queue != outside]

    def reason(self, key: str) -> str:
        return self.reasons[key]

    def admits(self, queue: str, namespace: str) -> bool:
        return namespace not in self.refused

    def move(self, key: str, queue: str) -> None:
        self.moves.append((key, queue))
        self.jobs = [job._replace(queue=queue) if job.key == key else job for job in self.jobs]

    def record(self, text: str, kind: EventKind, job: str = "") -> None:
        self.events.append((text, kind, job))

    def want_cycle(self) -> None:
        self.cycles += 1


class LinksStub:
    def __init__(self, blocks: bool) -> None:
        self.blocks_burst = blocks
        self.on_all_cut = lambda: None


def expected(burst: Burst, host: Host, now: float) -> tuple[list[str], float]:
    """The rule applied job by job with Burst's own methods, as overflow did before it was inlined."""
    moved: list[str] = []
    soonest = math.inf
    for job in host.waiting(outside=burst.queue):
        if not burst.may_move(job):
            continue
        if not burst.moves(job, now - job.since, refusal_code(host.reason(job.key))):
            soonest = min(soonest, job.since + burst.after_seconds)
            continue
        if host.admits(burst.queue, job.namespace):
            moved.append(job.key)
    return moved, soonest


waiting_jobs = st.lists(
    st.tuples(
        st.sampled_from(QUEUES),
        st.one_of(st.sampled_from((0.0, 50.0, 600.0, 1000.0)), st.floats(0, 2000, allow_nan=False)),
        st.sampled_from(("default", "team-a")),
        st.booleans(),
        st.booleans(),
        st.booleans(),
        st.sampled_from(REASONS),
    ),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(
    waiting_jobs,
    st.one_of(st.sampled_from((600.0, 650.0, 1200.0)), st.floats(0, 3000, allow_nan=False)),
    st.sampled_from((0.0, 1.0, 600.0)),
    st.booleans(),
    st.booleans(),
)
def test_after_cycle_moves_what_the_rule_says(
    specs: list[tuple[str, float, str, bool, bool, bool, str]],
    now: float,
    after: float,
    refuse_team: bool,
    cut: bool,
) -> None:
    jobs = [
        WaitingJob(f"j{i}", queue, "dev", since, namespace, pinned, has_pods, part_running)
        for i, (queue, since, namespace, pinned, has_pods, part_running, _) in enumerate(specs)
    ]
    reasons = {f"j{i}": spec[-1] for i, spec in enumerate(specs)}
    burst = Burst(BURST, after)
    host = Host(jobs, reasons, {"team-a"} if refuse_team else set())
    want_moved, want_soonest = expected(burst, Host(list(jobs), reasons, host.refused), now)
    soonest = Overflow(burst, host, LinksStub(cut)).after_cycle(now)  # type: ignore[arg-type]
    if cut:
        assert soonest == math.inf and not host.moves and not host.events and not host.cycles
        return
    assert host.moves == [(key, BURST) for key in want_moved]
    assert [job for _, kind, job in host.events if kind is EventKind.OVERFLOW] == want_moved
    assert [text for text, _, _ in host.events] == [f"overflowed from dev to {BURST}"] * len(want_moved)
    assert soonest == want_soonest
    assert host.cycles == (1 if want_moved else 0)


def test_a_job_at_capability_moves_at_once_and_a_young_one_waits() -> None:
    at_cap = Refusal("queue dev would exceed its capability", RefusalCode.AT_CAPABILITY)
    jobs = [
        WaitingJob("young", "dev", "dev", 100.0, "default", False),
        WaitingJob("capped", "dev", "dev", 100.0, "default", False),
        WaitingJob("old", "dev", "dev", 0.0, "default", False),
        WaitingJob("just", "dev", "dev", 50.0, "default", False),
        WaitingJob("pinned", "dev", "dev", 0.0, "default", True),
    ]
    host = Host(jobs, {"young": "no node fits", "capped": at_cap, "old": "", "just": "", "pinned": at_cap}, set())
    soonest = Overflow(Burst(BURST, 600.0), host, LinksStub(False)).after_cycle(650.0)  # type: ignore[arg-type]
    assert host.moves == [("capped", BURST), ("old", BURST), ("just", BURST)]  # "just" has waited 600 s exactly
    assert soonest == 700.0  # the young job's 600 s
