"""What a sweep's points say: each point's figures as one row (with its monthly cost, owned IDC capacity
included), the targets a point must meet, the cheapest point that meets them, and the Pareto fronts of
cost against waiting. Pure functions of the rows: tested on hand-made figures.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: The month costs are given for: 730 hours, the month cloud providers price reservations by.
MONTH_HOURS = 730.0

#: Figures of a point's summary a row keeps (under the same names; waits in seconds).
SUMMARY_METRICS = (
    "local_gpu_utilization",
    "queued_gpu_hours",
    "cloud_gpu_hours",
    "cloud_cost",
    "cloud_peak_nodes",
    "jobs_completed",
    "jobs_unfinished",
    "jobs_failed",
    "jobs_overflowed",
    "restarts",
    "lost_gpu_hours",
    "spot_interruptions",
    "data_idle_gpu_hours",
    "simulated_days",
)
#: Every row's metrics, in table order.
METRICS = (
    "monthly_cost",
    "idc_monthly_cost",
    "cloud_monthly_cost",
    "idc_gpus",
    "wait_p50",
    "wait_p95",
    *SUMMARY_METRICS,
)
#: The comparisons a target may make.
COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
    "==": operator.eq,
}
_TARGET = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*(<=|>=|==|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


@dataclass(frozen=True, slots=True)
class Target:
    """`metric <op> value`, e.g. wait_p95<=900 (waits in seconds, costs a month)."""

    metric: str
    op: str
    value: float

    def __str__(self) -> str:
        return f"{self.metric}{self.op}{self.value:g}"

    def met(self, row: dict[str, Any]) -> bool:
        figure = row.get(self.metric)
        if not isinstance(figure, int | float) or math.isnan(figure):
            return False
        return COMPARISONS[self.op](figure, self.value)


def known_metrics(queues: Iterable[str]) -> list[str]:
    """The metrics a target may name: every row metric, and each queue's wait_p50.<queue> and wait_p95.<queue>."""
    per_queue = [f"wait_{p}.{q}" for q in sorted(queues) for p in ("p50", "p95")]
    return [*METRICS, *per_queue]


def parse_target(text: str, known: Sequence[str]) -> Target:
    """A target such as 'wait_p95<=900'; ValueError naming the known metrics for an unknown one."""
    match = _TARGET.match(text)
    if match is None:
        raise ValueError(f"target {text!r}: write metric<=value (or <, >=, >, ==), e.g. wait_p95<=900")
    metric, op, value = match.groups()
    if metric not in known:
        raise ValueError(f"target {text!r}: unknown metric {metric!r}; the metrics are {', '.join(known)}")
    return Target(metric, op, float(value))


def row(
    summary: dict[str, Any], idc_gpus: int, run_seconds: float, idc_gpu_month_price: float
) -> dict[str, float | int]:
    """A point's figures: its summary's, its waits without the `_s`, and its monthly cost: the owned IDC GPUs
    at the price a GPU-month, plus the run's cloud bill scaled to a 730-hour month."""
    hours = run_seconds / 3600
    cloud_month = summary["cloud_cost"] * MONTH_HOURS / hours if hours > 0 else 0.0
    idc_month = idc_gpus * idc_gpu_month_price
    out: dict[str, float | int] = {
        "monthly_cost": round(idc_month + cloud_month, 2),
        "idc_monthly_cost": round(idc_month, 2),
        "cloud_monthly_cost": round(cloud_month, 2),
        "idc_gpus": idc_gpus,
        "wait_p50": summary["wait_p50_s"],
        "wait_p95": summary["wait_p95_s"],
    }
    out |= {name: summary[name] for name in SUMMARY_METRICS}
    for queue, figures in sorted(summary.get("queues", {}).items()):
        out[f"wait_p50.{queue}"] = figures["wait_p50_s"]
        out[f"wait_p95.{queue}"] = figures["wait_p95_s"]
    return out


def pareto_front(rows: Sequence[dict[str, Any]], x: str, y: str) -> list[int]:
    """Indices of the rows no other row beats on both `x` and `y` (both lower is better): a row is left out
    when another is at most as high on both and lower on one. Rows missing either figure are left out."""
    points = [
        (i, float(r[x]), float(r[y]))
        for i, r in enumerate(rows)
        if isinstance(r.get(x), int | float) and isinstance(r.get(y), int | float)
    ]
    front = []
    for i, xi, yi in points:
        beaten = any(xj <= xi and yj <= yi and (xj < xi or yj < yi) for j, xj, yj in points if j != i)
        if not beaten:
            front.append(i)
    return sorted(front, key=lambda i: (float(rows[i][x]), float(rows[i][y])))


def cheapest(rows: Sequence[dict[str, Any]], targets: Sequence[Target]) -> int | None:
    """The index of the cheapest row (monthly_cost) that meets every target; ties go to the lower p95 wait,
    then the earlier point. None when no row meets them."""
    meeting = [i for i, r in enumerate(rows) if all(t.met(r) for t in targets) and "monthly_cost" in r]
    if not meeting:
        return None
    return min(meeting, key=lambda i: (rows[i]["monthly_cost"], rows[i].get("wait_p95", math.inf), i))
