"""The sla plugin as Volcano's: `sla-waiting-time` from the plugin's arguments or a job's annotation (Go
durations, checked with the manifests), job order by deadline, and Permit votes for enqueue and pipelined that
end the vote after their tier."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from scheduler_builders import Job, bound, conf, evicted, job, node, phase_of, queue
from typer.testing import CliRunner

from tidegate.cli.main import app
from tidegate.model.expand import workload_from
from tidegate.model.manifests import as_waiting_time, load_text
from tidegate.model.objects import PodGroupPhase, SchedulerConfiguration
from tidegate.scheduler.admission import admission_errors
from tidegate.scheduler.online import OnlineScheduler
from tidegate.scheduler.plugins import default_registry
from tidegate.scheduler.scheduler import schedule
from tidegate.scheduler.session import Session
from tidegate.scheduler.snapshot import Snapshot

HOUR = 3600.0
#: sla in the first tier: its Permit skips proportion's refusal (tier two) and gang's pipelined check (tier two).
SLA_FIRST = conf("enqueue, allocate, preempt", "priority, sla", "gang, predicates, proportion, nodeorder")
#: sla in gang's and proportion's tier: their refusals stand whatever it permits.
SLA_WITH_GANG = conf("enqueue, allocate, preempt", "priority", "gang, sla, predicates, proportion, nodeorder")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h2m3s", 3723.0), ("1.5h", 5400.0), ("90m", 5400.0), ("1h2m3s4ms5us6ns", 3723.004005006), ("2µs", 2e-6)],
)
def test_waiting_times_read_as_go_durations(text: str, seconds: float) -> None:
    assert as_waiting_time(text, "f") == pytest.approx(seconds)


SCHEDULER_CONF = """
apiVersion: tidegate.io/v1alpha1
kind: SchedulerConfiguration
metadata: {{name: c}}
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: sla
    arguments: {{sla-waiting-time: {wait}}}
"""


@pytest.mark.parametrize(
    ("wait", "message"),
    [
        ('"1x"', "'1x' is not a duration"),
        ("5", "expected a duration string"),
        ('"0s"', "must be positive"),
        ('"-5m"', "must be positive"),
        ('""', "is empty"),
        ('"3000000h"', "longer than Go's longest duration"),
    ],
)
def test_a_bad_waiting_time_argument_is_an_error_naming_the_field(wait: str, message: str) -> None:
    ms = load_text(SCHEDULER_CONF.format(wait=wait), "conf.yaml")
    errors = admission_errors(ms)
    field = "tiers[0].plugins[2].arguments.sla-waiting-time"
    assert [(e.source.file, e.field) for e in errors] == [("conf.yaml", field)]
    assert message in errors[0].message


def test_a_bad_waiting_time_annotation_is_an_error_naming_the_document_and_field() -> None:
    text = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: g, annotations: {volcano.sh/sla-waiting-time: soon}}
spec: {minMember: 1}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j, annotations: {sla-waiting-time: "0"}}
spec: {tasks: [{name: t, replicas: 1, template: {spec: {containers: [{name: c}]}}}]}
"""
    ms = load_text(text, "jobs.yaml")
    found = [(e.source.index, e.kind, e.name, e.field) for e in ms.errors]
    assert found == [
        (0, "PodGroup", "g", "metadata.annotations.volcano.sh/sla-waiting-time"),
        (1, "Job", "j", "metadata.annotations.sla-waiting-time"),
    ]


def test_a_vcjob_s_annotation_becomes_its_podgroup_s_waiting_time() -> None:
    text = """
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: j, annotations: {sla-waiting-time: 1h30m}}
spec: {tasks: [{name: t, replicas: 1, template: {spec: {containers: [{name: c}]}}}]}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: g, annotations: {volcano.sh/sla-waiting-time: 10m, sla-waiting-time: 1h}}
spec: {minMember: 1}
"""
    groups = {g.name: g for g in workload_from(load_text(text, "jobs.yaml")).groups}
    assert groups["j"].waiting_time == 5400.0
    assert groups["j"].raw["metadata"]["annotations"] == {"sla-waiting-time": "1h30m"}
    assert groups["g"].waiting_time == 600.0  # volcano.sh/sla-waiting-time first, as Volcano reads them


def one_gpu_cluster(now: float, *jobs: Job) -> Snapshot:
    """One node with a GPU, queue q capped at it and already using it (a running job), plus `jobs`."""
    running = job("running", "q", 1, {"cpu": 1, "nvidia.com/gpu": 1}, phase=PodGroupPhase.RUNNING, running_on=["n"])
    made = [running, *jobs]
    return Snapshot(
        nodes=[node("n", cpu=8, gpus=1)],
        queues=[queue("q", capability={"nvidia.com/gpu": 1})],
        groups=[j.group for j in made],
        pods=[p for j in made for p in j.pods],
        now=now,
    )


