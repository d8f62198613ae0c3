"""What a sweep writes: the points as a table (`sweep.csv`, `sweep.parquet` when pyarrow is installed,
`sweep.json` with the answer and the fronts) and an HTML page with its figures inline (matplotlib, no
external fetch): monthly cost against p95 wait and against GPU-hours waited, the Pareto fronts marked,
and the cheapest point that meets the targets.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tidegate.sweep.analysis import METRICS, Target, cheapest, pareto_front, row
from tidegate.sweep.grid import short_name
from tidegate.sweep.plan import Plan
from tidegate.sweep.run import SweepRun

#: The two views of the trade-off: (y metric, its label, how it is shown).
FRONTS = (("wait_p95", "p95 wait", "dur"), ("queued_gpu_hours", "GPU-hours waited", "num"))


@dataclass(slots=True)
class Table:
    """Every point as a row (parameters, status, figures, front and target flags), and the answer."""

    rows: list[dict[str, Any]]
    parameters: list[str]
    columns: list[str]
    answer: int | None
    fronts: dict[str, list[int]]
    targets: list[Target]


def table(plan: Plan, run: SweepRun) -> Table:
    """The sweep's rows in point order; the fronts and the answer are over the points that ran."""
    parameters = [d.name for d in plan.sweep.dimensions]
    rows: list[dict[str, Any]] = []
    for outcome in run.outcomes:
        point = outcome.planned.point
        entry: dict[str, Any] = {"point": point.index, **point.shown}
        if outcome.summary is not None:
            entry["status"] = "found" if outcome.resumed else "ran"
            entry |= row(outcome.summary, outcome.planned.idc_gpus, outcome.run_seconds, plan.idc_gpu_month_price)
        else:
            entry["status"] = "failed"
        entry["error"] = outcome.error
        entry["key"] = outcome.planned.key
        rows.append(entry)
    ok = [i for i, r in enumerate(rows) if r["status"] != "failed"]
    ran = [rows[i] for i in ok]
    fronts = {y: [ok[i] for i in pareto_front(ran, "monthly_cost", y)] for y, _, _ in FRONTS}
    best = cheapest(ran, plan.targets)
    answer = ok[best] if best is not None else None
    for i, entry in enumerate(rows):
        if entry["status"] == "failed":
            continue
        for y, _, _ in FRONTS:
            entry[f"front_{y}"] = i in fronts[y]
        entry["meets_targets"] = all(t.met(entry) for t in plan.targets)
        entry["cheapest_meeting_targets"] = i == answer
    queue_metrics = sorted({k for r in rows for k in r if k.startswith("wait_p") and "." in k})
    flags = [f"front_{y}" for y, _, _ in FRONTS] + ["meets_targets", "cheapest_meeting_targets"]
    columns = ["point", *parameters, "status", *METRICS, *queue_metrics, *flags, "error", "key"]
    return Table(rows, parameters, columns, answer, fronts, list(plan.targets))


def write_table(result: Table, out: Path) -> list[Path]:
    """sweep.csv, and sweep.parquet when pyarrow is installed: one row a point, the same columns."""
    paths = [out / "sweep.csv"]
    with paths[0].open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=result.columns, extrasaction="ignore")
        writer.writeheader()
        for entry in result.rows:
            writer.writerow({c: entry.get(c, "") for c in result.columns})
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return paths
    data = {c: [_cell(entry.get(c)) for entry in result.rows] for c in result.columns}
    paths.append(out / "sweep.parquet")
    pq.write_table(pa.table(data), paths[1])
    return paths


def _cell(value: Any) -> Any:
    """A Parquet column holds one type: parameters of mixed types (a budget mapping, a number) as text."""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return value


