"""What a simulation run shows: summary.json, an HTML report with plots, and a terminal table."""

from __future__ import annotations

import base64
import html
import io
import json
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from rich.table import Table

from tidegate.sim.meter import Level
from tidegate.sim.run import RunResult

DAY = 86400.0
#: How the report writes money: the NodePools' prices are in one currency, US dollars in the examples.
CURRENCY = "$"
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


def _panels(n: int, columns: int = 1, height: float = 2.5) -> tuple[Any, Any]:
    """A figure of `n` panels (one per scenario) on `columns` columns, as an array of axes."""
    rows = max(1, -(-n // columns))
    fig, axes = _pyplot().subplots(rows, columns, figsize=(11, height * rows), squeeze=False)
    for extra in axes.flat[n:]:
        extra.set_visible(False)
    return fig, axes.flat


def _figures(results: list[RunResult]) -> list[tuple[str, str, str]]:
    """The report's figures: (title, what it shows, PNG as base64). Lines of different scenarios that would
    overlap get a panel each."""
    figures = []
    fig, axes = _panels(len(results), height=2.4)
    for ax, result in zip(axes, results, strict=False):
        sim, end = result.simulation, result.simulation.end
        for key, label in (
            ("demand_gpus", "GPU demand"),
            ("local_gpus", "IDC allocated"),
            ("cloud_gpus", "cloud allocated"),
        ):
            x, y = _step(sim.meter[key], end)
            ax.plot(x, y, label=label, linewidth=0.8)
        ax.axhline(sim.idc_gpus, color="grey", linestyle=":", linewidth=0.8, label=f"IDC GPUs ({sim.idc_gpus:,})")
        ax.set_title(result.name, fontsize=9)
        ax.set_ylabel("GPUs")
        ax.set_xlabel("day of the run", fontsize=8)
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    figures.append(
        (
            "GPU demand vs IDC and cloud allocation",
            "GPUs asked for by jobs that have arrived and not finished, against GPUs allocated in the IDC and in "
            "the cloud, one panel per scenario.",
            _png(fig),
        )
    )
    figures.append(_wait_figure(results))
    cloudy = [r for r in results if _billed_node_seconds(r) > 0]
    if cloudy:
        figures.append(_cloud_figure(cloudy, [r.name for r in results if r not in cloudy]))

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
    bars = ax.bar(range(len(shares)), shares)
    ax.bar_label(bars, labels=[f"{share:.0f}%" for share in shares], fontsize=7)
    ax.set_xticks(range(len(shares)), labels, fontsize=7)
    ax.set_ylabel("% of its GPU-hours allocated")
    ax.set_ylim(0, 105)
    figures.append(
        (
            "Utilisation per pool",
            "Of each pool's GPU-hours (its nodes' GPUs for as long as they existed), the share jobs held.",
            _png(fig),
        )
    )
    figures.extend(_data_figures(results))
    return figures


def _wait_figure(results: list[RunResult]) -> tuple[str, str, str]:
    """Each scenario's queue waits per queue, as a CDF on an axis that is linear up to 1 s and logarithmic
    after: a job that waited 0 s is drawn at 0 (a log axis would leave it out, or hide it at 0.1 s)."""
    fig, axes = _panels(len(results), columns=2, height=2.6)
    for ax, result in zip(axes, results, strict=False):
        by_queue: dict[str, list[float]] = {}
        for job in result.simulation.jobs:
            wait = job.wait_s(result.simulation.end)
            if wait is not None:
                by_queue.setdefault(job.home_queue, []).append(max(wait, 0.0))
        for queue, waits in sorted(by_queue.items()):
            values = np.sort(waits)
            fractions = np.arange(1, len(values) + 1) / len(values)
            zero, short = float(np.mean(values <= 0.0)), float(np.mean(values < 1.0))
            # from (0, 0): a share that did not wait at all rises at 0, then each wait
            xs, ys = np.concatenate(([0.0], values)), np.concatenate(([0.0], fractions))
            said = f"{queue}: {len(values):,} jobs, {100 * zero:.0f}% waited 0 s, {100 * short:.0f}% under 1 s"
            ax.step(xs, ys, where="post", linewidth=0.9, label=said)
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xlim(left=0)
        ax.set_ylim(0, 1.02)
        ax.set_title(result.name, fontsize=9)
        ax.set_xlabel("queue wait (s; linear to 1 s, log after)", fontsize=8)
        ax.set_ylabel("fraction of jobs", fontsize=8)
        if by_queue:
            ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return (
        "Queue waits per queue",
        "The distribution of how long jobs waited before they ran (and after each eviction), per queue and "
        "scenario; a queue whose jobs never waited rises straight to 1 at 0 s.",
        _png(fig),
    )


def _billed_node_seconds(result: RunResult) -> float:
    sim = result.simulation
    return sum(sim.meter[f"billed_nodes/{pool.name}"].integral(sim.end) for pool in sim.pools.values() if pool.is_cloud)


def _cloud_figure(results: list[RunResult], without: list[str]) -> tuple[str, str, str]:
    """Per scenario that billed cloud nodes: nodes billed against the nodes' worth of GPUs jobs held (the gap
    is paid for and idle), and the spend so far on the right axis; `without` billed none."""
    fig, axes = _panels(len(results), height=2.5)
    for ax, result in zip(axes, results, strict=False):
        sim, end = result.simulation, result.simulation.end
        spend_ax = ax.twinx()
        titles = []
        for pool in sim.pools.values():
            if not pool.is_cloud:
                continue
            x, billed = _step(sim.meter[f"billed_nodes/{pool.name}"], end)
            _, gpus = _step(sim.meter[f"pool_gpus/{pool.name}"], end)
            used = gpus / max(pool.gpus_per_node, 1)
            ax.plot(x, billed, linewidth=0.8, label=f"{pool.name}: nodes billed")
            ax.fill_between(x, used, billed, where=billed > used, step="pre", alpha=0.25, label="billed, idle")
            ax.plot(x, used, linewidth=0.8, label=f"{pool.name}: used (GPUs held / {pool.gpus_per_node})")
            spend = np.cumsum(billed) * (end / len(billed)) * pool.spec.pricing.per_hour / 3600
            spend_ax.plot(x, spend, color="black", linestyle="--", linewidth=0.7, label=f"{pool.name}: spend")
            billed_h = sim.meter[f"billed_nodes/{pool.name}"].integral(end) / 3600
            used_h = sim.meter[f"pool_gpus/{pool.name}"].integral(end) / 3600 / max(pool.gpus_per_node, 1)
            idle = 100 * (1 - used_h / billed_h) if billed_h else 0.0
            titles.append(f"{pool.name}: {billed_h:,.0f} node-h billed, {used_h:,.0f} used ({idle:.0f}% idle)")
        ax.set_title(f"{result.name} — " + "; ".join(titles), fontsize=8)
        ax.set_ylabel("nodes", fontsize=8)
        spend_ax.set_ylabel(f"spend ({CURRENCY})", fontsize=8)
        ax.set_xlabel("day of the run", fontsize=8)
        handles = ax.get_legend_handles_labels()
        more = spend_ax.get_legend_handles_labels()
        ax.legend(handles[0] + more[0], handles[1] + more[1], fontsize=7, loc="upper left")
    fig.tight_layout()
    return (
        "Cloud capacity: billed vs used, and spend",
        "Cloud nodes billed (from the autoscaler's request until they leave) against the nodes' worth of GPUs "
        f"jobs held on them; the shaded gap is capacity paid for and idle. Dashed: the spend so far ({CURRENCY})."
        + (f" No cloud node was billed in {', '.join(without)}." if without else ""),
        _png(fig),
    )


def _data_figures(results: list[RunResult]) -> list[tuple[str, str, str]]:
    """Per scenario with data gravity: its links' throughput over time (outages shaded) and its jobs' prefetch
    delays."""
    shown = []
    for r in results:
        links = [name for name, link in r.summary.get("links", {}).items() if link["transferred_gb"]]
        delays = sorted(r.summary.get("prefetch_delay_by_job", {}).values())
        if links or delays:
            shown.append((r, links, delays))
    if not shown:
        return []
    fig, axes = _panels(2 * len(shown), columns=2, height=2.5)
    for i, (result, links, delays) in enumerate(shown):
        link_ax, delay_ax = axes[2 * i], axes[2 * i + 1]
        sim, end = result.simulation, result.simulation.end
        for name in links:
            x, y = _step(sim.meter[f"link_rate/{name}"], end)
            link_ax.plot(x, y * 8 / 1e9, label=name, linewidth=0.8)
        cut = sim.meter.levels.get("link_cut_clouds")
        if cut is not None:
            start = None
            for t, v in zip(cut.times, cut.values, strict=True):
                if v > 0 and start is None:
                    start = t
                elif v == 0 and start is not None:
                    link_ax.axvspan(start / DAY, t / DAY, color="red", alpha=0.15)
                    start = None
        link_ax.set_title(f"{result.name}: link throughput (outages shaded)", fontsize=8)
        link_ax.set_ylabel("Gbit/s", fontsize=8)
        link_ax.set_xlabel("day of the run", fontsize=8)
        if delays:
            values = np.asarray(delays)
            delay_ax.step(
                np.concatenate(([0.0], values)),
                np.concatenate(([0.0], np.arange(1, len(values) + 1) / len(values))),
                where="post",
                linewidth=0.9,
            )
            delay_ax.set_xscale("symlog", linthresh=1.0)
            delay_ax.set_xlim(left=0)
        delay_ax.set_title(f"{result.name}: prefetch delay, {len(delays)} jobs that waited for data", fontsize=8)
        delay_ax.set_xlabel("seconds (linear to 1 s, log after)", fontsize=8)
        delay_ax.set_ylabel("fraction of those jobs", fontsize=8)
        for ax in (link_ax, delay_ax):
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
    fig.tight_layout()
    return [
        (
            "Data gravity: link throughput and prefetch delays",
            "What crossed each IDC-cloud link, and how long jobs waited for their datasets, per scenario.",
            _png(fig),
        )
    ]


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


#: What each kind of row's values are in, in the HTML report (the terminal table keeps its bare figures).
UNITS = {"num": " GPU-h", "money": ""}
#: Events by kind, for the report's filter: the first kind whose words an event's text holds.
EVENT_KINDS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("spot", "spot interruptions", ("spot interruption", "spot notice", "interrupted")),
    ("budget", "budget actions", ("budget:",)),
    ("scaling", "cloud scaling (HPA)", (": HPA ", " nodes (", "-> ")),
    ("link", "links and prefetch", ("link ", "prefetch", "dataset")),
    ("failed", "failures", ("failed", "abort")),
    ("overflow", "overflow to the cloud", ("overflow",)),
    ("restart", "evictions and restarts", ("evict", "restart", "reclaim", "preempt")),
)
STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;margin:0 auto;padding:1em 2em;
  max-width:1200px;color:#1d2733;line-height:1.4}
h1{font-size:1.5em}h2{margin-top:1.6em;border-bottom:1px solid #d8dee6;padding-bottom:.2em}h3{font-size:1em}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.92em}td,th{border:1px solid #d8dee6;padding:3px 9px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#f3f6f9}
img{max-width:100%;height:auto;display:block}p.note,figcaption{color:#5b6776;font-size:.92em}
pre,li{white-space:pre-wrap;overflow-wrap:anywhere}pre{background:#f7f9fb;padding:.6em;font-size:.85em}
dl.scenarios dt{font-weight:600}dl.scenarios dd{margin:0 0 .5em 1.5em}
.filters{position:sticky;top:0;background:#fff;padding:.5em 0;border-bottom:1px solid #d8dee6;display:flex;
  flex-wrap:wrap;gap:.5em 1.5em;align-items:center}
.filters input{width:22em;max-width:100%}
details{margin:.4em 0;border:1px solid #d8dee6;border-radius:4px;padding:.3em .8em}
summary{cursor:pointer;font-weight:600}
ol.events{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.82em;padding-left:4.5em;max-height:36em;
  overflow-y:auto}
ol.events li[hidden]{display:none}
"""
SCRIPT = """
const text = document.getElementById("event-filter"), kind = document.getElementById("event-kind");
function filterEvents() {
  const words = text.value.trim().toLowerCase(), wanted = kind.value;
  let shown = 0;
  for (const box of document.querySelectorAll("details.run-events")) {
    let here = 0;
    for (const li of box.querySelectorAll("li")) {
      const ok = (!wanted || li.dataset.kind === wanted) && (!words || li.textContent.toLowerCase().includes(words));
      li.hidden = !ok;
      if (ok) here++;
    }
    box.querySelector(".shown").textContent = here;
    if (words || wanted) box.open = here > 0;
    shown += here;
  }
  document.getElementById("event-count").textContent = shown;
}
text.addEventListener("input", filterEvents);
kind.addEventListener("change", filterEvents);
"""


def _html_value(value: Any, kind: str) -> str:
    shown = _fmt(value, kind)
    if kind == "money":
        return f"{CURRENCY}{shown}"
    return shown + UNITS.get(kind, "")


def event_kind(text: str) -> str:
    """The kind an event's text belongs to (EVENT_KINDS), "other" for the rest."""
    for kind, _, words in EVENT_KINDS:
        if any(word in text for word in words):
            return kind
    return "other"


def _event_list(events: list[tuple[float, str]]) -> str:
    return "".join(
        f"<li data-kind='{event_kind(text)}' value='{i}'>{t / 3600:9.2f} h  {html.escape(text)}</li>"
        for i, (t, text) in enumerate(events, 1)
    )


def write_html(results: list[RunResult], out: Path, title: str, descriptions: Mapping[str, str] | None = None) -> Path:
    """The report: the scenarios and what they are, the figures side by side in a table (with units), one
    panel per scenario where their lines would overlap, notable events, the HPAs, and every event, collapsed
    per scenario and filterable. It fits a 1,280 px window: nothing scrolls sideways."""
    path = out / "report.html"
    descriptions = descriptions or {}
    scenarios = "".join(
        f"<dt>{html.escape(r.name)}</dt><dd>{html.escape(descriptions.get(r.name) or 'no description')}"
        f" ({r.summary.get('simulated_days', 0):g} days simulated)</dd>"
        for r in results
    )
    head = "".join(f"<th>{html.escape(r.name)}</th>" for r in results)
    rows = "".join(
        f"<tr><td>{html.escape(label)}</td>"
        + "".join(f"<td>{_html_value(r.summary[key], kind)}</td>" for r in results)
        + "</tr>"
        for label, key, kind in ROWS
    )
    figures = "".join(
        f"<figure><h2>{html.escape(name)}</h2><figcaption>{html.escape(about)}</figcaption>"
        f"<img src='data:image/png;base64,{data}' alt='{html.escape(name)}'></figure>"
        for name, about, data in _figures(results)
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
        f"<details><summary>{html.escape(r.name)}: {len(r.simulation.outage_events)} events</summary>"
        f"<ol class='events'>{_event_list(r.simulation.outage_events)}</ol></details>"
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
    total = sum(len(r.simulation.events) for r in results)
    options = "".join(f"<option value='{kind}'>{html.escape(label)}</option>" for kind, label, _ in EVENT_KINDS)
    events = "".join(
        f"<details class='run-events' data-scenario='{html.escape(r.name)}'><summary>{html.escape(r.name)}: "
        f"<span class='shown'>{len(r.simulation.events)}</span> of {len(r.simulation.events)} events</summary>"
        f"<ol class='events'>{_event_list(r.simulation.events)}</ol></details>"
        for r in results
    )
    path.write_text(
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><h2>Scenarios</h2><dl class='scenarios'>{scenarios}</dl>"
        f"<p class='note'>Money is in the NodePools' price currency ({CURRENCY}: US dollars in the examples); "
        "times in simulated hours from the start of the run; GPU-h are GPU-hours.</p>"
        f"<div class='scroll'><table><tr><th></th>{head}</tr>{rows}</table></div>{figures}"
        f"<h2>Spot interruptions, jobs failed for good, budget actions, warnings</h2>{notable}"
        f"{outages}{hpas}<h2>Events</h2>"
        "<div class='filters'><label>Filter <input id='event-filter' type='search' "
        "placeholder='words in the event, e.g. interruption'></label>"
        f"<label>Kind <select id='event-kind'><option value=''>all</option>{options}"
        "<option value='other'>other</option></select></label>"
        f"<span><span id='event-count'>{total}</span> of {total} events</span></div>"
        f"{events}<script>{SCRIPT}</script></body></html>"
    )
    return path