def waiting(name: str, created: float, wait: float | None, priority: int = 0, queue_name: str = "q") -> Job:
    """A one-GPU job created at `created` with that sla-waiting-time (None: none of its own)."""
    ask = {"cpu": 1, "nvidia.com/gpu": 1}
    made = job(name, queue_name, 1, ask, min_resources=ask, created=created, priority=priority)
    made.group.waiting_time = wait
    return made


def test_a_job_past_its_waiting_time_is_admitted_over_a_later_tier_s_refusal() -> None:
    late = waiting("late", created=0.0, wait=HOUR)
    decisions = schedule(one_gpu_cluster(HOUR - 1, late), SLA_FIRST)
    assert phase_of(decisions, "default/late") is PodGroupPhase.PENDING  # not yet: proportion's refusal stands
    decisions = schedule(one_gpu_cluster(HOUR, late), SLA_FIRST)
    assert phase_of(decisions, "default/late") is PodGroupPhase.INQUEUE  # Permit: proportion is not asked
    decisions = schedule(one_gpu_cluster(HOUR, late), SLA_WITH_GANG)
    assert phase_of(decisions, "default/late") is PodGroupPhase.PENDING  # its own tier's Reject still wins


def test_the_global_waiting_time_applies_to_jobs_without_their_own() -> None:
    config = conf("enqueue, allocate", "priority, sla", "gang, predicates, proportion", sla={"sla-waiting-time": "2h"})
    own, other = waiting("own", created=0.0, wait=HOUR), waiting("other", created=0.0, wait=None)
    decisions = schedule(one_gpu_cluster(HOUR, own, other), config)
    assert phase_of(decisions, "default/own") is PodGroupPhase.INQUEUE
    assert phase_of(decisions, "default/other") is PodGroupPhase.PENDING
    decisions = schedule(one_gpu_cluster(2 * HOUR, own, other), config)
    assert phase_of(decisions, "default/other") is PodGroupPhase.INQUEUE


def test_a_permitted_job_is_judged_even_after_an_earlier_job_s_refusal_covers_every_later_one() -> None:
    # "first" goes first (priority) and is refused; enqueue's probe then refuses the least any later job asks,
    # which covered "late" too before the permit
    first = waiting("first", created=0.0, wait=None, priority=10)
    late = waiting("late", created=0.0, wait=HOUR)
    decisions = schedule(one_gpu_cluster(HOUR, first, late), SLA_FIRST)
    assert phase_of(decisions, "default/first") is PodGroupPhase.PENDING
    assert phase_of(decisions, "default/late") is PodGroupPhase.INQUEUE


def test_jobs_go_in_deadline_order_jobs_with_a_waiting_time_first() -> None:
    config = conf("allocate", "sla", "predicates")
    cluster = [node("n", cpu=8, gpus=1)]
    none = waiting("a-none", created=0.0, wait=None, queue_name="default")  # the oldest, but no SLA
    slow = waiting("b-slow", created=10.0, wait=HOUR, queue_name="default")
    fast = waiting("c-fast", created=20.0, wait=60.0, queue_name="default")  # the earliest deadline (80 s)
    snapshot = Snapshot(
        cluster, [], [j.group for j in (none, slow, fast)], [p for j in (none, slow, fast) for p in j.pods]
    )
    assert bound(schedule(snapshot, config)) == {"default/c-fast-0": "n"}
    snapshot.groups[2] = dataclasses.replace(snapshot.groups[2], waiting_time=None)
    assert bound(schedule(snapshot, config)) == {"default/b-slow-0": "n"}
    snapshot.groups[1] = dataclasses.replace(snapshot.groups[1], waiting_time=None)
    assert bound(schedule(snapshot, config)) == {"default/a-none-0": "n"}  # no SLA anywhere: creation time