def write_json(plan: Plan, result: Table, out: Path) -> Path:
    """sweep.json: what ran, the targets, the answer, the fronts (as point numbers) and every row."""
    answer = result.rows[result.answer] if result.answer is not None else None
    document = {
        "simulation": plan.simulation,
        "scenario": plan.scenario,
        "sample": plan.sweep.sample,
        "idc_gpu_month_price": plan.idc_gpu_month_price,
        "targets": [str(t) for t in result.targets],
        "cheapest_meeting_targets": answer,
        "fronts": {y: [result.rows[i]["point"] for i in idx] for y, idx in result.fronts.items()},
        "points": result.rows,
    }
    path = out / "sweep.json"
    path.write_text(json.dumps(document, indent=1, default=str) + "\n")
    return path


def shown(value: Any, how: str) -> str:
    """A figure as the tables show it: durations in s/min/h, money and counts with separators."""
    if value is None or value == "" or (isinstance(value, float) and math.isnan(value)):
        return ""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return str(value)
    if how == "dur":
        return f"{value:.0f} s" if value < 120 else f"{value / 60:.1f} min" if value < 7200 else f"{value / 3600:.1f} h"
    if how == "money":
        return f"{value:,.0f}"
    if how == "pct":
        return f"{value:.1%}"
    return f"{value:,.1f}" if isinstance(value, float) and not value.is_integer() else f"{value:,.0f}"


def answer_text(result: Table) -> str:
    """One sentence: the cheapest point meeting the targets, or why there is none."""
    if not result.targets:
        return "No target given (--target 'wait_p95<=900'): the fronts below show the trade-off."
    targets = " and ".join(str(t) for t in result.targets)
    if result.answer is None:
        return f"No point meets {targets}."
    best = result.rows[result.answer]
    values = ", ".join(f"{p} = {best[p]}" for p in result.parameters)
    return (
        f"The cheapest point meeting {targets} is point {best['point']} ({values}): "
        f"{shown(best['monthly_cost'], 'money')} a month ({shown(best['idc_monthly_cost'], 'money')} IDC, "
        f"{shown(best['cloud_monthly_cost'], 'money')} cloud), p95 wait {shown(best['wait_p95'], 'dur')}, "
        f"{shown(best['queued_gpu_hours'], 'num')} GPU-hours waited."
    )


