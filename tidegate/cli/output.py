"""Rendering scheduling results as a rich table, JSON or YAML, and problems on standard error."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import yaml
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tidegate.model.manifests import gpu_index
from tidegate.scheduler.snapshot import Decisions


def decisions_document(decisions: Decisions) -> dict[str, Any]:
    """The stable machine-readable shape: bindings, evictions, pipelined, pending, podgroups.

    `gpu_index` is written like Volcano's volcano.sh/gpu-index annotation: "0", "0,1,2,3", or null.
    """
    return {
        "bindings": [{"pod": b.pod, "node": b.node, "gpu_index": gpu_index(b.gpu_indices)} for b in decisions.binds],
        "evictions": [{"pod": e.pod, "node": e.node, "reason": e.reason} for e in decisions.evictions],
        "pipelined": [
            {"pod": p.pod, "node": p.node, "gpu_index": gpu_index(p.gpu_indices)} for p in decisions.pipelined
        ],
        "pending": [{"job": p.job, "queue": p.queue, "reason": p.reason} for p in decisions.pending],
        "podgroups": [
            {"podgroup": g.group, "queue": g.queue, "phase": g.phase.value, "reason": g.reason}
            for g in decisions.groups
        ],
    }


def render(decisions: Decisions, fmt: str, console: Console) -> None:
    if fmt == "json":
        console.out(json.dumps(decisions_document(decisions), indent=2), highlight=False)
        return
    if fmt == "yaml":
        console.out(yaml.safe_dump(decisions_document(decisions), sort_keys=False), highlight=False)
        return
    binds = Table(title=f"Placements ({len(decisions.binds)})")
    for column in ("pod", "node", "GPU cards"):
        binds.add_column(column)
    for b in decisions.binds:
        binds.add_row(b.pod, b.node, gpu_index(b.gpu_indices) or "")
    console.print(binds)
    if decisions.evictions:
        evicted = Table(title=f"Evictions ({len(decisions.evictions)})")
        for column in ("pod", "node", "reason"):
            evicted.add_column(column)
        for e in decisions.evictions:
            evicted.add_row(e.pod, e.node, e.reason)
        console.print(evicted)
    if decisions.pipelined:
        waiting = Table(title=f"Pipelined ({len(decisions.pipelined)})")
        for column in ("pod", "node", "GPU cards held"):
            waiting.add_column(column)
        for p in decisions.pipelined:
            waiting.add_row(p.pod, p.node, gpu_index(p.gpu_indices) or "")
        console.print(waiting)
    pending = Table(title=f"Pending jobs ({len(decisions.pending)})")
    for column in ("job", "queue", "reason"):
        pending.add_column(column)
    for job in decisions.pending:
        pending.add_row(job.job, job.queue, job.reason)
    console.print(pending)


def warn(err: Console, warnings: Iterable[object]) -> None:
    """Each warning on its own line (a ManifestError names file, document, object and field; its text is not
    markup: a field such as requests[nvidia.com/gpu] is printed as it is)."""
    for warning in warnings:
        err.print(f"[yellow]warning[/]: {escape(str(warning))}", highlight=False)


def fail(err: Console, errors: Iterable[object]) -> None:
    """Each error on its own line; the caller then exits 1."""
    for error in errors:
        err.print(f"[red]error[/]: {escape(str(error))}", highlight=False)
