"""Spot interruptions and vcjob policies on hand-checkable scenarios (tidegate/sim/spot.py, policies.py)."""

from __future__ import annotations

import html
import json
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console
from sim_builders import QUEUES, spot_folder, write_helios_sim

from tidegate.model.errors import ManifestErrors
from tidegate.sim.core import SnapshotCore
from tidegate.sim.loader import load_simulation
from tidegate.sim.report import summary_table, write_html, write_summary
from tidegate.sim.run import RunResult, run_simulation
from tidegate.sim.spot import DEFAULT_ADVISOR, prestop, rate_from_band, resolve_interruptions

BURST = {"burst": {"enabled": True, "queue": "burst-cloud", "afterSeconds": 300}}
# x (dev, 8 GPUs) takes the IDC node from 0 to 2,000 s; a (burst-cloud, 8 GPUs, 5,000 s of work)
# arrives at 1 s and runs on the only cloud node, spot-0.
X_AND_A = "x,u,vc1,8,8,1,COMPLETED,0,0,2000,2000,0\na,u,vc2,8,8,1,COMPLETED,1,1,5001,5000,0\n"


def vcjob(retry: str = "maxRetry: 3", grace: int = 300, action: str = "RestartTask") -> str:
    """The seed's vcjob as a policy template: PodEvicted -> `action` on the task, TaskFailed -> RestartJob."""
    return f"""apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: trainer}}
spec:
  queue: dev
  minAvailable: 1
  {retry}
  policies: [{{event: TaskFailed, action: RestartJob}}]
  tasks:
  - name: worker
    replicas: 1
    policies: [{{event: PodEvicted, action: {action}}}]
    template:
      spec:
        terminationGracePeriodSeconds: {grace}
        containers: [{{name: t, image: i, resources: {{requests: {{nvidia.com/gpu: "1"}}}}}}]
"""


def run(folder: Path) -> dict[str, RunResult]:
    return {r.name: r for r in run_simulation(load_simulation([str(folder)]), workers=1)}


def x_and_a(
    tmp_path: Path,
    workload: dict[str, object],
    template: str = "",
    *,
    interruption: dict[str, object] | None = None,
    scenarios: dict[str, dict[str, object]] | None = None,
) -> Path:
    """This file's usual folder: X_AND_A on one cloud node, one notice at 1,001 s (unless `interruption`
    says otherwise), the spot scenario (unless `scenarios`)."""
    return spot_folder(
        tmp_path / "sim",
        X_AND_A,
        cloud_nodes=1,
        interruption=interruption if interruption is not None else {"atSeconds": [1001]},
        workload=workload,
        scenarios=scenarios or {"spot": BURST},
        template=template,
    )


@pytest.mark.parametrize(
    ("checkpoint_s", "restart_at", "lost_gpu_s", "saved", "a_finishes"),
    [
        # No preStop checkpoint: a stops at the notice (1,001 s) after 1,000 s of work; its last
        # periodic checkpoint was at 600 s, so 400 s x 8 GPUs = 3,200 GPU-s are lost. It waits for the
        # IDC (the cloud node is cordoned, then gone at 1,121 s), starts at 2,000 with 4,400 s to go.
        (0.0, 1001.0, 3200.0, 0, 2000 + 5000 - 600),
        # A 60 s checkpoint fits the 120 s notice (and the 300 s grace): the work up to the notice is
        # kept (1,000 s), the pod leaves at 1,061 s, nothing is lost; 4,000 s to go from 2,000.
        (60.0, 1061.0, 0.0, 1, 2000 + 5000 - 1000),
        # A 200 s checkpoint does not fit the notice: the instance dies at 1,121 s mid-checkpoint and
        # a resumes from 600 s, as without a preStop checkpoint.
        (200.0, 1121.0, 3200.0, 0, 2000 + 5000 - 600),
    ],
)
def test_one_interruption_at_a_known_time(
    tmp_path: Path, checkpoint_s: float, restart_at: float, lost_gpu_s: float, saved: int, a_finishes: float
) -> None:
    folder = x_and_a(
        tmp_path, {"checkpointEverySeconds": 600, "checkpointSeconds": checkpoint_s, "jobTemplate": "trainer"}, vcjob()
    )
    result = run(folder)["spot"]
    jobs = {j.name: j for j in result.simulation.jobs}
    a = jobs["a"]
    assert (a.started, a.restarts, a.retries, a.finished) == (1.0, 1, 1, a_finishes)
    assert result.simulation.meter["lost_gpu_seconds"].value == lost_gpu_s
    restart = next(t for t, text in result.simulation.events if text.startswith("a: restarted (spot interruption"))
    assert restart == restart_at
    summary = result.summary
    assert summary["spot_interruptions"] == 1 and summary["spot_interrupted_jobs"] == 1
    assert summary["spot_checkpoints_saved"] == saved and summary["spot_restarts"] == 1
    assert summary["spot_lost_gpu_hours"] == round(lost_gpu_s / 3600, 1)
    # lost GPU-hours at the pool's price per GPU-hour: 3,200 / 3,600 x 36 / 8 = 4.00
    assert summary["spot_lost_cost"] == pytest.approx(lost_gpu_s / 3600 * 36 / 8)
    # the node is billed from 0 until the provider takes it back at 1,001 + 120 s
    assert summary["cloud_cost"] == pytest.approx(1121 * 36 / 3600)
    assert summary["jobs_completed"] == 2 and summary["jobs_failed"] == 0


