"""The seed-scale folder is what bench.scale writes, the scaling multiplies what it says and nothing else,
and the benchmark's parts work on a short run (no timing)."""

from __future__ import annotations

from pathlib import Path

import yaml

from bench.scale import SEED_K, SEED_SCALE, SOURCE, render, scale_quantity, write_folder
from bench.seed_scale import Result, table, verdicts
from tidegate.sim.loader import load_simulation


def test_examples_seed_scale_is_the_generators_output() -> None:
    files = render(SEED_K)
    assert sorted(files) == sorted(p.name for p in SEED_SCALE.glob("*.yaml"))
    for name, text in files.items():
        stale = f"examples/seed-scale/{name} is stale: python -m bench.scale 25 examples/seed-scale"
        assert (SEED_SCALE / name).read_text() == text, stale


def test_quantities_scale_in_their_unit() -> None:
    assert scale_quantity("768", 25) == "19200"
    assert scale_quantity("32768Gi", 25) == "819200Gi"
    assert scale_quantity("0.5", 5) == "2.5"
    assert scale_quantity(10, 5) == 50 and scale_quantity(1500, 25) == 37500


def test_k_times_the_fleet_and_the_work(tmp_path: Path) -> None:
    base = load_simulation([str(SOURCE)])
    scaled = load_simulation([str(write_folder(5, tmp_path / "k5"))])
    assert scaled.pools["idc-a100"].count == 5 * base.pools["idc-a100"].count
    assert scaled.hpas[0].max_replicas == 5 * base.hpas[0].max_replicas
    dev = {q.name: q for q in scaled.queues}["dev"]
    assert dev.deserved is not None and dev.deserved["nvidia.com/gpu"] == 5 * 384_000
    workload = yaml.safe_load((tmp_path / "k5" / "workload.yaml").read_text().split("\n", 2)[2])
    assert workload["spec"]["synthetic"]["jobsPerDay"] == 1000
    same = {k: v for k, v in workload["spec"]["synthetic"].items() if k not in ("jobsPerDay", "tideFrom")}
    original = yaml.safe_load((SOURCE / "workload.yaml").read_text())["spec"]["synthetic"]
    assert same == {k: v for k, v in original.items() if k not in ("jobsPerDay", "tideFrom")}
    budget = scaled.scenarios["burst-budget"].budget
    assert budget is not None and budget.per_period == 7500
    assert [t.max_replicas for t in budget.thresholds] == [None, 20]
    assert "budget of 7,500" in scaled.scenarios["burst-budget"].description


def test_table_and_verdicts() -> None:
    rows = [
        Result(1, "static-quotas", 2.0, 1.9, 1000, 30.0, "d"),
        Result(25, "static-quotas", 50.0, 40.0, 25_000, 30.0, "e"),
        Result(25, "elastic-burst", 500.0, 0.0, 0, 12.5, "", finished=False),
    ]
    text = table(rows)
    assert "| 25 | 5,000 | static-quotas | 25,000 | 50.0 | 40.0 | 1,600 | 0.84x | e |" in text
    assert "stopped at day 12.5 of 30" in text
    assert "**not met**" in verdicts(rows)