def test_a_gang_past_its_waiting_time_keeps_the_room_preempt_freed_for_part_of_it() -> None:
    """Volcano's JobPipelined: sla's Permit in an earlier tier than gang keeps the statement of a gang that
    got only part of its pods pipelined (the victims go); in gang's tier, gang's Reject discards it."""

    def cluster(now: float) -> Snapshot:
        low = job("low", "default", 1, {"nvidia.com/gpu": 1}, phase=PodGroupPhase.RUNNING, running_on=["n"])
        gang = job("gang", "default", 2, {"nvidia.com/gpu": 1}, priority=100, created=0.0)
        gang.group.waiting_time = HOUR
        return Snapshot([node("n", cpu=8, gpus=1)], [], [low.group, gang.group], [*low.pods, *gang.pods], now=now)

    assert evicted(schedule(cluster(HOUR), SLA_FIRST)) == ["default/low-0"]
    assert evicted(schedule(cluster(HOUR), SLA_WITH_GANG)) == []
    assert evicted(schedule(cluster(HOUR - 1), SLA_FIRST)) == []  # not yet past its waiting time


def test_votes_combine_tier_by_tier_as_volcano_s_session_does() -> None:
    late = waiting("late", created=0.0, wait=HOUR)
    gang = job("gang", "q", 2, {"cpu": 1}, created=0.0)
    gang.group.waiting_time = HOUR
    snapshot = one_gpu_cluster(HOUR, late, gang)
    for config, pipelined in ((SLA_FIRST, True), (SLA_WITH_GANG, False)):
        ssn = Session(snapshot, config, default_registry())
        by_key = {j.key: j for j in ssn.jobs}
        assert ssn.job_pipelined(by_key["default/gang"]) is pipelined  # gang alone says no: 0/2 pods placed
        assert ssn.enqueue_permitted(by_key["default/late"])
        assert (ssn.job_not_enqueueable_reason(by_key["default/late"]) is None) is pipelined


def test_an_online_scheduler_admits_a_job_once_its_waiting_time_is_over_with_nothing_else_changed() -> None:
    online = OnlineScheduler([node("n", cpu=8, gpus=1)], [queue("q", capability={"nvidia.com/gpu": 1})], SLA_FIRST)
    running = job("running", "q", 1, {"cpu": 1, "nvidia.com/gpu": 1}, phase=PodGroupPhase.RUNNING, running_on=["n"])
    late = waiting("late", created=0.0, wait=HOUR)
    online.add_group(running.group, running.pods)
    online.add_group(late.group, late.pods)
    assert phase_of(online.cycle(HOUR / 2), "default/late") is PodGroupPhase.PENDING
    assert phase_of(online.cycle(HOUR), "default/late") is PodGroupPhase.INQUEUE


def test_tidegate_schedule_measures_waiting_times_up_to_now(tmp_path: Path) -> None:
    manifests = tmp_path / "cluster.yaml"
    manifests.write_text(
        """
apiVersion: tidegate.io/v1alpha1
kind: SchedulerConfiguration
metadata: {name: c}
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: sla}]
- plugins: [{name: gang}, {name: predicates}, {name: proportion}]
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 8Gi, nvidia.com/gpu: "1"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: q}
spec: {capability: {nvidia.com/gpu: "1"}}
---
apiVersion: v1
kind: Pod
metadata: {name: running, annotations: {scheduling.volcano.sh/queue-name: q}}
spec: {nodeName: n1, containers: [{name: c, resources: {requests: {cpu: "1", nvidia.com/gpu: "1"}}}]}
status: {phase: Running}
---
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: urgent, creationTimestamp: "2026-01-01T00:00:00Z", annotations: {sla-waiting-time: 30m}}
spec:
  queue: q
  tasks:
  - name: w
    replicas: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1", nvidia.com/gpu: "1"}}}]}}
"""
    )

    def phase(now: str) -> str:
        result = CliRunner().invoke(app, ["schedule", "-f", str(manifests), "-o", "json", "--now", now])
        assert result.exit_code == 0, result.output
        groups = {g["podgroup"]: g["phase"] for g in json.loads(result.stdout)["podgroups"]}
        return str(groups["default/urgent"])

    assert phase("2026-01-01T00:29:59Z") == "Pending"
    assert phase("2026-01-01T00:30:00Z") == "Inqueue"


def test_the_default_configuration_is_unchanged() -> None:
    assert all(option.name != "sla" for tier in SchedulerConfiguration().tiers for option in tier.plugins)


def test_decisions_say_when_a_waiting_job_s_deadline_comes_so_event_driven_callers_run_a_cycle_then() -> None:
    soon, later = waiting("soon", created=0.0, wait=HOUR), waiting("later", created=0.0, wait=2 * HOUR)
    assert schedule(one_gpu_cluster(10.0, soon, later), SLA_FIRST).wake_at == HOUR
    assert schedule(one_gpu_cluster(HOUR, soon, later), SLA_FIRST).wake_at == 2 * HOUR
    assert schedule(one_gpu_cluster(2 * HOUR, soon, later), SLA_FIRST).wake_at == math.inf
    without_sla = conf("enqueue, allocate", "gang, proportion")
    assert schedule(one_gpu_cluster(10.0, soon, later), without_sla).wake_at == math.inf