def test_a_grace_period_longer_than_the_notice_warns(tmp_path: Path) -> None:
    folder = x_and_a(tmp_path, {"jobTemplate": "trainer"}, vcjob(grace=300))
    inp = load_simulation([str(folder)])
    (warning,) = [w for w in inp.warnings if w.field.endswith("terminationGracePeriodSeconds")]
    assert (warning.kind, warning.name) == ("Job", "trainer")
    assert "300 is longer than NodePool spot's aws spot notice (120 s)" in warning.message
    (result,) = run_simulation(inp, workers=1)
    assert result.summary["warnings"] == [warning.message]


def test_a_grace_period_within_the_notice_does_not_warn(tmp_path: Path) -> None:
    folder = x_and_a(tmp_path, {"jobTemplate": "trainer"}, vcjob(grace=100))
    assert not [w for w in load_simulation([str(folder)]).warnings if "notice" in w.message]


def test_the_job_fails_for_good_when_its_retries_reach_max_retry(tmp_path: Path) -> None:
    # retryLimit: 2 (read as maxRetry, with a warning). a runs on spot-0 from 1 s; the notice at
    # 1,001 s restarts it (retry 1 < 2) on spot-1; the notice at 3,001 s (spot-0 is gone, so spot-1
    # is the oldest node) makes retry 2 = maxRetry: a fails for good, with the reason.
    jobs = "x,u,vc1,8,8,1,COMPLETED,0,0,9000,9000,0\na,u,vc2,8,8,1,COMPLETED,1,1,5001,5000,0\n"
    folder = spot_folder(
        tmp_path / "sim",
        jobs,
        cloud_nodes=2,
        interruption={"atSeconds": [1001, 3001]},
        workload={"checkpointEverySeconds": 600, "jobTemplate": "trainer"},
        scenarios={"spot": BURST},
        template=vcjob(retry="retryLimit: 2"),
    )
    inp = load_simulation([str(folder)])
    assert any(w.field == "spec.retryLimit" and "maxRetry" in w.message for w in inp.warnings)
    (result,) = run_simulation(inp, workers=1)
    a = next(j for j in result.simulation.jobs if j.name == "a")
    assert (a.restarts, a.retries, a.finished) == (1, 2, None)
    assert a.failed_reason == (
        "spot interruption of spot-1, preStop checkpoint not completed; "
        "PodEvicted -> RestartTask, retry 2 reached maxRetry 2"
    )
    summary = result.summary
    assert summary["jobs_failed"] == 1 and summary["jobs_completed"] == 1 and summary["jobs_unfinished"] == 0
    assert (summary["spot_interrupted_jobs"], summary["spot_restarts"]) == (2, 1)
    assert summary["failed_jobs"] == {"a": a.failed_reason}
    # a had kept 600 s (first run) + 1,800 s (second run) of work in checkpoints: 2,400 s x 8 GPUs
    assert summary["failed_jobs_gpu_hours"] == round(2400 * 8 / 3600, 1)
    # 400 s lost at the first notice (checkpoint at 600 of 1,000 s), then a resumed from 600 s of work
    # at 1,001 s and ran 2,000 s to 3,001 s: its last checkpoint at 1,800 s of that run, 200 s lost.
    assert result.simulation.meter["lost_gpu_seconds"].value == (400 + 200) * 8


