"""What dashboards and Prometheus show of a session, the same for `tidegate serve` and `tidegate kube`.

Each queue's quota figures as the last cycle left them (`quota_figures`): what it holds and asks, its deserved
share (proportion's water-fill or capacity's spec), its capability, Volcano's share and whether it is
overused; and a node's GPU cards with the pods holding each (`gpu_cards`). Read-only: nothing here changes
the session.

Volcano exports the same queue figures from its proportion and capacity plugins (pkg/scheduler/metrics/queue.go);
`tidegate.prometheus` exports them under its names for `tidegate serve` and `tidegate kube`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tidegate.model.objects import Node, Pod
from tidegate.model.resources import GPU_NUMBER, NVIDIA_GPU, Resources
from tidegate.scheduler.info import QueueInfo
from tidegate.scheduler.node_table import UNLIMITED, FloatArray, IntArray
from tidegate.scheduler.session import Session

#: A queue's deserved share, per session column.
_Deserved = Callable[[QueueInfo], FloatArray]


@dataclass(frozen=True, slots=True)
class QuotaFigures:
    """One queue's figures, in canonical units (millicores, bytes, milli-units of other resources)."""

    queue: str
    weight: int
    #: What its placed pods hold, and what its jobs ask for in all (placed or not).
    allocated: Resources
    request: Resources
    #: Its deserved share now (None: no plugin of the configuration computes one).
    deserved: Resources | None
    #: Its spec's capability (only the resources it names).
    capability: Resources
    #: Volcano's share: the largest allocated/deserved over the resources it deserves (1 when it holds what
    #: it deserves none of); 0 without a deserved share.
    share: float
    #: Its allocation has reached its deserved share on every quota resource (and it holds something).
    overused: bool


def quota_figures(ssn: Session) -> dict[str, QuotaFigures]:
    """Every queue of the session, by name."""
    deserved = _deserved_source(ssn)
    out = {}
    for name, info in ssn.queues.items():
        allocated = _resources(ssn, info.allocated)
        wanted = deserved(info) if deserved is not None else None
        out[name] = QuotaFigures(
            queue=name,
            weight=info.queue.weight,
            allocated=allocated,
            request=_resources(ssn, info.request),
            deserved=None if wanted is None else _resources(ssn, np.rint(wanted).astype(np.int64)),
            capability=info.queue.capability or Resources(),
            share=0.0 if wanted is None else _share(ssn, info, wanted),
            overused=bool(allocated) and ssn.queue_overused_reason(info) is not None,
        )
    return out


def _deserved_source(ssn: Session) -> _Deserved | None:
    """How the configuration's quota plugin says a queue's deserved share (proportion or capacity), if any."""
    for plugin in ssn.plugins:
        of = getattr(plugin, "deserved_of", None)  # proportion: the water-fill of this cycle
        if callable(of):
            return lambda info: np.asarray(of(info), dtype=np.float64)
        table = getattr(plugin, "deserved", None)  # capacity: from the queues' specs
        if isinstance(table, dict):
            width = len(ssn.index)
            return lambda info: np.asarray(table.get(info.name, np.zeros(width)), dtype=np.float64)
    return None


def _share(ssn: Session, info: QueueInfo, deserved: FloatArray) -> float:
    allocated = info.allocated
    result = 0.0
    for col in np.flatnonzero(ssn.quota_mask):
        want, have = float(deserved[col]), float(allocated[col]) if col < len(allocated) else 0.0
        if want > 0:
            result = max(result, have / want)
        elif have > 0:
            result = max(result, 1.0)
    return result


def _resources(ssn: Session, vector: IntArray) -> Resources:
    """A session vector as resources (pods and unlimited columns left out)."""
    names = ssn.index.names
    return Resources(
        {names[i]: int(v) for i, v in enumerate(vector.tolist()) if v and v < UNLIMITED and names[i] != "pods"}
    )


def gpu_cards(node: Node, pods: Iterable[Pod]) -> list[dict[str, Any]]:
    """Each GPU card of the node and the pods holding it. A pod with its cards named (`volcano.sh/gpu-index`:
    GPU slices, or whole cards a GPU plugin chose) is on those; a pod asking whole `nvidia.com/gpu` without
    named cards (the node's device plugin picks them) is shown on the lowest free ones, `"named": false`."""
    count = (
        len(node.gpu_memory_mib) or (node.allocatable.get(NVIDIA_GPU, 0) or node.allocatable.get(GPU_NUMBER, 0)) // 1000
    )
    cards: list[dict[str, Any]] = [{"index": i, "pods": [], "named": True} for i in range(count)]
    unnamed = []
    for pod in sorted(pods, key=lambda p: p.key):
        if pod.gpu_indices:
            for index in pod.gpu_indices:
                if 0 <= index < count:
                    cards[index]["pods"].append(pod.key)
        elif pod.requests.get(NVIDIA_GPU, 0):
            unnamed.append(pod)
    free = (card for card in cards if not card["pods"])
    for pod in unnamed:
        for _ in range(pod.requests[NVIDIA_GPU] // 1000):
            card = next(free, None)
            if card is not None:
                card["pods"].append(pod.key)
                card["named"] = False
    return cards