SERVED = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "16", memory: 128Gi, nvidia.com/gpu: "8", pods: "110"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: dev}
spec: {weight: 1}
---
apiVersion: tidegate.io/v1alpha1
kind: SchedulerConfiguration
metadata: {name: sla}
actions: "enqueue, allocate"
tiers:
- plugins: [{name: priority}, {name: sla}]
- plugins: [{name: gang}, {name: predicates}, {name: proportion}]
"""


def served_job(name: str, gpus: int, replicas: int = 1, wait: str = "") -> str:
    annotations = f"annotations: {{sla-waiting-time: {wait}}}" if wait else ""
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}, {annotations}}}
spec:
  queue: dev
  minAvailable: {replicas}
  tasks:
  - name: w
    replicas: {replicas}
    template: {{spec: {{containers: [{{name: c, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}}}}}]}}}}
"""


@pytest.mark.parametrize(
    ("first_wait", "later", "second_wait", "runs"),
    [
        ("10m", 10.0, "1m", "second"),  # deadlines 600 and 70: the later submission goes first
        ("100s", 50.0, "60s", "first"),  # deadlines 100 and 110 (with both created at 0, 100 and 60)
    ],
)
def test_tidegate_serve_measures_waiting_times_from_each_submission(
    first_wait: str, later: float, second_wait: str, runs: str
) -> None:
    """Two jobs with waiting times submitted while the node is full; the one with the earlier deadline, counted
    from its submission, gets the room that frees first."""
    from tidegate.clock import SimClock
    from tidegate.live.control_plane import ControlPlane
    from tidegate.live.jobs import JobPhase
    from tidegate.model.objects import PodPhase

    clock = SimClock()
    plane = ControlPlane.from_manifests(load_text(SERVED, "cluster.yaml"), clock)
    plane.submit(served_job("full", 4, replicas=2))
    plane.cycle()
    plane.submit(served_job("first", 4, wait=first_wait))
    clock.call_at(later, lambda: None)
    clock.run()
    plane.submit(served_job("second", 4, wait=second_wait))
    plane.cycle()
    plane.report_pod("default/full-w-0", PodPhase.SUCCEEDED)
    plane.cycle()
    waits = "first" if runs == "second" else "second"
    assert plane.jobs[f"default/{runs}"].phase is JobPhase.RUNNING
    assert plane.jobs[f"default/{waits}"].phase is JobPhase.PENDING


def test_the_simulator_runs_a_cycle_when_a_waiting_job_s_deadline_comes(tmp_path: Path) -> None:
    """The engine's cycles follow events; b's deadline (its arrival plus the plugin's 300 s) is none, yet a cycle
    runs then and admits it (the queue at capability refused it before)."""
    from sim_builders import write_sim

    from tidegate.sim.loader import load_simulation
    from tidegate.sim.run import build_simulation, online_core

    # job_id,user,vc,gpu_num,cpu_num,node_num,state,submit,start,end,duration,queue: a holds the 8 GPUs 1000 s
    rows = "a,u,vc1,8,8,1,COMPLETED,0,0,1000,1000,0\nb,u,vc1,8,8,1,COMPLETED,0,0,100,100,0\n"
    inp = load_simulation([str(write_sim(tmp_path / "sim", rows, ["idc-only"]))])
    inp.config = conf(
        "enqueue, allocate, backfill",
        "priority, sla",
        "gang, drf, predicates, capacity, nodeorder, binpack",
        sla={"sla-waiting-time": "300s"},
    )
    cycles: dict[float, PodGroupPhase] = {}

    def recording(inp: object, queues: list[object]) -> OnlineScheduler:
        core = online_core(inp, queues)  # type: ignore[arg-type]
        assert isinstance(core, OnlineScheduler)
        cycle = core.cycle

        def cycle_at(now: float) -> object:
            decisions = cycle(now)
            cycles[now] = core.jobs["default/b"].phase if "default/b" in core.jobs else PodGroupPhase.PENDING
            return decisions

        core.cycle = cycle_at  # type: ignore[method-assign,assignment]
        return core

    simulation, _ = build_simulation(inp, "s", "idc-only", core_factory=recording)  # type: ignore[arg-type]
    simulation.run()
    assert cycles[300.0] is PodGroupPhase.INQUEUE
    assert all(phase is PodGroupPhase.PENDING for when, phase in cycles.items() if when < 300.0)