def figure(result: Table, y: str, label: str, how: str) -> bytes:
    """Monthly cost against one waiting figure: every point, the front as a line, the answer starred (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [(i, r) for i, r in enumerate(result.rows) if r["status"] != "failed"]
    scale, unit = (3600.0, "h") if how == "dur" else (1.0, "")
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=110)
    xs = [r["monthly_cost"] / 1000 for _, r in ok]
    ys = [r[y] / scale for _, r in ok]
    ax.scatter(xs, ys, s=22, color="#8aa4c8", label="points", zorder=2)
    front = result.fronts[y]
    for (i, r), px, py in zip(ok, xs, ys, strict=True):
        color = "#c0392b" if i in front else "#5d6d7e"
        ax.annotate(str(r["point"]), (px, py), textcoords="offset points", xytext=(4, 3), fontsize=7, color=color)
    if front:
        fx = [result.rows[i]["monthly_cost"] / 1000 for i in front]
        fy = [result.rows[i][y] / scale for i in front]
        ax.step(fx, fy, where="post", color="#c0392b", lw=1.2, zorder=3)
        ax.scatter(fx, fy, s=34, color="#c0392b", label="Pareto front", zorder=4)
    if ys and min(ys) > 0 and max(ys) / min(ys) > 100:  # waits that span decades: a log scale shows them all
        ax.set_yscale("log")
    for target in result.targets:
        if target.metric == y:
            ax.axhline(target.value / scale, color="#27ae60", ls="--", lw=1, label=f"target {target}")
    if result.answer is not None:
        best = result.rows[result.answer]
        ax.scatter(
            [best["monthly_cost"] / 1000], [best[y] / scale], marker="*", s=220, color="#f1c40f",
            edgecolors="black", zorder=5, label=f"cheapest meeting the targets (point {best['point']})",
        )  # fmt: skip
    ax.set_xlabel("monthly cost, IDC + cloud (thousands)")
    ax.set_ylabel(f"{label}" + (f" ({unit})" if unit else ""))
    ax.set_title(f"monthly cost against {label}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


HTML_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("monthly_cost", "monthly cost", "money"),
    ("idc_monthly_cost", "IDC", "money"),
    ("cloud_monthly_cost", "cloud", "money"),
    ("wait_p50", "wait p50", "dur"),
    ("wait_p95", "wait p95", "dur"),
    ("queued_gpu_hours", "GPU-h waited", "num"),
    ("local_gpu_utilization", "IDC utilisation", "pct"),
    ("cloud_gpu_hours", "cloud GPU-h", "num"),
    ("cloud_peak_nodes", "cloud peak nodes", "num"),
    ("jobs_unfinished", "unfinished", "num"),
    ("jobs_failed", "failed", "num"),
)


def write_html(plan: Plan, result: Table, out: Path, command: str) -> Path:
    """sweep.html: the answer, the two figures (also written as front-<metric>.png), every point (cheapest
    first) and the points that failed."""
    esc = html.escape
    ok = sorted((r for r in result.rows if r["status"] != "failed"), key=lambda r: (r["monthly_cost"], r["point"]))
    failed = [r for r in result.rows if r["status"] == "failed"]
    images = []
    for y, label, how in FRONTS if ok else ():
        png = figure(result, y, label, how)
        (out / f"front-{y}.png").write_bytes(png)
        uri = "data:image/png;base64," + base64.b64encode(png).decode()
        images.append(f'<img alt="monthly cost against {esc(label)}" src="{uri}">')
    figures = "".join(images)
    head = "".join(f'<th title="{esc(p)}">{esc(short_name(p))}</th>' for p in result.parameters)
    head += "".join(f"<th>{esc(label)}</th>" for _, label, _ in HTML_COLUMNS) + "<th>front</th><th>targets</th>"
    lines = []
    for r in ok:
        marks = " ".join(m for y, m in (("wait_p95", "p95"), ("queued_gpu_hours", "GPU-h")) if r.get(f"front_{y}"))
        style = ' class="answer"' if r.get("cheapest_meeting_targets") else ""
        cells = "".join(f"<td>{esc(str(r.get(p, '')))}</td>" for p in result.parameters)
        cells += "".join(f'<td class="n">{esc(shown(r.get(c), how))}</td>' for c, _, how in HTML_COLUMNS)
        met = "met" if r.get("meets_targets") and result.targets else ""
        lines.append(f"<tr{style}><td>{r['point']}</td>{cells}<td>{marks}</td><td>{met}</td></tr>")
    failures = "".join(
        f"<li>point {r['point']} ({esc(', '.join(f'{p}={r.get(p)}' for p in result.parameters))}): "
        f"<code>{esc(r['error'])}</code></li>"
        for r in failed
    )
    price = shown(plan.idc_gpu_month_price, "money")
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>tidegate sweep: {esc(plan.sweep.name)}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; }} td, th {{ border: 1px solid #ccc; padding: 3px 7px; }}
td.n {{ text-align: right; }} tr.answer {{ background: #fdf3c4; font-weight: bold; }}
img {{ max-width: 48%; margin: 0 1% 1em 0; }} code {{ font-size: 12px; }}
</style></head><body>
<h1>Sweep {esc(plan.sweep.name)}: {len(result.rows)} points of scenario {esc(plan.scenario)}</h1>
<p><code>{esc(command)}</code></p>
<p><strong>{esc(answer_text(result))}</strong></p>
<p>Monthly cost: the owned IDC GPUs at {price} a GPU-month, plus the run's cloud bill scaled to a 730-hour month.
A point on a Pareto front (red) has no other point that is at most as expensive and waits at most as much, one of
them strictly; sample: {esc(plan.sweep.sample)}.</p>
{figures}
<h2>Points, cheapest first</h2>
<table><tr><th>point</th>{head}</tr>
{"".join(lines)}
</table>
{f"<h2>Points that failed ({len(failed)})</h2><ul>{failures}</ul>" if failed else ""}
</body></html>
"""
    path = out / "sweep.html"
    path.write_text(page)
    return path
