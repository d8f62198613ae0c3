"""Vector helpers shared by the queue-quota plugins (proportion, capacity)."""

from __future__ import annotations

import numpy as np

from tidegate.model.objects import Queue
from tidegate.model.quantity import format_canonical
from tidegate.scheduler.node_table import FloatArray, IntArray, ResourceIndex

INF = float("inf")


def as_float(vector: IntArray) -> FloatArray:
    out: FloatArray = vector.astype(np.float64)
    return out


def capability_cap(index: ResourceIndex, queue: Queue) -> FloatArray:
    """The queue's spec.capability as a hard cap per resource column, INF where it sets none.

    Volcano (proportion.go and capacity.go: `attr.capability = api.NewResource(capability)`, cpu and
    memory <= 0 raised to MaxFloat64, then `realCapability.MinDimensionResource(capability, Infinity)`):
    a declared `nvidia.com/gpu: "0"` caps GPUs at 0, a cpu or memory of 0 is unlimited, and a resource
    the list does not name is unlimited. The rule itself is Queue.capability_limits.
    """
    cap = np.full(len(index), INF)
    for name, limit in queue.capability_limits().items():
        col = index.col.get(name)
        if col is not None:
            cap[col] = limit
    return cap


def amount(index: ResourceIndex, col: int, value: float) -> str:
    name = index.names[col]
    if value == INF:
        return "unlimited"
    return format_canonical(name, int(value))
