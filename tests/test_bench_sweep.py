"""The sweep benchmark's grid is a valid sweep of the example folder (no timing, no Ray run)."""

from __future__ import annotations

from pathlib import Path

from bench.run_all import BENCHMARKS_MD
from bench.sweep import END, HYBRID, START, grid
from tidegate.sweep.plan import plan


def test_the_benchmark_grid_is_a_valid_sweep_of_the_example(tmp_path: Path) -> None:
    (tmp_path / "grid.yaml").write_text(grid(4, 7))
    ready = plan([str(HYBRID)], str(tmp_path / "grid.yaml"))
    assert len(ready.points) == 4 and all(p.inp is not None for p in ready.points)
    first = ready.points[0].inp
    assert first is not None and first.workloads["tidal-month"].synthetic.days == 7
    assert [p.inp.hpas[0].max_replicas for p in ready.points if p.inp] == [8, 11, 14, 17]
    assert len({p.key for p in ready.points}) == 4
    text = BENCHMARKS_MD.read_text()
    assert START in text and END in text
