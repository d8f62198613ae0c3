"""The simulation engine on hand-checkable scenarios: overflow, pinning, HPA-driven cloud nodes, cost."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import random
import signal
from pathlib import Path

import pytest
import scheduler_builders as sb
from sim_builders import QUEUES, write_elastic_sim, write_reclaim_sim, write_sim
from sim_builders import write_helios_sim as sb_write_helios_sim

from tidegate.clock import SimClock, WallClock
from tidegate.model.errors import ManifestErrors
from tidegate.model.objects import Queue
from tidegate.model.resources import Resources
from tidegate.scheduler.online import OnlineScheduler
from tidegate.scheduler.scheduler import schedule
from tidegate.scheduler.snapshot import Snapshot
from tidegate.sim.core import SnapshotCore
from tidegate.sim.engine import Simulation, static_quotas
from tidegate.sim.loader import SimulationInput, load_simulation
from tidegate.sim.run import RunResult, build_simulation, online_core, run_simulation
from tidegate.sim.workload import SimJob, group_of_pod, to_group
from tidegate.traces.records import TraceJob

# Two 8-GPU jobs arrive at t=0 on a one-node (8 GPU) IDC whose dev queue is capped at 8 GPUs:
# a runs 1000 s, b runs 100 s. Columns: job_id,user,vc,gpu_num,cpu_num,node_num,state,submit,start,end,duration,queue
TWO_JOBS = "a,u,vc1,8,8,1,COMPLETED,0,0,1000,1000,0\nb,u,vc1,8,8,1,COMPLETED,0,0,100,100,0\n"


def run(tmp_path: Path, scenarios: list[str], jobs: str = TWO_JOBS, pinned: float = 0.0) -> dict[str, RunResult]:
    folder = write_sim(tmp_path / "sim", jobs, scenarios, pinned)
    return {r.name: r for r in run_simulation(load_simulation([str(folder)]))}


def test_without_burst_the_second_job_waits_for_the_first(tmp_path: Path) -> None:
    result = run(tmp_path, ["idc-only"])["idc-only"]
    jobs = {j.name: j for j in result.simulation.jobs}
    assert (jobs["a"].started, jobs["a"].finished) == (0.0, 1000.0)
    assert (jobs["b"].started, jobs["b"].finished) == (1000.0, 1100.0)
    assert result.summary["cloud_cost"] == 0
    # 8 GPUs busy for 1100 s of an 1100 s run
    assert result.summary["local_gpu_utilization"] == 1.0


def test_a_scale_up_stabilization_window_holds_the_first_node_back_as_kubernetes_does(tmp_path: Path) -> None:
    """With scaleUp.stabilizationWindowSeconds 300 the HPA scales up only once every recommendation of the
    last 300 s asks for it: its recommendation of 0 at t=0, while nothing waited yet, holds the node back
    until t=300 (ready at 360). A sync of an idle pool at 0 was left out, as if it changed nothing, so the
    node came at 15 s."""
    folder = write_sim(tmp_path / "sim", TWO_JOBS, ["burst"])
    hpa = (folder / "base.yaml").read_text()
    (folder / "base.yaml").write_text(
        hpa.replace("    scaleDown:\n", "    scaleUp: {stabilizationWindowSeconds: 300}\n    scaleDown:\n")
    )
    (result,) = run_simulation(load_simulation([str(folder)]))
    b = next(job for job in result.simulation.jobs if job.name == "b")
    assert b.queue == "burst-cloud" and b.started == 360.0


def test_burst_overflows_at_capability_and_the_hpa_buys_one_node(tmp_path: Path) -> None:
    result = run(tmp_path, ["burst"])["burst"]
    jobs = {j.name: j for j in result.simulation.jobs}
    # b's queue is at capability at t=0, so it overflows to burst-cloud at once.
    assert jobs["b"].queue == "burst-cloud" and jobs["a"].queue == "dev"
    # HPA ticks every 15 s; at t=15 b has pended 15 s: desired = ceil(15 / 300) = 1 node (from 0,
    # allowed by the default scale-up policies). The node is ready after its 60 s provisioning delay.
    assert jobs["b"].started == 75.0 and jobs["b"].finished == 175.0
    billed = result.simulation.meter["billed_nodes/cloud-a100"]
    # The last recommendation of 1 was at t=60 (b still pending); the 600 s scale-down window
    # releases it at t=660, when 10% of 1 node truncates to 0.
    assert billed.times == [15.0, 660.0] and billed.values == [1.0, 0.0]
    summary = result.summary
    assert summary["cloud_cost"] == pytest.approx((660 - 15) * 36 / 3600)  # 6.45
    assert summary["cloud_gpu_hours"] == pytest.approx(round((660 - 15) * 8 / 3600, 1))
    # The same peak (1 node) reserved for the run's 1000 s at 7200 a month of 30 days.
    assert summary["reserved_peak_cost"] == pytest.approx(round(7200 * 1000 / (30 * 86400), 2))
    assert summary["jobs_overflowed"] == 1 and summary["restarts"] == 0


def test_pinned_jobs_never_burst(tmp_path: Path) -> None:
    result = run(tmp_path, ["burst"], pinned=1.0)["burst"]
    jobs = {j.name: j for j in result.simulation.jobs}
    assert all(j.pinned and j.queue == "dev" for j in jobs.values())
    assert jobs["b"].started == 1000.0
    assert result.summary["cloud_cost"] == 0 and result.summary["jobs_overflowed"] == 0


def test_a_job_overflows_after_waiting_the_configured_time(tmp_path: Path) -> None:
    # A burst-cloud job (vc2) holds half the IDC node; dev's 6-GPU job fits its queue's quota
    # (0 + 6 <= 8) but not the node: submitted at t=10, it overflows only at 10 + 300 s.
    jobs = "a,u,vc2,4,4,1,COMPLETED,0,0,5000,5000,0\nb,u,vc1,6,6,1,COMPLETED,10,10,110,100,0\n"
    result = run(tmp_path, ["burst"], jobs=jobs)["burst"]
    events = [text for _, text in result.simulation.events]
    overflow = next(t for t, text in result.simulation.events if "overflowed" in text)
    assert overflow == 310.0
    assert any("cloud-a100: 0 -> 1" in text for text in events)


def test_static_quotas_cap_capability_at_deserved() -> None:
    queue = Queue(
        name="dev",
        capability=Resources.parse({"nvidia.com/gpu": 768, "cpu": 100}, "c"),
        deserved=Resources.parse({"nvidia.com/gpu": 384}, "d"),
    )
    (static,) = static_quotas([queue])
    assert static.capability == Resources.parse({"nvidia.com/gpu": 384, "cpu": 100}, "c")


def test_the_online_core_decides_exactly_as_a_fresh_snapshot_each_cycle(tmp_path: Path) -> None:
    # 40 gangs of 1..8 GPUs over a day on the one-node IDC with bursting: both cores must give the
    # same start, finish and queue for every job, and the same cloud bill.
    rows = [
        f"j{i},u,vc{1 + i % 2},{(1, 2, 4, 8)[i % 4]},4,1,COMPLETED,{i * 700},{i * 700},0,{600 + (i * 937) % 5000},0"
        for i in range(40)
    ]
    folder = write_sim(tmp_path / "sim", "\n".join(rows) + "\n", ["idc-only", "burst"])
    inp = load_simulation([str(folder)])
    online = run_simulation(inp)
    reference = run_simulation(inp, core_factory=lambda inp, queues: SnapshotCore(queues, inp.config))
    for a, b in zip(online, reference, strict=True):
        assert [(j.name, j.queue, j.started, j.finished) for j in a.simulation.jobs] == [
            (j.name, j.queue, j.started, j.finished) for j in b.simulation.jobs
        ]
        assert a.summary == b.summary


def test_the_same_controllers_decide_the_same_on_a_sped_up_wall_clock(tmp_path: Path) -> None:
    # The engine's controllers (job lifecycle, cycles, the HPA, cloud nodes) only use the Clock protocol:
    # on wall time sped up 200,000 times (the day in about a tenth of a second) they make the same
    # decisions as on simulated time.
    rows = [
        f"j{i},u,vc{1 + i % 2},{(1, 2, 4, 8)[i % 4]},4,1,COMPLETED,{i * 700},{i * 700},0,{600 + (i * 937) % 5000},0"
        for i in range(40)
    ]
    inp = load_simulation([str(write_sim(tmp_path / "sim", "\n".join(rows) + "\n", ["burst"]))])
    simulated, _ = build_simulation(inp, "s", "burst")
    live, _ = build_simulation(inp, "s", "burst", clock=WallClock(speed=200_000.0))
    for sim in (simulated, live):
        sim.run()
    assert [(j.name, j.queue, j.started, j.finished) for j in live.jobs] == [
        (j.name, j.queue, j.started, j.finished) for j in simulated.jobs
    ]
    assert live.events == simulated.events and live.events  # the HPA's resizes, among others
    assert live.end == simulated.end


def test_the_online_core_reclaims_exactly_as_a_fresh_snapshot_each_cycle(tmp_path: Path) -> None:
    # Queues lend idle quota and reclaim it back (pods are pipelined while victims leave): the
    # long-lived session must not keep pipelined pods across cycles, which a fresh snapshot never has.
    inp = load_simulation([str(write_elastic_sim(tmp_path / "sim"))])
    online = run_simulation(inp)
    reference = run_simulation(inp, core_factory=lambda inp, queues: SnapshotCore(queues, inp.config))
    elastic = online[1]
    assert elastic.summary["restarts"] > 0  # reclaim did evict
    assert elastic.summary["jobs_unfinished"] == 0
    for a, b in zip(online, reference, strict=True):
        assert [(j.name, j.queue, j.started, j.finished, j.restarts) for j in a.simulation.jobs] == [
            (j.name, j.queue, j.started, j.finished, j.restarts) for j in b.simulation.jobs
        ]
        assert a.summary == b.summary


def test_the_simulator_s_core_explains_no_nodes_and_decides_as_one_that_does(tmp_path: Path) -> None:
    # The run reads waiting jobs' refusal codes only (overflow's AtCapability): its core does not count nodes
    # for reasons no one reads, and places, evicts, overflows and bills as a core that does.
    rows = [
        f"j{i},u,vc{1 + i % 2},{(1, 2, 4, 8)[i % 4]},4,1,COMPLETED,{i * 300},{i * 300},0,{600 + (i * 937) % 5000},0"
        for i in range(40)
    ]
    bursting = write_sim(tmp_path / "burst", "\n".join(rows) + "\n", ["idc-only", "burst"])

    def explaining(inp: SimulationInput, queues: list[Queue]) -> OnlineScheduler:
        core = online_core(inp, queues)
        assert isinstance(core, OnlineScheduler) and not core.ssn.explain_nodes
        core.ssn.explain_nodes = True
        return core

    for folder in (write_elastic_sim(tmp_path / "elastic"), bursting):
        inp = load_simulation([str(folder)])
        quiet, told = run_simulation(inp), run_simulation(inp, core_factory=explaining)
        for a, b in zip(quiet, told, strict=True):
            assert a.summary == b.summary
            assert a.simulation.events == b.simulation.events
        assert sum(r.summary["restarts"] + r.summary["jobs_overflowed"] for r in quiet) > 0


def test_scenarios_in_parallel_processes_give_the_same_figures(tmp_path: Path) -> None:
    inp = load_simulation([str(write_elastic_sim(tmp_path / "sim"))])
    parallel = run_simulation(inp, workers=2)
    sequential = run_simulation(inp, workers=1)
    assert [r.summary for r in parallel] == [r.summary for r in sequential]
    assert [r.simulation.events for r in parallel] == [r.simulation.events for r in sequential]


# dev's a (8 GPUs, 5,000 s) borrows the whole node from t=0; prod's b (4 GPUs, 500 s) arrives at
# t=1,000 and reclaims prod's deserved 4 GPUs: a is evicted at 1,000 and b binds at the next cycle
# (1,001), when a's pods are gone; a waits for b to finish (1,501) and starts again.
RECLAIMED = "a,u,vc1,8,8,1,COMPLETED,0,0,5000,5000,0\nb,u,vc2,4,4,1,COMPLETED,1000,1000,1500,500,0\n"


def test_the_placements_digest_hashes_each_start_and_eviction_in_order(tmp_path: Path) -> None:
    # The reclaim story above: a starts at 0, is evicted at 1,000, b starts at 1,001, a again at 1,501 (its
    # second attempt's group). The digest is of these lines (time, group, nodes; or evicted), in this order.
    (result,) = run_simulation(load_simulation([str(write_reclaim_sim(tmp_path / "sim", RECLAIMED, 600.0))]))
    lines = [
        "0.0 default/a idc-a100-0\n",
        "1000.0 default/a evicted\n",
        "1001.0 default/b idc-a100-0\n",
        "1501.0 default/a-r1 idc-a100-0\n",
    ]
    digest = hashlib.blake2b(digest_size=8)
    for line in lines:
        digest.update(line.encode())
    assert result.summary["placements_digest"] == digest.hexdigest()


@pytest.mark.parametrize(
    ("every", "lost_gpu_s", "a_finishes"),
    [
        (600.0, (1000 - 600) * 8, 1501 + 5000 - 600),  # resumes from the checkpoint at 600 s
        (0.0, 1000 * 8, 1501 + 5000),  # no checkpoints: starts again from zero
        (1000.0, 0, 1501 + 5000 - 1000),  # a checkpoint completed exactly at the eviction
    ],
)
def test_a_reclaimed_job_resumes_from_its_last_checkpoint(
    tmp_path: Path, every: float, lost_gpu_s: float, a_finishes: float
) -> None:
    (result,) = run_simulation(load_simulation([str(write_reclaim_sim(tmp_path / "sim", RECLAIMED, every))]))
    jobs = {j.name: j for j in result.simulation.jobs}
    assert (jobs["a"].started, jobs["a"].restarts, jobs["a"].finished) == (0.0, 1, a_finishes)
    assert (jobs["b"].started, jobs["b"].finished) == (1001.0, 1501.0)
    assert result.simulation.meter["lost_gpu_seconds"].value == lost_gpu_s
    assert result.simulation.events[0] == (1000.0, "a: restarted (evicted: reclaimed by queue prod for default/b)")
    # a waited 0 s before its first start and 501 s after the eviction; b waited 1 s
    end = result.simulation.end
    assert (jobs["a"].wait_s(end), jobs["b"].wait_s(end)) == (501.0, 1.0)
    assert result.summary["queued_gpu_hours"] == round((501 * 8 + 1 * 4) / 3600, 1)


def test_a_job_still_waiting_at_the_horizon_counts_its_wait_so_far(tmp_path: Path) -> None:
    # b waits for a until 1,000 s, but the run stops at 600 s: b's wait is at least 600 s.
    inp = load_simulation([str(write_sim(tmp_path / "sim", TWO_JOBS, ["idc-only"]))])
    inp.simulations["s"] = inp.simulations["s"].model_copy(update={"until_seconds": 600.0})
    (result,) = run_simulation(inp)
    b = next(j for j in result.simulation.jobs if j.name == "b")
    assert (b.started, b.wait_s(result.simulation.end)) == (None, 600.0)
    assert (result.summary["wait_p95_s"], result.summary["jobs_unfinished"]) == (570.0, 2)
    assert result.summary["queued_gpu_hours"] == round(600 * 8 / 3600, 1)


def test_a_trace_or_tide_file_that_does_not_exist_is_named_with_its_manifest_and_field(tmp_path: Path) -> None:
    folder = write_sim(tmp_path / "sim", "", ["idc-only"])
    (folder / "jobs.csv").unlink()
    workload = (folder / "workload.yaml").read_text()
    (folder / "workload.yaml").write_text(workload + "  synthetic: {tideFrom: [nowhere.csv]}\n")
    with pytest.raises(ManifestErrors) as info:
        load_simulation([str(folder)])
    errors = {(e.name, e.field): e.message for e in info.value.errors}
    assert errors[("w", "spec.path")] == f"file {folder / 'jobs.csv'} does not exist"
    assert ("w", "spec.synthetic.tideFrom[0]") not in errors  # a helios workload reads no tide
    synthetic = workload.replace("source: helios", "source: synthetic").replace("path: jobs.csv", "path: ''")
    (folder / "workload.yaml").write_text(synthetic + "  synthetic: {tideFrom: [nowhere.csv]}\n")
    with pytest.raises(ManifestErrors) as info:
        load_simulation([str(folder)])
    (error,) = info.value.errors
    assert (error.name, error.field) == ("w", "spec.synthetic.tideFrom[0]")
    assert error.message == f"file {folder / 'nowhere.csv'} does not exist"


def scenario(name: str, spec: str) -> str:
    return f"---\napiVersion: tidegate.io/v1alpha1\nkind: Scenario\nmetadata: {{name: {name}}}\nspec: {spec}\n"


def test_a_scenario_based_on_another_starts_from_its_spec(tmp_path: Path) -> None:
    folder = write_sim(tmp_path / "sim", TWO_JOBS, ["idc-only"])
    (folder / "more.yaml").write_text(
        scenario("c", "{basedOn: b, interruptionRatePerHour: 0.5}")
        + scenario("b", "{basedOn: burst, description: b's, interruptions: false, burst: {enabled: false}}")
    )
    sim = load_simulation([str(folder)])
    burst, b, c = sim.scenarios["burst"], sim.scenarios["b"], sim.scenarios["c"]
    assert b == burst.model_copy(update={"description": "b's", "interruptions": False, "burst": b.burst})
    assert not b.burst.enabled and burst.burst.enabled  # a key replaces the base's whole value
    assert c == b.model_copy(update={"description": "", "interruption_rate_per_hour": 0.5})  # a chain; no description


def test_an_unknown_or_circular_base_is_an_error_on_spec_based_on(tmp_path: Path) -> None:
    folder = write_sim(tmp_path / "sim", TWO_JOBS, ["idc-only"])
    (folder / "more.yaml").write_text(
        scenario("x", "{basedOn: nowhere}") + scenario("y", "{basedOn: z}") + scenario("z", "{basedOn: y}")
    )
    with pytest.raises(ManifestErrors) as info:
        load_simulation([str(folder)])
    errors = {(e.kind, e.name, e.field): e.message for e in info.value.errors}
    assert errors == {
        ("Scenario", "x", "spec.basedOn"): "'nowhere' is not a Scenario",
        ("Scenario", "z", "spec.basedOn"): "'y' is based on 'z': a cycle",
    }


def test_a_pool_too_large_to_hold_in_memory_is_an_error_on_its_field(tmp_path: Path) -> None:
    folder = write_sim(tmp_path / "sim", TWO_JOBS, ["idc-only"])
    (pools,) = [path for path in folder.iterdir() if "kind: NodePool" in path.read_text()]
    text = pools.read_text()
    pools.write_text(text.replace("count: 1,", "count: 1000000000,", 1).replace("count: 8", "count: 4096", 1))
    with pytest.raises(ManifestErrors) as info:
        load_simulation([str(folder)])
    fields = {(e.kind, e.field) for e in info.value.errors}
    assert ("NodePool", "spec.count") in fields and ("NodePool", "spec.gpu.count") in fields


@pytest.mark.parametrize(
    ("synthetic", "field", "message"),
    [
        (
            "gpuCounts: {1099511627776: 1}",
            "spec.synthetic.gpuCounts.1099511627776.[key]",
            "less than or equal to 80000",
        ),
        ("gpuCounts: {1180591620717411303424: 1}", "spec.synthetic.gpuCounts.1180591620717411303424.[key]", "80000"),
        ("gpuCounts: {0: 1}", "spec.synthetic.gpuCounts.0.[key]", "greater than or equal to 1"),
        ("gpuCounts: {1: 0}", "spec.synthetic.gpuCounts", "at least one GPU count of weight > 0"),
        ("{seed: -1}", "spec.synthetic.seed", "greater than or equal to 0"),
        ("{durationMaxSeconds: 0.5}", "spec.synthetic.durationMaxSeconds", "greater than or equal to 1"),
        ("{jobsPerDay: 1000000000}", "spec.synthetic.jobsPerDay", "is 2,000,000,000 jobs; at most 10,000,000"),
        ("{days: 1e9}", "spec.synthetic.days", "less than or equal to 36525"),
    ],
)
def test_bad_synthetic_settings_are_errors_on_their_field(
    tmp_path: Path, synthetic: str, field: str, message: str
) -> None:
    folder = write_elastic_sim(tmp_path / "sim")
    text = (folder / "all.yaml").read_text()
    if synthetic.startswith("{"):  # a key of its own, on top of the example's
        key, value = synthetic.strip("{}").split(": ")
        text = text.replace("    seed: 7\n", "    seed: 7\n" if key == "seed" else f"    seed: 7\n    {key}: {value}\n")
        text = text.replace("    seed: 7\n", f"    seed: {value}\n") if key == "seed" else text
        text = text.replace("    jobsPerDay: 120\n", "") if key == "jobsPerDay" else text
        text = text.replace("    days: 2\n", "") if key == "days" else text
    else:
        text = text.replace("    gpuCounts: {1: 0.3, 2: 0.2, 4: 0.2, 8: 0.2, 16: 0.1}", "    " + synthetic)
    (folder / "all.yaml").write_text(text)
    with pytest.raises(ManifestErrors) as info:
        load_simulation([str(folder)])
    errors = [(e.field, e.message) for e in info.value.errors if (e.kind, e.name) == ("Workload", "w")]
    assert len(errors) == 1, errors
    assert errors[0][0] == field and message in errors[0][1]
    assert str(info.value.errors[0].source.file).endswith("all.yaml")


def test_a_run_whose_next_event_is_beyond_float_precision_still_ends(tmp_path: Path) -> None:
    """Near 1e308, now + 6 h == now: stepping 6 h at a time never moved the clock (the readers now refuse
    such times, but the engine must not hang on whatever reaches it)."""
    inp = load_simulation([str(write_sim(tmp_path / "sim", TWO_JOBS, ["idc-only"]))])
    sim, _ = build_simulation(inp, "s", "idc-only")
    first = sim.jobs[0]
    first.record = dataclasses.replace(first.record, duration_s=1e308)

    def timeout(*_: object) -> None:
        raise TimeoutError("the run did not end")

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(30)
    try:
        sim.run()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    outcome = sim.outcome()
    assert [job.finished for job in outcome.jobs] == [1e308, 1e308]
    assert outcome.end == 1e308 and not outcome.warnings


OPENB_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
)


def _openb_sim(tmp_path: Path, pods: str) -> Path:
    folder = write_sim(tmp_path / "sim", TWO_JOBS, ["idc-only"])
    (folder / "pods.csv").write_text(OPENB_HEADER + pods)
    workload = (folder / "workload.yaml").read_text()
    (folder / "workload.yaml").write_text(
        workload.replace("source: helios", "source: openb").replace("jobs.csv", "pods.csv")
    )
    return folder


def test_openb_pods_without_both_times_are_counted_in_the_run_warnings(tmp_path: Path) -> None:
    folder = _openb_sim(tmp_path, "p0,1000,1024,1,1000,,LS,Running,0,100,0\np1,1000,1024,1,1000,,LS,Running,5,,\n")
    (result,) = run_simulation(load_simulation([str(folder)]))
    assert [job.name for job in result.simulation.jobs] == ["p0"]
    assert result.summary["warnings"] == [
        "pods.csv: 1 of 2 pods skipped: without both creation_time and deletion_time a pod cannot be replayed"
    ]


@pytest.mark.parametrize(
    ("pods", "why"),
    [
        ("", ""),
        ("p1,1000,1024,1,1000,,LS,Running,nan,,\n", r" \(pods.csv: 1 of 1 pods skipped"),
    ],
)
def test_a_workload_with_no_job_is_an_error_naming_its_file(tmp_path: Path, pods: str, why: str) -> None:
    folder = _openb_sim(tmp_path, pods)
    with pytest.raises(ValueError, match=r"pods.csv: Workload w: no job to replay" + why):
        run_simulation(load_simulation([str(folder)]), workers=1)


def test_finished_jobs_leave_no_cyclic_garbage(tmp_path: Path) -> None:
    """A run frees every finished job by reference counting: the cyclic collector would otherwise walk
    thousands of dead jobs (their views, pods and timers) in a long replay."""
    jobs = "".join(f"j{i},u,vc1,{1 + i % 4},8,1,COMPLETED,{i * 10},0,0,{100 + i * 7},0\n" for i in range(40))
    folder = write_sim(tmp_path / "sim", jobs, ["idc-only"])
    sim, _ = build_simulation(load_simulation([str(folder)]), "s", "idc-only")
    while gc.collect():  # earlier garbage (another test's plots, say) can take more than one pass to free
        pass
    gc.disable()
    try:
        sim.run()
        assert sim.finished == 40
        assert gc.get_freeze_count() == 0  # what the run froze is back under the collector
        assert gc.collect() == 0
    finally:
        gc.enable()


def test_idle_cycles_after_departures_are_left_out_with_the_same_decisions(tmp_path: Path) -> None:
    # A job asking more CPUs than the one node has waits forever (hopeless): most departures find nothing
    # else waiting, and the cycles they ask for are left out of the online run's clock (two are brought back
    # by an arrival before their time). Starts, finishes and the run's end stay those of a fresh snapshot
    # every cycle, which leaves none out.
    rows = ["big,u,vc1,1,4000,1,COMPLETED,5,5,0,100,0"] + [
        f"j{i},u,vc1,{(1, 2, 4)[i % 3]},4,1,COMPLETED,{i * 37},{i * 37},0,{60 + (i * 97) % 50},0" for i in range(40)
    ]
    folder = write_sim(tmp_path / "sim", "\n".join(rows) + "\n", ["idc-only"])
    inp = load_simulation([str(folder)])
    inp.simulations["s"] = inp.simulations["s"].model_copy(update={"scheduling_period_seconds": 1.5})
    online, _ = build_simulation(inp, "s", "idc-only")
    reference, _ = build_simulation(
        inp, "s", "idc-only", core_factory=lambda inp, queues: SnapshotCore(queues, inp.config)
    )
    for sim in (online, reference):
        sim.run()
    assert [(j.name, j.started, j.finished) for j in online.jobs] == [
        (j.name, j.started, j.finished) for j in reference.jobs
    ]
    assert [j.name for j in online.jobs if j.started is None] == ["big"]
    assert online.end == reference.end
    assert online.clock.events_run < reference.clock.events_run - 30  # the idle cycles were left out


def test_a_fractional_scheduling_period_never_asks_for_a_cycle_in_the_past(tmp_path: Path) -> None:
    # Arrivals at whole seconds on a 0.7 s grid: ceil(63 / 0.7) * 0.7 is 62.99999999999999 in floats.
    rows = [f"j{i},u,vc1,1,4,1,COMPLETED,{i * 9},{i * 9},0,{30 + i},0" for i in range(20)]
    folder = write_sim(tmp_path / "sim", "\n".join(rows) + "\n", ["idc-only"])
    inp = load_simulation([str(folder)])
    inp.simulations["s"] = inp.simulations["s"].model_copy(update={"scheduling_period_seconds": 0.7})
    sim, _ = build_simulation(inp, "s", "idc-only")
    sim.run()
    assert all(job.started is not None and job.started >= job.submitted for job in sim.jobs)
    assert len([job for job in sim.jobs if job.finished is not None]) == 20


def test_a_restarted_job_counts_its_wait_from_the_restart(tmp_path: Path) -> None:
    # a (dev, 8 GPUs) runs from t=0 and is evicted at t=1,000; it is pending again from then, so the HPA's
    # pending-duration metric reads 0 s for it at that instant (not the 1,000 s since it was submitted,
    # which it spent running), and its overflow deadline is 1,000 + 300 s.
    folder = write_sim(tmp_path / "sim", "a,u,vc1,8,8,1,COMPLETED,0,0,5000,5000,0\n", ["burst"])
    sim, _ = build_simulation(load_simulation([str(folder)]), "s", "burst")
    seen: dict[str, float] = {}

    def evict() -> None:
        sim._evicted(next(iter(sim.running.values())), "evicted: test")

    def look() -> None:
        (job,) = sim.pending.values()
        seen["metric"] = sim.pending_seconds()["dev"]
        seen["since"] = job.pending_since

    sim.clock.call_at(1000.0, evict, 0)
    sim.clock.call_at(1000.0, look, 1)
    sim.run()
    assert seen == {"metric": 0.0, "since": 1000.0}
    (job,) = sim.jobs
    assert (job.restarts, job.started) == (1, 0.0)


def recounted_pending_seconds(sim: Simulation) -> dict[str, float]:
    """`pending_seconds` by its definition: every unpinned pending job's wait, added up in `pending`'s order
    per queue; a queue's total is its own plus its children's, recursively."""
    now = sim.clock.now()
    own: dict[str, float] = {}
    for job in sim.pending.values():
        if not job.pinned:
            own[job.queue] = own.get(job.queue, 0.0) + (now - job.pending_since)

    children: dict[str, list[str]] = {}
    for queue in sim.queues.values():
        if queue.parent:
            children.setdefault(queue.parent, []).append(queue.name)

    def total(name: str) -> float:
        return own.get(name, 0.0) + sum(total(child) for child in children.get(name, []))

    return {name: total(name) for name in sim.queues}


def test_pending_seconds_sums_each_queue_subtree_as_the_recursive_definition_does(tmp_path: Path) -> None:
    # A grandchild listed before its parent, the parent before the root, and a queue on its own; waits
    # that do not add up exactly in floats, so the order of the additions shows.
    inp = load_simulation([str(write_sim(tmp_path / "sim", TWO_JOBS, ["idc-only"]))])
    queues = [
        Queue("leaf", parent="mid"),
        Queue("mid", parent="root"),
        Queue("root"),
        Queue("side", parent="root"),
        Queue("alone"),
    ]
    rng = random.Random(7)
    jobs = []
    for i in range(200):
        record = TraceJob(f"j{i}", "", "", 1, 1000, 1, 0, 0, rng.uniform(0, 1000), 10.0)
        job = SimJob(record, rng.choice([q.name for q in queues]), rng.random() < 0.2, record.submit_s)
        job.queued_since = record.submit_s
        jobs.append(job)
    scenario, spec = inp.scenarios["idc-only"], inp.simulations["s"]
    core = SnapshotCore(queues, inp.config)
    sim = Simulation("t", core, queues, [], [], jobs, scenario, spec, clock=SimClock(1000.3))
    for job in jobs:
        sim._pend(job.name, job)
    assert sim.pending_seconds() == recounted_pending_seconds(sim)
    for job in jobs[::3]:
        assert sim._unpend(job.name) is job
    assert sim.pending_seconds() == recounted_pending_seconds(sim)
    for job in jobs:
        sim._unpend(job.name)
    assert sim.pending_seconds() == dict.fromkeys(sim.queues, 0.0)


def test_pending_seconds_kept_by_queue_equal_a_recount_at_every_hpa_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Jobs arriving at fractional seconds, some pinned, overflowing to burst-cloud, placed and restarted:
    # the waits `pending_seconds` keeps by queue add up to exactly what a recount over `pending` gives.
    rows = [
        f"j{i},u,vc{1 + i % 3 // 2},{1 + i % 8},4,1,COMPLETED,{i * 37.3:.1f},0,0,{600 + 97 * i},0" for i in range(60)
    ]
    folder = write_sim(tmp_path / "sim", "\n".join(rows) + "\n", ["burst"], pinned_fraction=0.3)
    sim, _ = build_simulation(load_simulation([str(folder)]), "s", "burst")
    kept = sim.pending_seconds
    seen: list[dict[str, float]] = []

    def compared() -> dict[str, float]:
        value = kept()
        assert value == recounted_pending_seconds(sim)
        seen.append(value)
        return value

    monkeypatch.setattr(sim, "pending_seconds", compared)
    sim.run()
    assert sum(1 for value in seen if value["burst-cloud"] and value["dev"]) > 10


def test_a_run_whose_waiting_jobs_can_never_be_placed_stops_and_says_so(tmp_path: Path) -> None:
    """Without untilSeconds a run ends when every job has; a job no node can take (64 GPUs in one pod)
    would keep the HPA's syncs, and so the clock, going for ever. The run stops a week after the last
    change, with the job unfinished and a warning."""
    jobs = "big,u,vc1,64,8,1,COMPLETED,0,0,100,100,0\nsmall,u,vc1,8,8,1,COMPLETED,0,0,100,100,0\n"
    result = run(tmp_path, ["burst"], jobs)["burst"]
    assert result.summary["jobs_completed"] == 1 and result.summary["jobs_unfinished"] == 1
    (warning,) = [w for w in result.summary["warnings"] if "the run stopped" in w]
    assert "1 job(s) still waited and nothing had changed for 7 days" in warning
    assert result.summary["simulated_days"] < 30


BUDGET_OF_TEN_DAYS = """
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: budget}
spec:
  basedOn: burst
  budget:
    perPeriod: 10
    periodHours: 240
    queue: burst-cloud
    thresholds: [{spentFraction: 1, capability: {nvidia.com/gpu: "0"}}]
