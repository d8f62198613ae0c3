"""A cloud instance as a virtual Node of the IDC cluster, as a Virtual Kubelet registers one.

The node is the pool's node (`tidegate.fleet.pool.Pool.node`: `volcano.sh/node-type: cloud-spot` or
`cloud-ondemand`, region, GPU product, `tidegate.io/pool`, `tidegate.io/cluster`, the
`latency.ms.local-idc` annotation and the `cloud.provider=<provider>:NoSchedule` taint) with what the cloud
Node says of itself: its capacity and allocatable, instance type, capacity type, zone, OS and architecture,
and its Ready condition. An interruption notice on the cloud Node (the taints below) is copied onto it, so
the IDC's scheduler places nothing new there, and the time it was first seen kept as an annotation, so a
restarted member reports the same notice. The member owns the taints it writes (the cloud taint and the
notice taints); others' taints stay, but for the not-ready taints a node lifecycle controller would have
lifted from a Ready node.
"""

from __future__ import annotations

import calendar
import time
from typing import Any

from tidegate.fleet.pool import CLOUD_TAINT_KEY, CLUSTER_LABEL, Pool
from tidegate.kube.nodeclaims import CAPACITY_TYPE_LABEL, INSTANCE_TYPE_LABEL
from tidegate.model.resources import GPU_MEMORY, GPU_NUMBER, NVIDIA_GPU

#: AWS node-termination-handler's taint on a node whose spot instance got its two-minute interruption warning
#: (value: the event's id; effect NoSchedule by default).
NTH_SPOT_TAINT = "aws-node-termination-handler/spot-itn"
#: Karpenter's taint on a node it is about to disrupt (spot interruption, consolidation, drift), NoSchedule.
KARPENTER_DISRUPTED_TAINT = "karpenter.sh/disrupted"
NOTICE_TAINTS = (NTH_SPOT_TAINT, KARPENTER_DISRUPTED_TAINT)
#: Virtual Kubelet's label on its nodes; with `tidegate.io/cluster` it selects a member's virtual nodes.
VIRTUAL_LABEL, VIRTUAL = "type", "virtual-kubelet"
#: When the member first saw the instance's interruption notice (RFC 3339).
NOTICED_ANNOTATION = "tidegate.io/interruption-noticed-at"
#: `release` was asked for the instance (its NodeClaim is deleted once the cloud answers).
RELEASING_ANNOTATION = "tidegate.io/releasing"
#: The taints a node lifecycle controller puts on a node that is not Ready, and lifts once it is.
NOT_READY_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
#: Labels of the cloud Node that the virtual node carries too.
COPIED_LABELS = (
    INSTANCE_TYPE_LABEL,
    CAPACITY_TYPE_LABEL,
    "topology.kubernetes.io/zone",
    "kubernetes.io/os",
    "kubernetes.io/arch",
)
#: The Ready condition's reason while the cloud's API server cannot be reached.
CLOUD_UNREACHABLE = "CloudUnreachable"


def selector(member: str) -> str:
    """The label selector of the member's virtual nodes in the IDC cluster."""
    return f"{VIRTUAL_LABEL}={VIRTUAL},{CLUSTER_LABEL}={member}"


def stamp(seconds: float) -> str:
    """RFC 3339, as Kubernetes writes times."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def seconds(text: str) -> float | None:
    """An RFC 3339 time (as `stamp` writes it) in seconds, or None when it is not one."""
    try:
        return float(calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ")))
    except (TypeError, ValueError):
        return None


def notice_taints(cloud_node: dict[str, Any]) -> list[dict[str, str]]:
    """The interruption notices on a cloud Node, as taints (key, value, effect)."""
    return [
        {key: str(taint[key]) for key in ("key", "value", "effect") if taint.get(key) is not None}
        for taint in (cloud_node.get("spec") or {}).get("taints") or ()
        if isinstance(taint, dict) and taint.get("key") in NOTICE_TAINTS
    ]


def virtual_node(
    pool: Pool, name: str, cloud_node: dict[str, Any], noticed_at: float | None, version: str
) -> dict[str, Any]:
    """The virtual node the IDC should have for the instance `name` of the pool on `cloud_node`: labels,
    annotations, the member's taints (`spec.taints`) and status (resources, node info; no conditions)."""
    node = pool.node(name)
    cloud_meta, cloud_status = cloud_node.get("metadata") or {}, cloud_node.get("status") or {}
    cloud_labels = cloud_meta.get("labels") or {}
    labels = {
        **node.labels,
        **{key: str(cloud_labels[key]) for key in COPIED_LABELS if key in cloud_labels},
        VIRTUAL_LABEL: VIRTUAL,
        "kubernetes.io/role": "agent",
    }
    annotations = dict(node.annotations)
    if noticed_at is not None:
        annotations[NOTICED_ANNOTATION] = stamp(noticed_at)
    taints = [
        {"key": taint.key, "value": taint.value, "effect": taint.effect.value} for taint in node.taints
    ] + notice_taints(cloud_node)
    offered = node.allocatable.to_dict()
    info = dict(cloud_status.get("nodeInfo") or {})
    info["kubeletVersion"] = f"tidegate-cloud-member/{version}"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels, "annotations": annotations},
        "spec": {"taints": taints},
        "status": {
            "capacity": _resources(offered, cloud_status.get("capacity"), pool),
            "allocatable": _resources(offered, cloud_status.get("allocatable"), pool),
            "nodeInfo": info,
        },
    }


def _resources(pool_offers: dict[str, str], cloud: Any, pool: Pool) -> dict[str, str]:
    """The cloud Node's resource list, with what the pool says of resources it does not list (a GPU's
    memory and count as Volcano's GPU sharing reads them, derived from the cards the Node has)."""
    listed = {str(key): str(value) for key, value in (cloud or {}).items()} if isinstance(cloud, dict) else {}
    merged = {**pool_offers, **listed}
    cards = listed.get(NVIDIA_GPU)
    if cards is not None and cards.isdigit() and GPU_NUMBER not in listed:
        merged[GPU_NUMBER] = cards
        if pool.spec.gpu.memory_mib and GPU_MEMORY not in listed:
            merged[GPU_MEMORY] = str(int(cards) * pool.spec.gpu.memory_mib)
    return merged


def ready_condition(status: str, reason: str, message: str, now: float, since: str) -> dict[str, str]:
    """The virtual node's Ready condition, heartbeated `now`; `since` is when its status last changed."""
    return {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "message": message,
        "lastHeartbeatTime": stamp(now),
        "lastTransitionTime": since,
    }


def merged_taints(current: list[dict[str, Any]], ours: list[dict[str, str]], ready: bool) -> list[dict[str, Any]]:
    """The node's taints: others' as they are (the not-ready taints lifted from a Ready node), then ours."""
    owned = {CLOUD_TAINT_KEY, *NOTICE_TAINTS}
    dropped = owned | (set(NOT_READY_TAINTS) if ready else set())
    return [taint for taint in current if taint.get("key") not in dropped] + ours


def same_taints(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    """Whether two taint lists say the same (timeAdded aside), in any order."""

    def key(taint: dict[str, Any]) -> tuple[str, str, str]:
        return str(taint.get("key", "")), str(taint.get("value", "") or ""), str(taint.get("effect", ""))

    return sorted(map(key, a)) == sorted(map(key, b))