def test_abort_job_policy_fails_at_the_first_eviction(tmp_path: Path) -> None:
    folder = x_and_a(tmp_path, {"jobTemplate": "trainer"}, vcjob(action="AbortJob"))
    a = next(j for j in run(folder)["spot"].simulation.jobs if j.name == "a")
    assert a.restarts == 0 and a.finished is None
    assert a.failed_reason.endswith("PodEvicted -> AbortJob")


def test_without_a_template_an_evicted_job_restarts_without_counting_retries(tmp_path: Path) -> None:
    # No policy matches: Volcano only syncs the job (pods recreated, retryCount unchanged).
    folder = x_and_a(tmp_path, {"checkpointEverySeconds": 600})
    a = next(j for j in run(folder)["spot"].simulation.jobs if j.name == "a")
    assert (a.restarts, a.retries, a.finished) == (1, 0, 6400.0)


def test_on_demand_pricing_and_interruptions_off_compare_with_spot(tmp_path: Path) -> None:
    scenarios = {
        "spot": BURST,
        "on-demand": {**BURST, "cloudPricing": "on-demand"},
        "no-interruptions": {**BURST, "interruptions": False},
    }
    folder = x_and_a(tmp_path, {"checkpointEverySeconds": 600}, scenarios=scenarios)
    results = run(folder)
    # Uninterrupted, the fixed node is billed for the whole run at 36 an hour on spot, 100 on demand;
    # interrupted, only until the provider takes it back at 1,121 s.
    spot, on_demand = results["no-interruptions"].summary, results["on-demand"].summary
    assert spot["simulated_days"] == on_demand["simulated_days"]
    assert on_demand["cloud_cost"] == pytest.approx(spot["cloud_cost"] * 100 / 36, abs=0.01)
    assert results["spot"].summary["cloud_cost"] == pytest.approx(1121 * 36 / 3600, abs=0.005)
    a_runs = {s: next(j for j in results[s].simulation.jobs if j.name == "a") for s in results}
    assert (a_runs["on-demand"].finished, a_runs["no-interruptions"].finished, a_runs["spot"].finished) == (
        5001.0,
        5001.0,
        6400.0,
    )
    assert [results[s].summary["spot_interruptions"] for s in ("spot", "on-demand", "no-interruptions")] == [1, 0, 0]
    node = results["on-demand"].simulation.pools["spot"].spec
    assert node.pricing.model == "on-demand" and node.interruption is None


#: Eight 8-GPU burst jobs, one every 10 minutes, of 1 to 1.6 hours.
EIGHT_BURST_JOBS = "".join(f"j{i},u,vc2,8,8,1,COMPLETED,{i * 600},0,0,{3600 + 300 * i},0\n" for i in range(8))


def test_random_interruptions_are_seeded_and_repeat(tmp_path: Path) -> None:
    # 1 interruption per node-hour on 2 cloud nodes: every burst job is interrupted now and then, and
    # the same seed gives the same run.
    folder = spot_folder(
        tmp_path / "sim",
        EIGHT_BURST_JOBS,
        cloud_nodes=2,
        interruption={"ratePerHour": 1.0},
        workload={"checkpointEverySeconds": 600, "checkpointSeconds": 30},
        scenarios={"spot": BURST},
    )
    first, second = run(folder)["spot"], run(folder)["spot"]
    assert first.summary["spot_interruptions"] > 0
    assert first.summary == second.summary and first.simulation.events == second.simulation.events


def test_a_scenario_can_override_the_interruption_rate(tmp_path: Path) -> None:
    folder = spot_folder(
        tmp_path / "sim",
        EIGHT_BURST_JOBS,
        cloud_nodes=2,
        interruption={"ratePerHour": 0.0},
        workload={"checkpointEverySeconds": 600},
        scenarios={"declared": BURST, "stressed": {**BURST, "interruptionRatePerHour": 1.0}},
    )
    results = run(folder)
    assert results["declared"].summary["spot_interruptions"] == 0
    assert results["stressed"].summary["spot_interruptions"] > 0


