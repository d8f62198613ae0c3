"""Plots of experiment results (PNG through matplotlib's Agg canvas; no pyplot global state)."""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from tidegate.experiments.fragmentation import RunResult

#: Where the zoomed panel starts (arrived %), where the policies part ways.
ZOOM_FROM = 80


def plot_allocation(results: Sequence[RunResult], path: str | os.PathLike[str], title: str = "") -> None:
    """alloc_pct against arrived_pct, one line per policy (mean over seeds, band from min to max), over the
    whole range and zoomed on the saturated end."""
    from matplotlib.figure import Figure

    by_policy: dict[str, list[RunResult]] = {}
    for result in results:
        by_policy.setdefault(result.policy, []).append(result)
    if not by_policy:
        raise ValueError("no results to plot")
    figure = Figure(figsize=(11, 4.6), dpi=110, layout="constrained")
    full, zoom = figure.subplots(1, 2)
    until = int(max(len(r.arrived_pct) for r in results)) - 1
    for policy, runs in by_policy.items():
        x = runs[0].arrived_pct
        curves = np.vstack([r.alloc_pct for r in runs])
        mean = curves.mean(axis=0)
        for axes in (full, zoom):
            (line,) = axes.plot(
                x,
                mean,
                label=f"{policy} ({len(runs)} seed{'s' if len(runs) != 1 else ''})" if axes is full else None,
                lw=1.6,
            )
            if len(runs) > 1:
                axes.fill_between(x, curves.min(axis=0), curves.max(axis=0), color=line.get_color(), alpha=0.18, lw=0)
    ideal = np.arange(until + 1)
    full.plot(ideal, np.minimum(ideal, 100), ls=":", color="grey", label="everything placed")
    full.set_xlim(0, until)
    full.set_ylim(0, 100)
    start = min(ZOOM_FROM, until)
    zoom.set_xlim(start, until)
    tail = np.concatenate([r.alloc_pct[start:] for r in results])
    zoom.set_ylim(float(tail.min()) - 0.5, float(tail.max()) + 0.5)
    for axes in (full, zoom):
        axes.set_xlabel("arrived workload (% of cluster GPUs)")
        axes.set_ylabel("allocated GPUs (% of cluster GPUs)")
        axes.grid(alpha=0.3)
    zoom.set_title(f"zoom: {start}% to {until}% arrived", fontsize=10)
    full.legend(fontsize=8, loc="upper left")
    if title:
        figure.suptitle(title)
    figure.savefig(os.fspath(path))
