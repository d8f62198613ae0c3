"""The simulation's own manifest kinds (apiVersion tidegate.io/v1alpha1): Cluster, NodePool,
Dataset, Workload, Scenario and Simulation. Kubernetes and Volcano kinds (Queue, SchedulerConfiguration,
HorizontalPodAutoscaler) are read by their own loaders.

Validated with pydantic; every error is reported with file, document, kind/name and field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tidegate.model.errors import ManifestError, Source
from tidegate.model.quantity import parse_quantity

API_VERSION = "tidegate.io/v1alpha1"
SIM_KINDS = ("Cluster", "NodePool", "Dataset", "Workload", "Scenario", "Simulation")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


class Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, alias_generator=_camel)


def _bytes(value: str) -> str:
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
        return _bytes(value)


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


class DatasetSpec(Spec):
    """A dataset in the IDC's object store that jobs read (named by the pod annotation tidegate.io/dataset)."""

    size: str

    @field_validator("size")
    @classmethod
    def _size(cls, value: str) -> str:
        return _bytes(value)


class DatasetShare(Spec):
    """How often a workload's jobs read a dataset (relative weight)."""

    name: str
    weight: Annotated[float, Field(gt=0)] = 1.0


class GpuSpec(Spec):
    product: str
    count: Annotated[int, Field(ge=0)]
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
    count: Annotated[int, Field(ge=0)] = 0
    min_count: Annotated[int, Field(ge=0)] = 0
    max_count: Annotated[int | None, Field(ge=0)] = None
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


class QueueMix(Spec):
    """Which share of the workload goes to a queue, and how its daily tide is shifted."""

    name: str
    share: Annotated[float, Field(gt=0)]
    users: Annotated[int, Field(ge=1)] = 10
    tide_shift_hours: float = 0.0
    #: Fraction of this queue's jobs that are sensitive: pinned to the IDC by nodeSelector.
    pinned_fraction: Annotated[float, Field(ge=0, le=1)] = 0.0
    #: Datasets this queue's jobs read (by weight), instead of the workload's `datasets`.
    datasets: list[DatasetShare] = Field(default_factory=list)


class SyntheticSpec(Spec):
    days: Annotated[float, Field(gt=0)] = 30.0
    jobs_per_day: Annotated[float, Field(gt=0)] = 1000.0
    seed: int = 0
    start_weekday: Annotated[int, Field(ge=0, le=6)] = 0
    #: Helios sequence CSVs to fit the daily/weekly tide from; empty means a flat rate.
    tide_from: list[str] = Field(default_factory=list)
    gpu_counts: dict[int, float] | None = None
    duration_median_seconds: Annotated[float | None, Field(gt=0)] = None
    duration_sigma: Annotated[float | None, Field(gt=0)] = None
    duration_max_seconds: Annotated[float | None, Field(gt=0)] = None


class WorkloadSpec(Spec):
    source: Literal["synthetic", "openb", "tiresias", "helios"]
    path: str = ""
    synthetic: SyntheticSpec = Field(default_factory=SyntheticSpec)
    queues: list[QueueMix] = Field(default_factory=list)
    #: For traces with a user or VC column: which queue each one lands in.
    queue_by_vc: dict[str, str] = Field(default_factory=dict)
    default_queue: str = "default"
    #: Keep at most this many jobs (0 = all); for quick runs.
    limit: Annotated[int, Field(ge=0)] = 0
    #: Jobs save a checkpoint every this many seconds of running (0 = never): a restarted job resumes
    #: from its last one and loses only the work since.
    checkpoint_every_seconds: Annotated[float, Field(ge=0)] = 0.0
    #: How long a checkpoint takes when a pod's preStop hook writes one on a spot notice.
    checkpoint_seconds: Annotated[float, Field(ge=0)] = 0.0
    #: A Volcano Job (batch.volcano.sh/v1alpha1) in the folder whose spec.policies, task policies,
    #: maxRetry and pod terminationGracePeriodSeconds every job of this workload follows.
    job_template: str = ""
    #: Bytes of one checkpoint; a cloud job uploads each one over its link ("0": not modelled).
    checkpoint_size: str = "0"
    #: Datasets the jobs read, each job one, drawn by weight (seeded by synthetic.seed).
    datasets: list[DatasetShare] = Field(default_factory=list)

    @field_validator("checkpoint_size")
    @classmethod
    def _checkpoint_size(cls, value: str) -> str:
        return _bytes(value)


