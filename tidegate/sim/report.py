"""What a simulation run shows: summary.json, an HTML report with plots, and a terminal table."""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from rich.table import Table

from tidegate.sim.meter import Level
from tidegate.sim.run import RunResult

DAY = 86400.0
SERIES = (("demand_gpus", "GPU demand"), ("local_gpus", "IDC allocated"), ("cloud_gpus", "cloud allocated"))


def summary_document(results: list[RunResult]) -> dict[str, Any]:
    return {"runs": [r.summary for r in results]}


def write_summary(results: list[RunResult], out: Path) -> Path:
    path = out / "summary.json"
    path.write_text(json.dumps(summary_document(results), indent=2) + "\n")
    return path


ROWS: list[tuple[str, str, str]] = [
    ("local GPU utilisation", "local_gpu_utilization", "pct"),
    ("wait p50", "wait_p50_s", "dur"),
    ("wait p95", "wait_p95_s", "dur"),
    ("GPU-hours waited in queues", "queued_gpu_hours", "num"),
    ("jobs completed", "jobs_completed", "int"),
    ("jobs unfinished at end", "jobs_unfinished", "int"),
    ("jobs overflowed to cloud", "jobs_overflowed", "int"),
    ("cloud GPU-hours", "cloud_gpu_hours", "num"),
    ("cloud cost", "cloud_cost", "money"),
    ("same peak reserved monthly", "reserved_peak_cost", "money"),
    ("cloud peak nodes", "cloud_peak_nodes", "int"),
    ("restarts", "restarts", "int"),
    ("GPU-hours redone (all restarts)", "lost_gpu_hours", "num"),
    ("spot interruptions", "spot_interruptions", "int"),
    ("spot: jobs interrupted", "spot_interrupted_jobs", "int"),
    ("spot: preStop checkpoints saved", "spot_checkpoints_saved", "int"),
    ("spot: restarts", "spot_restarts", "int"),
    ("spot: GPU-hours lost", "spot_lost_gpu_hours", "num"),
    ("spot: lost work's cost", "spot_lost_cost", "money"),
    ("jobs failed for good", "jobs_failed", "int"),
    ("GPU-hours kept by jobs that failed", "failed_jobs_gpu_hours", "num"),
    ("budget actions", "budget_changes", "int"),
    ("jobs that waited for data", "prefetch_jobs", "int"),
    ("prefetch delay p95", "prefetch_delay_p95_s", "dur"),
    ("prefetch delay, all jobs", "prefetch_delay_total_s", "dur"),
    ("  of which cloud prefetch", "cloud_prefetch_delay_total_s", "dur"),
    ("GPU-hours idle for data", "data_idle_gpu_hours", "num"),
    ("cost of that idle time", "data_idle_cost", "money"),
    ("link utilisation", "link_utilization", "pct"),
    ("jobs hit by link outages", "outage_affected_jobs", "int"),
]
#: Events the report lists on their own, above the full event log (which overflows bury).
NOTABLE = ("spot interruption", ": failed (", "budget:", "completed by policy", ": HPA ")


def _fmt(value: Any, kind: str) -> str:
    if kind == "pct":
        return f"{100 * value:.1f}%"
    if kind == "dur":
        seconds = float(value)
        return (
            f"{seconds / 3600:.1f} h"
            if seconds >= 3600
            else f"{seconds / 60:.1f} min"
            if seconds >= 60
            else f"{seconds:.0f} s"
        )
    if kind == "money":
        return f"{value:,.0f}"
    if kind == "num":
        return f"{value:,.1f}"
    return f"{value:,}"


def summary_table(results: list[RunResult]) -> Table:
    table = Table(title="tidegate simulate: scenarios side by side")
    table.add_column("", no_wrap=True)
    for result in results:
        table.add_column(result.name, justify="right")
    for label, key, kind in ROWS:
        table.add_row(label, *(_fmt(r.summary[key], kind) for r in results))
    return table


