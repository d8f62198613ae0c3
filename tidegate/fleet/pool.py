"""Node pools as Kubernetes nodes: IDC servers, and cloud virtual nodes (Virtual-Kubelet style).

A cloud node carries what tidegate's placement relies on: label `volcano.sh/node-type: cloud-spot`
(or `cloud-ondemand`), the region and GPU product labels, the annotation `latency.ms.local-idc`, and
the taint `cloud.provider=<provider>:NoSchedule`. IDC nodes are labelled `volcano.sh/node-type: idc`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tidegate.clock import Timer
from tidegate.fleet.spec import ClusterSpec, NodePoolSpec
from tidegate.model.objects import (
    GPU_PRODUCT_LABEL,
    LATENCY_ANNOTATION,
    NODE_TYPE_LABEL,
    REGION_LABEL,
    Node,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PreferredSchedulingTerm,
    Taint,
    TaintEffect,
    Toleration,
)
from tidegate.model.resources import CPU, GPU_MEMORY, GPU_NUMBER, MEMORY, NVIDIA_GPU, PODS, Resources

IDC = "idc"
POOL_LABEL = "tidegate.io/pool"
CLUSTER_LABEL = "tidegate.io/cluster"
CLOUD_TAINT_KEY = "cloud.provider"
#: Pods tolerating every cloud provider's taint (what burstable jobs carry).
CLOUD_TOLERATION = Toleration(key=CLOUD_TAINT_KEY, operator="Exists", effect=TaintEffect.NO_SCHEDULE)
#: Pods prefer IDC nodes with this weight (kube-scheduler's preferred affinity weights are 1..100).
PREFER_IDC = NodeAffinity(
    preferred=(
        PreferredSchedulingTerm(100, NodeSelectorTerm((NodeSelectorRequirement(NODE_TYPE_LABEL, "In", (IDC,)),))),
    )
)
#: A sensitive job's nodeSelector: IDC nodes only, so it never bursts.
PIN_TO_IDC = {NODE_TYPE_LABEL: IDC}


def pinned_to_idc(pod: Pod) -> bool:
    """The pod's nodeSelector keeps it on IDC nodes: its job never overflows to the cloud."""
    return pod.node_selector.get(NODE_TYPE_LABEL) == IDC


def node_type(cluster: ClusterSpec, pool: NodePoolSpec) -> str:
    if cluster.type == IDC:
        return IDC
    return "cloud-spot" if pool.pricing.model == "spot" else "cloud-ondemand"


@dataclass(slots=True, eq=False)
class Arrival:
    """A node asked for that has not joined yet: when it is due (after the pool's provisioning delay), the
    timer that joins it then (cancelled if the pool shrinks first), and the name its provider gave it ("" for
    a node named by its pool, `<pool>-<n>`)."""

    due: float
    timer: Timer | None = None
    name: str = ""


@dataclass(slots=True)
class Pool:
    """A node pool during a run: its spec, cluster, and the nodes it has."""

    name: str
    spec: NodePoolSpec
    cluster_name: str
    cluster: ClusterSpec
    nodes: list[str] = field(default_factory=list)
    #: Cordoned nodes waiting for their last job before they leave (drain-aware scale-in).
    draining: list[str] = field(default_factory=list)
    #: Nodes being provisioned, in the order they were asked for.
    arriving: list[Arrival] = field(default_factory=list)
    created: int = 0
    #: What each node offers, parsed from the spec once (every node of a pool is the same).
    allocatable: Resources | None = field(default=None, repr=False, compare=False)

    @property
    def is_cloud(self) -> bool:
        return self.cluster.type != IDC

    @property
    def target_name(self) -> str:
        """The Deployment name an HPA's scaleTargetRef uses for this pool ("" if none)."""
        return self.spec.scale_target_ref.name if self.spec.scale_target_ref else ""

    @property
    def gpus_per_node(self) -> int:
        return self.spec.gpu.count

    @property
    def provisioning(self) -> int:
        """How many nodes are on the way."""
        return len(self.arriving)

    @property
    def size(self) -> int:
        """Nodes present and not draining, plus nodes being provisioned: the autoscaler's replicas."""
        return len(self.nodes) - len(self.draining) + self.provisioning

    def new_node(self) -> Node:
        """The next node of this pool, named <pool>-<n>."""
        name = f"{self.name}-{self.created}"
        self.created += 1
        return self.node(name)

    def node(self, name: str) -> Node:
        """The pool's node of that name (every node of a pool is the same but for its name)."""
        spec, cluster = self.spec, self.cluster
        gpus = spec.gpu.count
        labels = {
            NODE_TYPE_LABEL: node_type(cluster, spec),
            REGION_LABEL: cluster.region,
            GPU_PRODUCT_LABEL: spec.gpu.product,
            POOL_LABEL: self.name,
            CLUSTER_LABEL: self.cluster_name,
            "kubernetes.io/hostname": name,
            **spec.labels,
        }
        annotations: dict[str, str] = {}
        taints: tuple[Taint, ...] = ()
        if self.is_cloud:
            annotations[LATENCY_ANNOTATION] = f"{cluster.latency_ms:g}"
            taints = (Taint(CLOUD_TAINT_KEY, cluster.provider or self.cluster_name, TaintEffect.NO_SCHEDULE),)
        allocatable = self.allocatable
        if allocatable is None:
            resources: dict[str, object] = {CPU: spec.cpu, MEMORY: spec.memory, PODS: "110"}
            if gpus:
                resources |= {NVIDIA_GPU: gpus, GPU_NUMBER: gpus, GPU_MEMORY: gpus * spec.gpu.memory_mib}
            allocatable = self.allocatable = Resources.parse(resources, f"NodePool {self.name} spec")
        return Node(
            name=name,
            allocatable=allocatable,
            capacity=allocatable,
            labels=labels,
            annotations=annotations,
            taints=taints,
            gpu_memory_mib=(spec.gpu.memory_mib,) * gpus if spec.gpu.memory_mib else (),
        )
