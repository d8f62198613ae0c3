"""The fleet's manifest kinds (apiVersion tidegate.io/v1alpha1): Cluster and NodePool, and a Scenario's
cloud budget, read by the simulator and by the live control plane alike. Validated with pydantic; errors
name file, document, kind/name and field.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from tidegate.model.manifests import MAX_GPU_CARDS
from tidegate.model.quantity import parse_quantity

#: Nodes one pool may have: far beyond any real cluster (Kubernetes supports 5,000), so a larger count is a
#: typo that would only exhaust memory.
MAX_POOL_NODES = 100_000


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, alias_generator=_camel)


def bytes_quantity(value: str) -> str:
    """A Kubernetes quantity of bytes ("2Ti", "500G"), checked here so errors name the field."""
    if parse_quantity(value, "quantity") < 0:
        raise ValueError("must not be negative")
    return value


class CacheSpec(Spec):
    """The IDC's dataset cache (Alluxio-like) in front of its object store: an LRU by dataset."""

    capacity: str
    #: A miss reads the dataset from the object store at this rate (Gbit/s) before the job runs;
    #: unset: a miss is read through while the job runs (no delay), and still fills the cache.
    miss_read_gbps: Annotated[float | None, Field(gt=0)] = None

    @field_validator("capacity")
    @classmethod
    def _capacity(cls, value: str) -> str:
        return bytes_quantity(value)


class LinkSpec(Spec):
    """The cross-cloud link between the IDC and this cloud, shared by every transfer over it."""

    bandwidth_gbps: Annotated[float, Field(gt=0)]
    #: Each transfer's own limit (the prefetch initContainer's bandwidth cap); unset: none.
    per_pod_gbps: Annotated[float | None, Field(gt=0)] = None


class ClusterSpec(Spec):
    """An IDC or a cloud region; cloud nodes are Virtual-Kubelet-style virtual nodes."""

    type: Literal["idc", "cloud"]
    region: str = ""
    provider: str = ""
    #: Round-trip latency to the IDC in ms; written on cloud nodes as annotation latency.ms.local-idc.
    latency_ms: float = 0.0
    #: An IDC's dataset cache.
    cache: CacheSpec | None = None
    #: A cloud's link to the IDC; without one, cloud pods read their data at no cost.
    link: LinkSpec | None = None


class GpuSpec(Spec):
    product: str
    count: Annotated[int, Field(ge=0, le=MAX_GPU_CARDS)]
    memory_mib: Annotated[int, Field(ge=0, alias="memoryMiB")] = 0


class PricingSpec(Spec):
    """Prices in currency units per node-hour; `reserved_monthly` is what a reserved node costs a month."""

    model: Literal["on-demand", "spot", "owned"] = "on-demand"
    per_hour: Annotated[float, Field(ge=0)] = 0.0
    on_demand_per_hour: Annotated[float, Field(ge=0)] = 0.0
    reserved_monthly: Annotated[float, Field(ge=0)] = 0.0


class ScaleTargetRef(Spec):
    api_version: str = "apps/v1"
    kind: str = "Deployment"
    name: str


#: Each provider's spot interruption notice, in seconds (tidegate/sim/spot.py says where each comes from).
NOTICE_SECONDS = {"aws": 120.0, "gcp": 30.0, "azure": 30.0, "aliyun": 300.0}


def notice_seconds(pool: NodePoolSpec, cluster: ClusterSpec) -> float | None:
    """How long a pool's spot node has between its interruption notice and its end: the pool's
    `interruption.noticeSeconds`, else its provider's notice (None for a provider with no known notice)."""
    interruption = pool.interruption
    if interruption is not None and interruption.notice_seconds is not None:
        return interruption.notice_seconds
    provider = (interruption.provider if interruption is not None else None) or cluster.provider
    return NOTICE_SECONDS.get(provider)


class InterruptionSpec(Spec):
    """How a spot pool's nodes are interrupted (see tidegate/sim/spot.py for the defaults)."""

    #: Whose notice applies (aws 120 s, gcp 30 s, azure 30 s, aliyun 300 s); default: the cluster's provider.
    provider: Literal["aws", "gcp", "azure", "aliyun"] | None = None
    #: Interruptions per node-hour; default: from the instance type's band in the AWS Spot Advisor data.
    rate_per_hour: Annotated[float | None, Field(ge=0)] = None
    notice_seconds: Annotated[float | None, Field(ge=0)] = None
    #: The AWS instance type and region whose Spot Advisor interruption band sets the default rate.
    instance_type: str = ""
    region: str = "us-east-1"
    #: The Spot Advisor JSON (relative to this manifest); default: ../shared/data/aws-spot-advisor/.
    advisor_data: str = ""
    #: Explicit notice instants (simulated seconds); each interrupts the pool's oldest live node. For
    #: tests and what-ifs; when given, no random interruptions are drawn.
    at_seconds: list[Annotated[float, Field(ge=0)]] = Field(default_factory=list)


class NodePoolSpec(Spec):
    cluster: str
    #: Nodes present at the start (an IDC pool's fixed size).
    count: Annotated[int, Field(ge=0, le=MAX_POOL_NODES)] = 0
    min_count: Annotated[int, Field(ge=0, le=MAX_POOL_NODES)] = 0
    max_count: Annotated[int | None, Field(ge=0, le=MAX_POOL_NODES)] = None
    provisioning_delay_seconds: Annotated[float, Field(ge=0)] = 0.0
    gpu: GpuSpec
    cpu: str = "96"
    memory: str = "768Gi"
    labels: dict[str, str] = Field(default_factory=dict)
    pricing: PricingSpec = Field(default_factory=PricingSpec)
    #: The Deployment an HPA scales to size this pool; one replica is one node.
    scale_target_ref: ScaleTargetRef | None = None
    #: Spot interruptions (only for `pricing.model: spot`); absent: a spot pool interrupts at its
    #: instance type's default rate if it names one, else never.
    interruption: InterruptionSpec | None = None

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, value: str) -> str:
        parse_quantity(value, "quantity")
        return value


class BudgetThreshold(Spec):
    """When the period's cloud spend reaches `spent_fraction` of the budget, patch the queue."""

    spent_fraction: Annotated[float, Field(gt=0)]
    weight: Annotated[int | None, Field(ge=1, le=65535)] = None
    #: Replaces the queue's capability; as in a Queue, nvidia.com/gpu: "0" means no GPUs (cpu/memory 0: no cap).
    capability: dict[str, str] | None = None
    #: Closed stops the queue taking any new work (as `vcctl queue operate --action close`).
    state: Literal["Open", "Closed"] | None = None
    #: Caps every cloud pool's HPA at this many replicas (`kubectl patch hpa ... {"spec":{"maxReplicas":N}}`).
    max_replicas: Annotated[int | None, Field(ge=1)] = None


class BudgetSpec(Spec):
    """A cloud budget per period; crossing a threshold patches the burst queue until the next period."""

    per_period: Annotated[float, Field(gt=0)]
    period_hours: Annotated[float, Field(gt=0)] = 24.0
    queue: str = "burst-cloud"
    thresholds: Annotated[list[BudgetThreshold], Field(min_length=1)]