def _step(level: Level, end: float, points: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """The level as a step function sampled on a regular grid (days on the x axis)."""
    grid = np.linspace(0.0, end, points)
    if not level.times:
        return grid / DAY, np.full(points, level.value)
    times, values = np.asarray(level.times), np.asarray(level.values)
    idx = np.searchsorted(times, grid, side="right") - 1
    sampled = np.where(idx >= 0, values[np.clip(idx, 0, None)], 0.0)
    return grid / DAY, sampled


def _pyplot() -> ModuleType:
    """matplotlib's pyplot on the Agg canvas, loaded when a report is drawn: not by every tidegate command
    (it costs a sixth of a second, and writes a cache a read-only container does not have)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    _pyplot().close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


def _figures(results: list[RunResult]) -> list[tuple[str, str]]:
    figures = []
    n = len(results)
    fig, axes = _pyplot().subplots(n, 1, figsize=(11, 2.6 * n), sharex=True, squeeze=False)
    for ax, result in zip(axes[:, 0], results, strict=True):
        sim, end = result.simulation, result.simulation.end
        for key, label in (
            ("demand_gpus", "GPU demand"),
            ("local_gpus", "IDC allocated"),
            ("cloud_gpus", "cloud allocated"),
        ):
            x, y = _step(sim.meter[key], end)
            ax.plot(x, y, label=label, linewidth=0.8)
        ax.axhline(sim.idc_gpus, color="grey", linestyle=":", linewidth=0.8, label="IDC GPUs")
        ax.set_title(result.name, fontsize=9)
        ax.set_ylabel("GPUs")
        ax.legend(fontsize=7, loc="upper right")
    axes[-1, 0].set_xlabel("day")
    figures.append(("GPU demand vs IDC and cloud allocation", _png(fig)))

    fig, ax = _pyplot().subplots(figsize=(11, 3.5))
    for result in results:
        by_queue: dict[str, list[float]] = {}
        for job in result.simulation.jobs:
            wait = job.wait_s(result.simulation.end)
            if wait is not None:
                by_queue.setdefault(job.home_queue, []).append(max(wait, 0.1))
        for queue, waits in sorted(by_queue.items()):
            values = np.sort(waits)
            ax.plot(
                values, np.arange(1, len(values) + 1) / len(values), label=f"{result.name} / {queue}", linewidth=0.9
            )
    ax.set_xscale("log")
    ax.set_xlabel("queue wait (s, log)")
    ax.set_ylabel("fraction of jobs")
    ax.legend(fontsize=7)
    figures.append(("Queue wait CDF per queue", _png(fig)))

    fig, (nodes_ax, spend_ax) = _pyplot().subplots(1, 2, figsize=(11, 3.2))
    for result in results:
        sim, end = result.simulation, result.simulation.end
        for pool in sim.pools.values():
            if not pool.is_cloud:
                continue
            billed = sim.meter[f"billed_nodes/{pool.name}"]
            x, y = _step(billed, end)
            nodes_ax.plot(x, y, label=f"{result.name} / {pool.name}", linewidth=0.8)
            spend = np.cumsum(y) * (end / len(y)) * pool.spec.pricing.per_hour / 3600
            spend_ax.plot(x, spend, label=f"{result.name} / {pool.name}", linewidth=0.8)
    nodes_ax.set_title("cloud nodes (billed)", fontsize=9)
    spend_ax.set_title("cumulative cloud spend", fontsize=9)
    for ax in (nodes_ax, spend_ax):
        ax.set_xlabel("day")
        if ax.get_legend_handles_labels()[0]:  # an IDC-only run has no cloud pool (matplotlib warns on none)
            ax.legend(fontsize=7)
    figures.append(("Cloud nodes and spend over time", _png(fig)))

    fig, ax = _pyplot().subplots(figsize=(11, 3.2))
    labels: list[str] = []
    shares: list[float] = []
    for result in results:
        sim, end = result.simulation, max(result.simulation.end, 1e-9)
        for pool in sim.pools.values():
            used = sim.meter[f"pool_gpus/{pool.name}"].integral(end)
            node_seconds = sim.meter[f"nodes/{pool.name}"].integral(end)
            if node_seconds:
                labels.append(f"{result.name}\n{pool.name}")
                shares.append(100 * used / (node_seconds * pool.gpus_per_node))
    ax.bar(range(len(shares)), shares)
    ax.set_xticks(range(len(shares)), labels, fontsize=7)
    ax.set_ylabel("% of the pool's GPU-hours allocated")
    figures.append(("Utilisation per pool", _png(fig)))
    figures.extend(_data_figures(results))
    return figures


def _data_figures(results: list[RunResult]) -> list[tuple[str, str]]:
    """Each link's throughput over time, and the CDF of per-job prefetch delays (when modelled)."""
    links = [(r, name) for r in results for name, link in r.summary.get("links", {}).items() if link["transferred_gb"]]
    delays = [(r, sorted(r.summary.get("prefetch_delay_by_job", {}).values())) for r in results]
    if not links and not any(d for _, d in delays):
        return []
    fig, (link_ax, delay_ax) = _pyplot().subplots(1, 2, figsize=(11, 3.2))
    for result, name in links:
        sim, end = result.simulation, result.simulation.end
        x, y = _step(sim.meter[f"link_rate/{name}"], end)
        link_ax.plot(x, y * 8 / 1e9, label=f"{result.name} / {name}", linewidth=0.8)
        cut = sim.meter.levels.get("link_cut_clouds")
        if cut is not None:
            start = None
            for t, v in zip(cut.times, cut.values, strict=True):
                if v > 0 and start is None:
                    start = t
                elif v == 0 and start is not None:
                    link_ax.axvspan(start / DAY, t / DAY, color="red", alpha=0.15)
                    start = None
    link_ax.set_title("link throughput (Gbit/s; outages shaded)", fontsize=9)
    link_ax.set_xlabel("day")
    for result, values in delays:
        if values:
            delay_ax.plot(values, np.arange(1, len(values) + 1) / len(values), label=result.name, linewidth=0.9)
    delay_ax.set_title("prefetch delay per job (jobs that waited for data)", fontsize=9)
    delay_ax.set_xscale("log")
    delay_ax.set_xlabel("seconds (log)")
    delay_ax.set_ylabel("fraction of those jobs")
    for ax in (link_ax, delay_ax):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    return [("Data gravity: link throughput and prefetch delays", _png(fig))]


def _hours(t: float | None) -> str:
    return "never" if t is None else f"{t / 3600:.2f} h"


def hpa_lines(hpa: dict[str, Any]) -> list[str]:
    """One HPA's status as ``kubectl describe hpa`` shows it: replicas, each metric, each condition."""
    lines = [
        f"HPA {hpa['name']} (NodePool {hpa['pool']}): {hpa['currentReplicas']} replicas, desired "
        f"{hpa['desiredReplicas']}, last scaled {_hours(hpa['lastScaleTime'])}"
    ]
    for metric in hpa["currentMetrics"]:
        current = ", ".join(f"{k} {v:g}" for k, v in metric["current"].items()) or "unknown"
        lines.append(f"  {metric['metric']}: {metric['error'] or current}")
    for c in hpa["conditions"]:
        since = _hours(c["lastTransitionTime"])
        lines.append(f"  {c['type']} {c['status']} {c['reason']} (since {since}): {c['message']}")
    return lines


def write_html(results: list[RunResult], out: Path, title: str) -> Path:
    path = out / "report.html"
    head = "".join(f"<th>{html.escape(r.name)}</th>" for r in results)
    rows = "".join(
        f"<tr><td>{html.escape(label)}</td>"
        + "".join(f"<td>{_fmt(r.summary[key], kind)}</td>" for r in results)
        + "</tr>"
        for label, key, kind in ROWS
    )
    figures = "".join(
        f"<h2>{html.escape(name)}</h2><img src='data:image/png;base64,{data}' alt='{html.escape(name)}'>"
        for name, data in _figures(results)
    )
    notable = "".join(
        f"<h3>{html.escape(r.name)}</h3><pre>"
        + html.escape(
            "\n".join(
                [f"warning: {w}" for w in r.simulation.warnings]
                + [f"{t / 3600:9.2f} h  {text}" for t, text in r.simulation.events if any(k in text for k in NOTABLE)]
            )
            or "none"
        )
        + "</pre>"
        for r in results
    )
    outages = "".join(
        f"<h3>{html.escape(r.name)}</h3><pre>"
        + html.escape("\n".join(f"{t / 3600:9.2f} h  {text}" for t, text in r.simulation.outage_events))
        + "</pre>"
        for r in results
        if r.simulation.outage_events
    )
    outages = f"<h2>Link outages (every job they touched)</h2>{outages}" if outages else ""
    hpas = "".join(
        f"<h3>{html.escape(r.name)}</h3><pre>"
        + html.escape("\n".join(line for hpa in r.simulation.hpas for line in hpa_lines(hpa)))
        + "</pre>"
        for r in results
        if r.simulation.hpas
    )
    hpas = f"<h2>HPAs at the end of the run: replicas, metrics, conditions</h2>{hpas}" if hpas else ""
    events = "".join(
        f"<h3>{html.escape(r.name)}</h3><pre>"
        + html.escape("\n".join(f"{t / 3600:9.2f} h  {text}" for t, text in r.simulation.events[:300]))
        + (f"\n... {len(r.simulation.events) - 300} more" if len(r.simulation.events) > 300 else "")
        + "</pre>"
        for r in results
    )
    path.write_text(
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>body{{font-family:sans-serif;margin:2em}}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}"
        "td:first-child{text-align:left}img{max-width:100%}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><table><tr><th></th>{head}</tr>{rows}</table>{figures}"
        f"<h2>Spot interruptions, jobs failed for good, budget actions, warnings</h2>{notable}"
        f"{outages}{hpas}<h2>Events</h2>{events}</body></html>"
    )
    return path
