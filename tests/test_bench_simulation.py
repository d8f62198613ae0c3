"""The simulation benchmark on a tiny prefix: both cores replay it alike and the report renders."""

from __future__ import annotations

from pathlib import Path

from bench.simulation import main, replay_input, snapshot_core, table, timed
from tidegate.sim.run import run_simulation


def test_both_cores_replay_the_openb_prefix_alike(tmp_path: Path) -> None:
    inp = replay_input(tmp_path / "replay", 60)
    online = run_simulation(inp, workers=1)
    reference = run_simulation(inp, core_factory=snapshot_core, workers=1)
    assert online[0].summary == reference[0].summary
    assert online[0].summary["jobs_submitted"] == 60


def test_rows_and_report(tmp_path: Path) -> None:
    rows = timed("openb", "OnlineScheduler", replay_input(tmp_path / "replay", 30), baseline=False)
    assert rows[0].jobs == 30 and rows[0].jobs_per_s > 0
    assert "| openb | OnlineScheduler | 30 |" in table(rows)


def test_quick_run_writes_its_block(tmp_path: Path) -> None:
    target = tmp_path / "BENCHMARKS.md"
    target.write_text("# Benchmarks\n")
    assert main(["--quick", "--baseline-jobs", "20", "--work", str(tmp_path / "w"), "--write-to", str(target)]) == 0
    assert "<!-- bench:simulation:start -->" in target.read_text()
