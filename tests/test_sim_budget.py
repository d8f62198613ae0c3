"""Budget control on a hand-checkable scenario (tidegate/fleet/budget.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from sim_builders import QUEUES, spot_folder, write_helios_sim

from tidegate.model.errors import ManifestErrors
from tidegate.sim.core import SnapshotCore
from tidegate.sim.loader import load_simulation
from tidegate.sim.run import run_simulation

BURST = {"burst": {"enabled": True, "queue": "burst-cloud", "afterSeconds": 300}}
BUDGET = {
    "perPeriod": 10,
    "periodHours": 1,
    "queue": "burst-cloud",
    "thresholds": [
        {"spentFraction": 0.5, "weight": 10},
        {"spentFraction": 1.0, "state": "Closed"},
    ],
}
# x (dev) holds the IDC node from 0 to 5,000 s; c (burst-cloud, 8 GPUs, 100 s) arrives at 600 s.
X_AND_C = "x,u,vc1,8,8,1,COMPLETED,0,0,5000,5000,0\nc,u,vc2,8,8,1,COMPLETED,600,0,0,100,0\n"


def budget_folder(tmp_path: Path, budget: dict[str, object]) -> Path:
    # Two spot nodes billed from 0 at 36 an hour each: 72 an hour, 0.02 a second.
    return spot_folder(
        tmp_path / "sim",
        X_AND_C,
        cloud_nodes=2,
        interruption=None,
        workload={},
        scenarios={"budget": {**BURST, "budget": budget}, "no-budget": BURST},
    )


def test_crossing_a_threshold_patches_the_queue_and_the_next_period_restores_it(tmp_path: Path) -> None:
    inp = load_simulation([str(budget_folder(tmp_path, BUDGET))])
    for results in (
        run_simulation(inp, workers=1),
        run_simulation(inp, core_factory=lambda inp, queues: SnapshotCore(queues, inp.config)),
    ):
        budget, free = results
        changes = [(t, text) for t, text in budget.simulation.events if text.startswith("budget:")]
        # 50% of 10 is spent at 250 s (0.02/s): acted on at the first check at or after it, 255 s (checks
        # every 15 s). 100% at 500 s: check at 510 s. The next period starts at 3,600 s: restored. Then
        # again 3,600 + 255 and 3,600 + 510; c and x have finished before the third period.
        assert [t for t, _ in changes] == [255.0, 510.0, 3600.0, 3855.0, 4110.0]
        assert "weight 1, capability nvidia.com/gpu=16 -> weight 10, capability nvidia.com/gpu=16" in changes[0][1]
        assert "spent 5.10 of 10.00 in period 0 (>= 50%)" in changes[0][1]
        assert "-> weight 10, capability nvidia.com/gpu=16, Closed (spent 10.20" in changes[1][1]
        assert "Closed -> weight 1, capability nvidia.com/gpu=16 (period 1 starts: restored)" in changes[2][1]
        assert budget.summary["budget_changes"] == 5 and free.summary["budget_changes"] == 0
        # With burst-cloud closed, c (arrived at 600 s) waits for the restore at 3,600 s;
        # without a budget it starts on a cloud node at once.
        c = {r.name: next(j for j in r.simulation.jobs if j.name == "c") for r in results}
        assert (c["budget"].started, c["no-budget"].started) == (3600.0, 600.0)


def test_a_budget_on_an_unknown_queue_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestErrors) as exc:
        load_simulation([str(budget_folder(tmp_path, {**BUDGET, "queue": "nope"}))])
    (error,) = exc.value.errors
    assert (error.kind, error.name, error.field) == ("Scenario", "budget", "spec.budget.queue")


def test_a_threshold_that_changes_nothing_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestErrors) as exc:
        load_simulation([str(budget_folder(tmp_path, {**BUDGET, "thresholds": [{"spentFraction": 0.5}]}))])
    (error,) = exc.value.errors
    assert (error.field, error.message) == (
        "spec.budget.thresholds[0]",
        "set weight, capability, state and/or maxReplicas",
    )


def test_a_zero_gpu_capability_keeps_the_queue_off_gpus_until_the_next_period(tmp_path: Path) -> None:
    # As in a Queue, nvidia.com/gpu "0" is a cap of no GPUs (Volcano keeps a declared scalar 0): 50% is
    # spent at 250 s, so the check at 255 s caps burst-cloud at 0 cards; c (arrived at 600 s, 8 GPUs)
    # waits for the next period's restore at 3,600 s, as with state: Closed.
    thresholds = [{"spentFraction": 0.5, "capability": {"nvidia.com/gpu": "0"}}]
    inp = load_simulation([str(budget_folder(tmp_path, {**BUDGET, "thresholds": thresholds}))])
    for results in (
        run_simulation(inp, workers=1),
        run_simulation(inp, core_factory=lambda inp, queues: SnapshotCore(queues, inp.config)),
    ):
        changes = [(t, text) for t, text in results[0].simulation.events if text.startswith("budget:")]
        assert changes[0][0] == 255.0
        assert "weight 1, capability nvidia.com/gpu=16 -> weight 1, capability nvidia.com/gpu=0 (" in changes[0][1]
        c = {r.name: next(j for j in r.simulation.jobs if j.name == "c") for r in results}
        assert (c["budget"].started, c["no-budget"].started) == (3600.0, 600.0)


def test_a_threshold_can_cap_the_hpa_until_the_next_period(tmp_path: Path) -> None:
    # The HPA of sim_builders.QUEUES (max 2 nodes of 36 an hour, 60 s provisioning) with a budget of 5 an
    # hour. a holds the IDC node; b and c (burst-cloud) wait. HPA syncs every 15 s: at 15 s b and c have
    # waited 30 s in all -> ceil(30 / 300) = 1 node (billed from 15 s, ready at 75 s, b starts there);
    # then c alone waits: its 345 s at 345 s are the first beyond the HPA's 10% tolerance of 300 s per
    # node (315 / 300 and 330 / 300 are within it) -> 2 nodes (billed from 345 s). Spend is
    # 0.01 (t - 15) + 0.01 (t - 345) = 5 at t = 430 s: the check at 435 s (4.20 + 0.90 = 5.10 spent)
    # caps the HPA at 1 replica, and the next period (3,600 s) gives it its 2 back.
    jobs = (
        "a,u,vc1,8,8,1,COMPLETED,0,0,0,5000,0\n"
        "b,u,vc2,8,8,1,COMPLETED,0,0,0,3000,0\n"
        "c,u,vc2,8,8,1,COMPLETED,0,0,0,3000,0\n"
    )
    scenario = {
        "apiVersion": "tidegate.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": "capped"},
        "spec": {
            **BURST,
            "budget": {"perPeriod": 5, "periodHours": 1, "thresholds": [{"spentFraction": 1.0, "maxReplicas": 1}]},
        },
    }
    simulation = {
        "apiVersion": "tidegate.io/v1alpha1",
        "kind": "Simulation",
        "metadata": {"name": "s"},
        "spec": {"workload": "w", "scenarios": ["capped"]},
    }
    base = QUEUES + "---\n" + yaml.safe_dump(scenario) + "---\n" + yaml.safe_dump(simulation)
    folder = write_helios_sim(tmp_path / "sim", base, jobs, {"queueByVc": {"vc1": "dev", "vc2": "burst-cloud"}})
    (result,) = run_simulation(load_simulation([str(folder)]), workers=1)
    billed = result.simulation.meter["billed_nodes/cloud-a100"]
    assert billed.times[:2] == [15.0, 345.0]
    changes = [(t, text) for t, text in result.simulation.events if text.startswith("budget:")]
    assert changes == [
        (435.0, "budget: HPA cloud-burst-hpa maxReplicas 2 -> 1 (spent 5.10 of 5.00 in period 0 (>= 100%))"),
        (3600.0, "budget: HPA cloud-burst-hpa maxReplicas 1 -> 2 (period 1 starts: restored)"),
    ]
