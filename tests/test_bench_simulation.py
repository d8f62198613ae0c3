"""The simulation benchmark on a tiny prefix: both cores replay it alike and the report renders."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from bench.simulation import FLOOR, counting_core, main, replay_input, snapshot_core, summary, table, timed
from tidegate.model.objects import DEFAULT_TIERS, PluginOption, SchedulerConfiguration, Tier
from tidegate.sim.run import run_simulation


def test_both_cores_replay_the_openb_prefix_alike(tmp_path: Path) -> None:
    inp = replay_input(tmp_path / "replay", 60)
    online = run_simulation(inp, workers=1)
    reference = run_simulation(inp, core_factory=snapshot_core, workers=1)
    assert online[0].summary == reference[0].summary
    assert online[0].summary["jobs_submitted"] == 60


def test_rows_and_report(tmp_path: Path) -> None:
    rows = timed("openb", "OnlineScheduler", replay_input(tmp_path / "replay", 30))
    assert rows[0].jobs == 30 and rows[0].jobs_per_s > 0
    assert "| openb | OnlineScheduler | 30 |" in table(rows)


def test_quick_run_writes_its_block(tmp_path: Path) -> None:
    target = tmp_path / "BENCHMARKS.md"
    target.write_text("# Benchmarks\n")
    assert main(["--quick", "--baseline-jobs", "20", "--work", str(tmp_path / "w"), "--write-to", str(target)]) == 0
    assert "<!-- bench:simulation:start -->" in target.read_text()


def test_the_engine_floor_runs_every_job_and_is_reported(tmp_path: Path) -> None:
    inp = replay_input(tmp_path / "replay", 200)
    (floor,) = run_simulation(inp, core_factory=counting_core, workers=1)
    assert floor.summary["jobs_completed"] == floor.summary["jobs_submitted"] == 200
    online = timed("openb replay, all jobs", "OnlineScheduler", inp)
    counted = timed("openb replay, all jobs", FLOOR, inp, counting_core)
    base = timed(
        "openb replay, first 20 jobs", "SnapshotCore (baseline)", replay_input(tmp_path / "p", 20), snapshot_core
    )
    text = summary([*base, dataclasses.replace(base[0], core="OnlineScheduler"), *online, *counted])
    assert "The engine with a core that does no scheduling work" in text and "µs a job" in text


def test_the_placements_digest_tells_runs_that_placed_differently(tmp_path: Path) -> None:
    # Spreading (least requested) and packing (most requested) place the same prefix on other nodes: every
    # other figure of the replay can agree (all jobs fit either way), the digest does not.
    inp = replay_input(tmp_path / "replay", 100)
    spread = SchedulerConfiguration(
        tiers=(
            DEFAULT_TIERS[0],
            Tier((PluginOption("predicates"), PluginOption("nodeorder"), PluginOption("gpushare"))),
        )
    )
    most = PluginOption("nodeorder", {"leastrequested.weight": 0, "mostrequested.weight": 1})
    packed = SchedulerConfiguration(
        tiers=(DEFAULT_TIERS[0], Tier((PluginOption("predicates"), most, PluginOption("gpushare"))))
    )
    (a,) = run_simulation(dataclasses.replace(inp, config=spread), workers=1)
    (again,) = run_simulation(dataclasses.replace(inp, config=spread), workers=1)
    (b,) = run_simulation(dataclasses.replace(inp, config=packed), workers=1)
    assert a.summary == again.summary and len(a.summary["placements_digest"]) == 16
    assert a.summary["placements_digest"] != b.summary["placements_digest"]
    same = {k: v for k, v in a.summary.items() if k != "placements_digest"}
    assert same == {k: v for k, v in b.summary.items() if k != "placements_digest"}
