"""The simulation's own manifest kinds (apiVersion tidegate.io/v1alpha1): Cluster, NodePool,
Dataset, Workload, Scenario and Simulation. Kubernetes and Volcano kinds (Queue, SchedulerConfiguration,
HorizontalPodAutoscaler) are read by their own loaders.

Validated with pydantic; every error is reported with file, document, kind/name and field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator

from tidegate.fleet.spec import BudgetSpec, ClusterSpec, NodePoolSpec, Spec, bytes_quantity
from tidegate.model.errors import ManifestError, Source
from tidegate.model.kinds import SIMULATION_KINDS, TIDEGATE_API_VERSION
from tidegate.model.manifests import MAX_GPU_CARDS, MAX_JOB_PODS
from tidegate.traces.records import GPUS_PER_NODE, MAX_TIME_S

API_VERSION = TIDEGATE_API_VERSION
#: Jobs a synthetic workload may draw (days x jobsPerDay): each is built and kept in memory.
MAX_SYNTHETIC_JOBS = 10_000_000
#: GPUs one synthetic job may ask: 10,000 pods (a vcjob's most) of 8 GPUs.
MAX_SYNTHETIC_GPUS = GPUS_PER_NODE * MAX_JOB_PODS
SIM_KINDS = SIMULATION_KINDS


class DatasetSpec(Spec):
    """A dataset in the IDC's object store that jobs read (named by the pod annotation tidegate.io/dataset)."""

    size: str

    @field_validator("size")
    @classmethod
    def _size(cls, value: str) -> str:
        return bytes_quantity(value)


class DatasetShare(Spec):
    """How often a workload's jobs read a dataset (relative weight)."""

    name: str
    weight: Annotated[float, Field(gt=0)] = 1.0


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
    days: Annotated[float, Field(gt=0, le=MAX_TIME_S / 86400, allow_inf_nan=False)] = 30.0
    jobs_per_day: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 1000.0
    #: Seeds numpy's generator, which takes no negative seed.
    seed: Annotated[int, Field(ge=0)] = 0
    start_weekday: Annotated[int, Field(ge=0, le=6)] = 0
    #: Helios sequence CSVs to fit the daily/weekly tide from; empty means a flat rate.
    tide_from: list[str] = Field(default_factory=list)
    #: Relative weight of each GPU count (GPUs a job; a job above 8 GPUs is a gang of 8-GPU pods).
    gpu_counts: (
        dict[Annotated[int, Field(ge=1, le=MAX_SYNTHETIC_GPUS)], Annotated[float, Field(ge=0, allow_inf_nan=False)]]
        | None
    ) = None
    duration_median_seconds: Annotated[float | None, Field(gt=0, le=MAX_TIME_S, allow_inf_nan=False)] = None
    duration_sigma: Annotated[float | None, Field(gt=0, le=100, allow_inf_nan=False)] = None
    #: Durations are clipped to [1 s, this].
    duration_max_seconds: Annotated[float | None, Field(ge=1, le=MAX_TIME_S, allow_inf_nan=False)] = None

    @field_validator("jobs_per_day")
    @classmethod
    def _jobs(cls, value: float, info: ValidationInfo) -> float:
        days = info.data.get("days")
        if days is not None and days * value > MAX_SYNTHETIC_JOBS:
            raise ValueError(
                f"{days:g} days of {value:g} jobs a day is {days * value:,.0f} jobs; at most {MAX_SYNTHETIC_JOBS:,}"
            )
        return value

    @field_validator("gpu_counts")
    @classmethod
    def _weights(cls, value: dict[int, float] | None) -> dict[int, float] | None:
        if value is not None and not any(weight > 0 for weight in value.values()):
            raise ValueError("needs at least one GPU count of weight > 0")
        return value


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
    #: GPUs of one server, for a job the source gives in GPUs only (a Tiresias trace, the synthetic
    #: generator): a job of more becomes a gang of pods of at most this many. Absent: the folder's IDC
    #: pools' GPUs a node (the largest, when they differ), else 8 (`gpus_per_server`).
    gpus_per_node: Annotated[int | None, Field(ge=1, le=MAX_GPU_CARDS)] = None

    @field_validator("checkpoint_size")
    @classmethod
    def _checkpoint_size(cls, value: str) -> str:
        return bytes_quantity(value)

    @property
    def gpus_per_server(self) -> int:
        """`gpus_per_node`, or 8 when neither it nor the folder says (the loader fills it in from the IDC)."""
        return self.gpus_per_node or GPUS_PER_NODE


class BurstSpec(Spec):
    enabled: bool = False
    queue: str = "burst-cloud"
    #: A job overflows after waiting this long, or as soon as its queue is at capability.
    after_seconds: Annotated[float, Field(ge=0)] = 600.0


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