def test_prestop_is_bounded_by_grace_and_notice() -> None:
    assert prestop(60, 300, 120) == prestop(60, 120, 300)
    assert (prestop(60, 300, 120).saved, prestop(60, 300, 120).hold_s) == (True, 60)
    assert (prestop(200, 300, 120).saved, prestop(200, 300, 120).hold_s) == (False, 120)
    assert (prestop(200, 30, 120).saved, prestop(200, 30, 120).hold_s) == (False, 30)
    assert (prestop(0, 300, 120).saved, prestop(0, 300, 120).hold_s) == (False, 0)


def test_a_band_maps_to_a_rate_per_instance_hour() -> None:
    # 12.5% of instances interrupted over a 730-hour month: 1 - exp(-730 r) = 0.125
    assert rate_from_band(0.125) == pytest.approx(0.00018292, rel=1e-4)


@pytest.mark.skipif(not DEFAULT_ADVISOR.is_file(), reason="../shared/data/aws-spot-advisor is absent")
def test_the_default_rate_comes_from_the_spot_advisor_band(tmp_path: Path) -> None:
    folder = x_and_a(tmp_path, {}, interruption={"instanceType": "p4d.24xlarge", "region": "us-east-1"})
    interruptions = load_simulation([str(folder)]).interruptions["spot"]
    # p4d.24xlarge in us-east-1 is in band 10-15% (Spot Advisor snapshot of July 2025)
    assert interruptions.rate_per_hour == pytest.approx(rate_from_band(0.125))
    assert (interruptions.notice_s, interruptions.provider) == (120.0, "aws")
    assert "10-15%" in interruptions.origin


@pytest.mark.parametrize(
    ("interruption", "field", "message"),
    [
        ({}, "spec.interruption", "give ratePerHour"),
        ({"instanceType": "p9.huge", "region": "us-east-1"}, "spec.interruption.instanceType", "p9.huge"),
        ({"ratePerHour": -1}, "spec.interruption.ratePerHour", "greater than or equal to 0"),
    ],
)
def test_bad_interruption_settings_name_the_pool_and_field(
    tmp_path: Path, interruption: dict[str, object], field: str, message: str
) -> None:
    if "instanceType" in interruption and not DEFAULT_ADVISOR.is_file():
        pytest.skip("../shared/data/aws-spot-advisor is absent")
    folder = x_and_a(tmp_path, {}, interruption=interruption)
    with pytest.raises(ManifestErrors) as exc:
        load_simulation([str(folder)])
    (error,) = exc.value.errors
    assert (error.kind, error.name, error.field) == ("NodePool", "spot", field)
    assert message in error.message


def test_a_missing_job_template_is_an_error(tmp_path: Path) -> None:
    folder = x_and_a(tmp_path, {"jobTemplate": "nope"})
    with pytest.raises(ManifestErrors) as exc:
        load_simulation([str(folder)])
    (error,) = exc.value.errors
    assert (error.kind, error.name, error.field) == ("Workload", "w", "spec.jobTemplate")


def test_resolve_ignores_pools_without_interruption(tmp_path: Path) -> None:
    no_interruption = spot_folder(
        tmp_path / "sim", X_AND_A, cloud_nodes=1, interruption=None, workload={}, scenarios={"spot": BURST}
    )
    inp = load_simulation([str(no_interruption)])
    assert inp.interruptions == {}
    assert resolve_interruptions(inp.pools["spot"], inp.clusters["aws"], tmp_path) is None


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    jobs=st.lists(
        st.tuples(
            st.sampled_from(["vc1", "vc2"]), st.sampled_from([1, 2, 4, 8]), st.integers(0, 3000), st.integers(60, 4000)
        ),
        min_size=1,
        max_size=8,
    ),
    notices=st.lists(st.integers(0, 6000), min_size=1, max_size=4),
    retry=st.integers(1, 4),
    checkpoint_s=st.sampled_from([0, 60, 200]),
)
def test_no_job_is_ever_lost(
    tmp_path: Path, jobs: list[tuple[str, int, int, int]], notices: list[int], retry: int, checkpoint_s: int
) -> None:
    # Whatever interruptions happen, every job ends completed or failed with a reason (every job fits
    # the IDC node, so none can be stuck at the end), and the summary's counts add up.
    rows = [f"j{i},u,{vc},{g},{g},1,COMPLETED,{t},0,0,{d},0" for i, (vc, g, t, d) in enumerate(jobs)]
    folder = spot_folder(
        Path(tempfile.mkdtemp(dir=tmp_path)),
        "\n".join(rows) + "\n",
        cloud_nodes=2,
        interruption={"atSeconds": notices},
        workload={"checkpointEverySeconds": 600, "checkpointSeconds": checkpoint_s, "jobTemplate": "trainer"},
        scenarios={"spot": BURST},
        template=vcjob(retry=f"maxRetry: {retry}"),
    )
    (result,) = run_simulation(load_simulation([str(folder)]), workers=1)
    for job in result.simulation.jobs:
        assert (job.finished is not None) != bool(job.failed_reason), job
        assert job.retries <= retry
    summary = result.summary
    assert summary["jobs_completed"] + summary["jobs_failed"] == summary["jobs_submitted"] == len(jobs)
    assert summary["jobs_unfinished"] == 0


