"""Provisioning a cloud instance through the cloud cluster's documented interface: a Karpenter `NodeClaim`
(`karpenter.sh/v1`, cluster-scoped), which the cloud's provisioner turns into a Node.

tidegate asks for one instance of a pool by creating a NodeClaim carrying the pool's requirements (its
instance type, spot or on-demand capacity, the pool's label) and resources, and gives it up by deleting
the claim. The provisioner (Karpenter, or whatever plays it) launches the instance, registers its Node
with the requirements' values as labels, and links the two in the claim's `status.nodeName`; it deletes
the Node when the claim goes. An instance is `ready` once that Node exists and says Ready, `gone` once the
claim (or its Node) does. Why NodeClaims: they are the one provisioning API a Kubernetes cluster commonly
has that asks for one given instance (not a count behind a Deployment), so an instance's name is known
from the moment it is asked for, and a restart finds every instance by listing them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tidegate.fleet.pool import CLUSTER_LABEL, POOL_LABEL, Pool
from tidegate.model.resources import CPU, MEMORY, NVIDIA_GPU

NODECLAIM_GROUP, NODECLAIM_VERSION, NODECLAIM_PLURAL = "karpenter.sh", "v1", "nodeclaims"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "tidegate"
#: The NodeClass a claim names when the member is given none: Karpenter's AWS provider's default.
DEFAULT_NODE_CLASS = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


class InstanceState(StrEnum):
    """Where an instance is in its life, as the fleet sees it."""

    #: Asked for (its NodeClaim exists) and not yet a Ready Node.
    PROVISIONING = "provisioning"
    #: Its Node exists and is Ready: it has a virtual node in the IDC.
    READY = "ready"
    #: Its NodeClaim or its Node went (released, interrupted, or removed by the cloud).
    GONE = "gone"


@dataclass(frozen=True, slots=True)
class Instance:
    """One cloud instance (one NodeClaim); its virtual node in the IDC has the same name."""

    name: str
    pool: str
    state: InstanceState
    #: The cloud Node's name (the provisioner's), once it exists.
    cloud_node: str = ""
    #: When the member first saw an interruption notice on its Node (seconds, the sync's clock), or None.
    noticed_at: float | None = None
    #: Its virtual node is cordoned (by `cordon`, `drain` or `release`).
    cordoned: bool = False
    #: `release` was asked: its NodeClaim is deleted (or will be, once the cloud answers).
    releasing: bool = False
    #: Why it is not ready, as the provisioner says (its NodeClaim's conditions), or the cloud Node's Ready
    #: condition's message.
    message: str = ""


def capacity_type(pool: Pool) -> str:
    """Karpenter's capacity type for the pool: `spot` or `on-demand`."""
    return "spot" if pool.spec.pricing.model == "spot" else "on-demand"


def instance_type(pool: Pool) -> str:
    """The pool's instance type: its label `node.kubernetes.io/instance-type`, else the type its spot
    interruptions are modelled on; "" when it names none (the provisioner then picks)."""
    if pool.spec.labels.get(INSTANCE_TYPE_LABEL):
        return pool.spec.labels[INSTANCE_TYPE_LABEL]
    interruption = pool.spec.interruption
    return interruption.instance_type if interruption is not None else ""


def nodeclaim(pool: Pool, name: str, member: str, node_class: dict[str, str] | None = None) -> dict[str, Any]:
    """The NodeClaim asking for one instance of the pool, named `name`, made by the member `member` (the
    cloud's Cluster name: its label, by which the member finds its claims)."""
    requirements = [
        {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": [capacity_type(pool)]},
        {"key": POOL_LABEL, "operator": "In", "values": [pool.name]},
    ]
    if kind := instance_type(pool):
        requirements.insert(0, {"key": INSTANCE_TYPE_LABEL, "operator": "In", "values": [kind]})
    offered = pool.node(name).allocatable.to_dict()
    requests = {resource: offered[resource] for resource in (CPU, MEMORY, NVIDIA_GPU) if resource in offered}
    return {
        "apiVersion": f"{NODECLAIM_GROUP}/{NODECLAIM_VERSION}",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {POOL_LABEL: pool.name, CLUSTER_LABEL: member, MANAGED_BY_LABEL: MANAGED_BY},
        },
        "spec": {
            "requirements": requirements,
            "resources": {"requests": requests},
            "nodeClassRef": dict(node_class or DEFAULT_NODE_CLASS),
        },
    }


def selector(member: str) -> str:
    """The label selector of the member's NodeClaims in the cloud cluster."""
    return f"{MANAGED_BY_LABEL}={MANAGED_BY},{CLUSTER_LABEL}={member}"


def claimed_node(claim: dict[str, Any]) -> str:
    """The Node the provisioner linked to the claim (`status.nodeName`), or ""."""
    return str((claim.get("status") or {}).get("nodeName") or "")


def claim_message(claim: dict[str, Any]) -> str:
    """What the claim's conditions say is wrong (a False condition's message), or ""."""
    for condition in (claim.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("status") == "False" and condition.get("message"):
            return f"{condition.get('type')}: {condition['message']}"
    return ""


def node_ready(node: dict[str, Any]) -> tuple[str, str, str]:
    """A Node's Ready condition: its status (True, False, Unknown; "Unknown" without one), reason, message."""
    for condition in (node.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return (
                str(condition.get("status", "Unknown")),
                str(condition.get("reason", "")),
                str(condition.get("message", "")),
            )
    return "Unknown", "", ""