class BurstSpec(Spec):
    enabled: bool = False
    queue: str = "burst-cloud"
    #: A job overflows after waiting this long, or as soon as its queue is at capability.
    after_seconds: Annotated[float, Field(ge=0)] = 600.0


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


class LinkOutageSpec(Spec):
    """A window during which the IDC<->cloud link is cut."""

    start: Annotated[float, Field(ge=0)]
    duration_seconds: Annotated[float, Field(gt=0)]
    #: The cloud cluster whose link is cut; "" cuts every cloud's link.
    cluster: str = ""
    #: What running cloud pods do: keepRunning (checkpoints stay local until the link is back) or
    #: fail (the job restarts from its last uploaded checkpoint, like an evicted job).
    cloud_pods: Literal["keepRunning", "fail"] = "keepRunning"


class DataGravitySpec(Spec):
    """Datasets, the IDC cache, prefetch and checkpoint traffic over the link (on by default)."""

    enabled: bool = True
    #: Preferred-affinity weight (0..100) for cloud nodes that already hold a burst job's dataset.
    locality_weight: Annotated[int, Field(ge=0, le=100)] = 50


class ScenarioSpec(Spec):
    description: str = ""
    #: static: capability = deserved, nothing lent; elastic: borrow up to capability, reclaim.
    quotas: Literal["static", "elastic"] = "elastic"
    burst: BurstSpec = Field(default_factory=BurstSpec)
    #: declared: pools as their manifests say; on-demand: every spot pool becomes on-demand (billed at
    #: its pricing.onDemandPerHour, labelled cloud-ondemand, never interrupted).
    cloud_pricing: Literal["declared", "on-demand"] = "declared"
    #: false turns spot interruptions off (spot prices kept): what interruptions cost.
    interruptions: bool = True
    #: Overrides every interrupting spot pool's rate (interruptions per node-hour), for what-ifs.
    interruption_rate_per_hour: Annotated[float | None, Field(ge=0)] = None
    budget: BudgetSpec | None = None
    data_gravity: DataGravitySpec = Field(default_factory=DataGravitySpec)
    link_outages: list[LinkOutageSpec] = Field(default_factory=list)


class SimulationSpec(Spec):
    workload: str
    scenarios: list[str]
    scheduling_period_seconds: Annotated[float, Field(gt=0)] = 1.0
    #: Simulated time to stop at (seconds); 0 = when the workload ends and every job has finished.
    until_seconds: Annotated[float, Field(ge=0)] = 0.0
    #: Seeds random events (spot interruptions); the same seed gives the same figures.
    seed: int = 0


SPEC_TYPES: dict[str, type[Spec]] = {
    "Cluster": ClusterSpec,
    "NodePool": NodePoolSpec,
    "Dataset": DatasetSpec,
    "Workload": WorkloadSpec,
    "Scenario": ScenarioSpec,
    "Simulation": SimulationSpec,
}


def document_name(doc: dict[str, Any]) -> str:
    """metadata.name, or "" when it is missing or metadata is not a mapping."""
    metadata = doc.get("metadata")
    return str(metadata.get("name", "")) if isinstance(metadata, dict) else ""


def parse_spec(kind: str, doc: dict[str, Any], source: Source) -> tuple[str, Spec] | list[ManifestError]:
    """(name, spec) of a simulation document, or the errors naming each bad field."""
    name = document_name(doc)
    if not name:
        return [ManifestError(source, kind, "", "metadata.name", "is required")]
    try:
        return name, SPEC_TYPES[kind].model_validate(doc.get("spec") or {})
    except ValidationError as exc:
        return [
            ManifestError(
                source,
                kind,
                name,
                "spec." + ".".join(str(part) for part in error["loc"]),
                error["msg"],
            )
            for error in exc.errors()
        ]