def test_the_report_lists_interruptions_failures_and_warnings(tmp_path: Path) -> None:
    folder = x_and_a(tmp_path, {"checkpointEverySeconds": 600, "jobTemplate": "trainer"}, vcjob(retry="maxRetry: 1"))
    results = run_simulation(load_simulation([str(folder)]), workers=1)
    out = tmp_path / "out"
    out.mkdir()
    summary = json.loads(write_summary(results, out).read_text())["runs"][0]
    assert (summary["spot_interruptions"], summary["jobs_failed"], summary["spot_lost_cost"]) == (1, 1, 4.0)
    page = write_html(results, out, "t").read_text()
    notable = page.split("<h2>Spot interruptions, jobs failed for good, budget actions, warnings</h2>")[1]
    notable = html.unescape(notable.split("<h2>Events</h2>")[0])
    assert "warning: Job trainer: terminationGracePeriodSeconds 300" in notable
    assert "0.28 h  spot-0: spot interruption notice (120 s); stopping a" in notable
    assert "a: failed (spot interruption of spot-0, preStop checkpoint not completed; PodEvicted" in notable
    table = Console(width=200, record=True)
    table.print(summary_table(results))
    assert "jobs failed for good" in table.export_text()


def test_both_cores_decide_alike_through_interruptions_and_policies(tmp_path: Path) -> None:
    # The HPA-driven pool of sim_builders.QUEUES (aliyun: 300 s notice) interrupted twice a node-hour;
    # the HPA replaces interrupted nodes, and jobs evicted twice fail (maxRetry 2).
    base = QUEUES.replace(
        "  scaleTargetRef: {name: virtual-kubelet-cloud}\n",
        "  scaleTargetRef: {name: virtual-kubelet-cloud}\n  interruption: {ratePerHour: 2.0}\n",
    )
    simulation = {"workload": "w", "scenarios": ["burst"]}
    base += "---\n" + yaml.safe_dump(
        {"apiVersion": "tidegate.io/v1alpha1", "kind": "Simulation", "metadata": {"name": "s"}, "spec": simulation}
    )
    rows = [
        f"j{i},u,vc{1 + i % 2},{(1, 2, 4, 8)[i % 4]},4,1,COMPLETED,{i * 400},0,0,{1200 + (i * 937) % 4000},0"
        for i in range(24)
    ]
    workload = {
        "queueByVc": {"vc1": "dev", "vc2": "burst-cloud"},
        "checkpointEverySeconds": 600,
        "checkpointSeconds": 60,
        "jobTemplate": "trainer",
    }
    folder = write_helios_sim(
        tmp_path / "sim", base + "---\n" + vcjob(retry="maxRetry: 2"), "\n".join(rows) + "\n", workload
    )
    inp = load_simulation([str(folder)])
    (online,) = run_simulation(inp, workers=1)
    (reference,) = run_simulation(inp, core_factory=lambda inp, queues: SnapshotCore(queues, inp.config))
    assert online.summary["spot_interruptions"] > 1 and online.summary["jobs_failed"] > 0
    assert online.summary == reference.summary
    assert online.simulation.events == reference.simulation.events