---
apiVersion: tidegate.io/v1alpha1
kind: Simulation
metadata: {name: s}
spec: {workload: w, scenarios: [budget]}
"""


LINK_CUT_FOR_EIGHT_DAYS = """
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: cut}
spec: {basedOn: burst, linkOutages: [{start: 0, durationSeconds: 691200}]}
---
apiVersion: tidegate.io/v1alpha1
kind: Simulation
metadata: {name: s}
spec: {workload: w, scenarios: [cut]}
"""


@pytest.mark.parametrize(
    ("scenario", "jobs", "earliest"),
    [
        # The burst queue's budget (10 a period of 10 days) is spent by `first`, which needs a cloud node
        # beside the IDC's; `late`, as large, waits at a capability of 0, nothing running, for the next period.
        (
            BUDGET_OF_TEN_DAYS,
            "first,u,vc2,16,8,2,COMPLETED,0,0,3600,3600,0\nlate,u,vc2,16,8,2,COMPLETED,7200,0,9000,1800,0\n",
            240 * 3600,
        ),
        # The cloud's link is cut for 8 days from the start; `late`, too large for the IDC alone, waits for it.
        (LINK_CUT_FOR_EIGHT_DAYS, "late,u,vc2,16,8,2,COMPLETED,0,0,3600,3600,0\n", 8 * 86400),
    ],
    ids=["budget-period", "link-cut"],
)
def test_a_job_that_a_budget_period_or_a_link_cut_frees_later_is_not_given_up(
    tmp_path: Path, scenario: str, jobs: str, earliest: float
) -> None:
    """Quiet for a week, nothing running, is not stuck while something scripted could still free a job: the
    run waits for it, and the job runs then."""
    folder = sb_write_helios_sim(
        tmp_path / "sim", QUEUES + "---" + scenario, jobs, {"queueByVc": {"vc2": "burst-cloud"}}
    )
    (result,) = run_simulation(load_simulation([str(folder)]))
    assert result.summary["jobs_completed"] == len(result.simulation.jobs), result.summary["warnings"]
    (late,) = [j for j in result.simulation.jobs if j.name == "late"]
    assert late.started is not None and late.started >= earliest
    assert not [w for w in result.summary["warnings"] if "the run stopped" in w]


def test_preferred_node_affinity_with_no_node_at_all_places_nothing_and_does_not_fail() -> None:
    """A cloud-only cluster starts with no node (its pool scales from zero): nodeorder's preferred-affinity
    score has nothing to normalise."""
    gang = sb.job("j", affinity=sb.preferred((10, [sb.req("zone", "Exists")])))
    decisions = schedule(Snapshot(nodes=[], queues=[sb.queue("default")], groups=[gang.group], pods=list(gang.pods)))
    assert decisions.binds == [] and [g.group for g in decisions.groups] == ["default/j"]


def test_a_job_placed_before_its_overflow_deadline_asks_for_no_cycle_then(tmp_path: Path) -> None:
    # Each arrival that may overflow sets a wake-up for when it has waited `afterSeconds` (300 s), so overflow
    # sees it then; a job placed at once is running by that time, and its wake-up asks for no cycle.
    rows = [f"j{i},u,vc1,1,4,1,COMPLETED,{i * 1000},{i * 1000},0,5000,0" for i in range(3)]
    folder = write_sim(tmp_path / "sim", "\n".join(rows) + "\n", ["burst"])
    sim, _ = build_simulation(load_simulation([str(folder)]), "s", "burst")
    cycles: list[float] = []
    scheduled = sim._cycle

    def counted() -> None:
        cycles.append(sim.clock.now())
        scheduled()

    sim._cycle = counted  # type: ignore[method-assign]
    sim.run()
    assert all(job.started == job.submitted for job in sim.jobs)
    assert cycles and not [at for at in cycles if at % 1000 == 300]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_overflow_wake_ups_left_out_for_placed_jobs_change_no_decision(tmp_path: Path, seed: int) -> None:
    # Against the engine that asks for a cycle at every arrival's overflow deadline: the same placements (the
    # digest of every start and eviction), the same overflows, with fewer cycles. Random jobs on the one-node
    # IDC, many waiting long enough to overflow to the cloud pool.
    rng = random.Random(seed)
    rows = []
    at = 0
    for i in range(60):
        at += rng.randrange(400)
        gpus = rng.choice([1, 2, 4, 8])
        rows.append(f"j{i},u,vc1,{gpus},4,1,COMPLETED,{at},{at},0,{rng.randrange(60, 3000)},0")
    folder = write_sim(tmp_path / "sim", "\n".join(rows) + "\n", ["burst"])
    inp = load_simulation([str(folder)])
    runs = []
    for every_deadline in (False, True):
        sim, _ = build_simulation(inp, "s", "burst")
        if every_deadline:
            sim._overflow_due = lambda key, sim=sim: sim._want_cycle()  # type: ignore[method-assign]
        sim.run()
        overflowed = sorted(job.name for job in sim.jobs if job.queue != job.home_queue)
        runs.append((sim.outcome().placements_digest, overflowed, sim.clock.events_run))
    (digest, overflowed, events), (every_digest, every_overflowed, every_events) = runs
    assert overflowed and digest == every_digest and overflowed == every_overflowed
    assert events < every_events


@pytest.mark.parametrize(("job_id", "restarts"), [("j1", 0), ("gpu-job-7", 0), ("gpu-job-7", 3)])
def test_a_pod_names_its_group(job_id: str, restarts: int) -> None:
    """The engine finds a bound or evicted pod's group from its key alone (`group_of_pod`), so every pod
    `to_group` makes, whatever dashes the job's id holds and whichever attempt it is, must name it."""
    record = TraceJob(job_id, "", "", 1, 1000, 3, 0, 0, 0.0, 10.0)
    group, pods = to_group(SimJob(record, "q", False, 0.0), tolerate_cloud=False, attempt=restarts)
    assert len(pods) == 3
    assert {group_of_pod(pod.key) for pod in pods} == {group.key}
