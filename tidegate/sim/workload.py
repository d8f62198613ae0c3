"""A Workload manifest becomes jobs to replay: trace records, then vcjob-like PodGroups and pods.

Each job is a gang of identical pods (minMember = pods) in a queue, preferring IDC nodes
(PodGroup-level preferred affinity). A job that overflows to the burst queue also tolerates the
cloud taint: placement prefers local and tolerates cloud. A sensitive job is pinned to the IDC by
nodeSelector and never bursts. A job reading a dataset carries the annotation tidegate.io/dataset;
once it may burst, it also prefers the cloud nodes that already hold that dataset (data locality,
scored by the nodeorder plugin like any preferred node affinity).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from operator import attrgetter
from pathlib import Path

import numpy as np

from tidegate.fleet.pool import CLOUD_TOLERATION, PIN_TO_IDC, PREFER_IDC
from tidegate.model.objects import (
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodGroup,
    PreferredSchedulingTerm,
)
from tidegate.model.resources import CPU, GPU_MILLI, MEMORY, NVIDIA_GPU, Resources
from tidegate.sim.datasets import DATASET_ANNOTATION, assign_datasets
from tidegate.sim.spec import WorkloadSpec
from tidegate.traces.helios import read_helios_jobs
from tidegate.traces.openb import read_openb_jobs_counted
from tidegate.traces.records import TraceJob
from tidegate.traces.synthetic import (
    QueueShare,
    SyntheticWorkload,
    TideProfile,
    generate,
    tide_from_helios,
)
from tidegate.traces.tiresias import read_tiresias

#: Every unpinned pod's (empty) nodeSelector: one object, so the scheduler finds the pods of a shape by identity.
NO_SELECTOR: dict[str, str] = {}
HOSTNAME_LABEL = "kubernetes.io/hostname"


@dataclass(slots=True)
class SimJob:
    """A job being replayed and what happened to it."""

    record: TraceJob
    queue: str
    pinned: bool
    submitted: float
    started: float | None = None
    finished: float | None = None
    failed_reason: str = ""
    restarts: int = 0
    #: Restarts counted against the vcjob's maxRetry (Volcano's status.retryCount).
    retries: int = 0
    #: Seconds of work kept by checkpoints across restarts (the job resumes from there).
    done_s: float = 0.0
    #: Checkpoint period in seconds of running (0 = none).
    checkpoint_every_s: float = 0.0
    #: Queue the job was first submitted to (it may overflow to the burst queue).
    home_queue: str = ""
    #: The dataset the job reads ("" for none): its pods' tidegate.io/dataset annotation.
    dataset: str = ""
    #: Seconds the job held its GPUs waiting for data (prefetch, object-store read), over all attempts.
    prefetch_s: float = 0.0
    #: When the job last entered a queue (its arrival, or a restart after an eviction); None while it
    #: runs, after it ended, or before it arrived.
    queued_since: float | None = None
    #: Seconds spent pending in queues up to its last start, over all attempts.
    waited_s: float = 0.0
    #: GPUs the whole gang holds (fractions for shared slices), from its record (read at every start and end).
    gpus: float = field(init=False)

    def __post_init__(self) -> None:
        self.gpus = self.record.pods * self.record.gpus_per_pod * self.record.gpu_milli / 1000

    @property
    def name(self) -> str:
        return self.record.job_id

    def wait_s(self, end: float) -> float | None:
        """Seconds the job waited in queues: before its first start and again after every eviction; a
        job still waiting at `end` counts up to then (a lower bound). None for a job that never arrived."""
        if self.queued_since is not None:
            return self.waited_s + max(end - self.queued_since, 0.0)
        return self.waited_s if self.started is not None else None

    @property
    def pending_since(self) -> float:
        """When its current wait began (arrival, or the restart after an eviction): what overflow's
        `afterSeconds` and the HPA's pending-duration metric count from. Only for a pending job."""
        assert self.queued_since is not None, f"{self.name} is not pending"
        return self.queued_since


def _shifted(tide: TideProfile, hours: float) -> TideProfile:
    shift = round(hours) % 24
    hourly = tide.hourly[-shift:] + tide.hourly[:-shift] if shift else tide.hourly
    return TideProfile(hourly=hourly, weekday=tide.weekday)


def trace_jobs(spec: WorkloadSpec) -> list[TraceJob]:
    """The workload's job records, sorted by submit time (queues still as the source names them)."""
    return workload_records(spec)[0]


def workload_records(spec: WorkloadSpec) -> tuple[list[TraceJob], list[str]]:
    """`trace_jobs` and warnings about what the trace held but the workload leaves out (openb pods
    without both times)."""
    warnings: list[str] = []
    if spec.source == "openb":
        jobs, skipped = read_openb_jobs_counted(spec.path)
        if skipped:
            warnings.append(
                f"{Path(spec.path).name}: {skipped:,} of {skipped + len(jobs):,} pods skipped: without both "
                "creation_time and deletion_time a pod cannot be replayed"
            )
    elif spec.source == "tiresias":
        jobs = read_tiresias(spec.path, gpus_per_node=spec.gpus_per_server)
    elif spec.source == "helios":
        jobs = read_helios_jobs(spec.path)
    else:
        jobs = _synthetic(spec)
    jobs.sort(key=attrgetter("submit_s", "job_id"))
    return (jobs[: spec.limit] if spec.limit else jobs), warnings


def _synthetic(spec: WorkloadSpec) -> list[TraceJob]:
    syn = spec.synthetic
    tide = tide_from_helios(syn.tide_from) if syn.tide_from else TideProfile.flat()
    mixes = spec.queues or []
    total_share = sum(m.share for m in mixes) or 1.0
    overrides: dict[str, object] = {}
    if syn.gpu_counts:
        overrides["gpu_counts"] = tuple(sorted(syn.gpu_counts.items()))
    if syn.duration_median_seconds:
        overrides["duration_median_s"] = syn.duration_median_seconds
    if syn.duration_sigma:
        overrides["duration_sigma"] = syn.duration_sigma
    if syn.duration_max_seconds:
        overrides["duration_max_s"] = syn.duration_max_seconds
    overrides["gpus_per_node"] = spec.gpus_per_server
    if not mixes:
        config = SyntheticWorkload(
            days=syn.days,
            jobs_per_day=syn.jobs_per_day,
            seed=syn.seed,
            start_weekday=syn.start_weekday,
            **overrides,  # type: ignore[arg-type]
        )
        return generate(config, tide)
    jobs: list[TraceJob] = []
    for i, mix in enumerate(mixes):
        config = SyntheticWorkload(
            days=syn.days,
            jobs_per_day=syn.jobs_per_day * mix.share / total_share,
            seed=syn.seed * 1000 + i,
            start_weekday=syn.start_weekday,
            queues=(QueueShare(mix.name, 1.0, tuple(f"{mix.name}-user-{u:02d}" for u in range(mix.users))),),
            job_prefix=mix.name,
            **overrides,  # type: ignore[arg-type]
        )
        jobs.extend(generate(config, _shifted(tide, mix.tide_shift_hours)))
    return jobs


def sim_jobs(spec: WorkloadSpec, records: list[TraceJob]) -> list[SimJob]:
    """Records placed in queues, with the sensitive share pinned to the IDC (seeded, deterministic)."""
    rng = np.random.default_rng(spec.synthetic.seed + 7)
    pinned_by_queue = {m.name: m.pinned_fraction for m in spec.queues}
    queues = []
    for record in records:
        queue = spec.queue_by_vc.get(record.queue) or (record.queue if record.queue in pinned_by_queue else "")
        queues.append(queue or spec.default_queue)
    by_queue = {m.name: m.datasets for m in spec.queues if m.datasets}
    datasets = assign_datasets(queues, spec.datasets, by_queue, spec.synthetic.seed + 11)
    draws = rng.random(len(records)).tolist()  # the numbers one rng.random() a record would draw, in one call
    every = spec.checkpoint_every_seconds
    return [
        SimJob(
            record,
            queue,
            draw < pinned_by_queue.get(queue, 0.0),
            record.submit_s,
            checkpoint_every_s=every,
            home_queue=queue,
            dataset=dataset,
        )
        for record, queue, dataset, draw in zip(records, queues, datasets, draws, strict=True)
    ]


def pod_requests(record: TraceJob) -> Resources:
    return _requests(record.cpu_milli, record.memory_mib, record.gpu_milli, record.gpus_per_pod)


@cache
def _requests(cpu_milli: int, memory_mib: int, gpu_milli: int, gpus_per_pod: int) -> Resources:
    """One Resources per distinct ask (a trace repeats a few hundred): it hashes once, and the scheduler's
    per-request caches find it by identity."""
    values = {CPU: cpu_milli, MEMORY: memory_mib * 2**20}
    if gpu_milli >= 1000:
        values[NVIDIA_GPU] = gpus_per_pod * 1000
    elif gpu_milli > 0:
        values[GPU_MILLI] = gpu_milli * 1000
    return Resources(values)


@cache
def _scaled(requests: Resources, pods: int) -> Resources:
    """A gang's minResources, shared like the requests it multiplies."""
    return requests.scaled(pods)


def prefer_idc_and(nodes: tuple[str, ...], weight: int) -> NodeAffinity:
    """IDC nodes first (weight 100), then these nodes (by hostname) with `weight`."""
    if not nodes or weight <= 0:
        return PREFER_IDC
    data = NodeSelectorTerm((NodeSelectorRequirement(HOSTNAME_LABEL, "In", nodes),))
    return NodeAffinity(preferred=(*PREFER_IDC.preferred, PreferredSchedulingTerm(weight, data)))


def group_of_pod(pod_key: str) -> str:
    """The key of the group a pod made by `to_group` belongs to: its pods are named after it, `<group>-<i>`."""
    return pod_key.rpartition("-")[0]


def to_group(
    job: SimJob, tolerate_cloud: bool, attempt: int = 0, data_nodes: tuple[str, ...] = (), locality_weight: int = 0
) -> tuple[PodGroup, list[Pod]]:
    """The job's PodGroup and pods, as Volcano's job controller would create them. Only a job sent
    to the burst queue tolerates the cloud taint; a pinned job never does. A job that may burst also
    prefers `data_nodes` (cloud nodes already holding its dataset) with `locality_weight`."""
    record = job.record
    name = f"{record.job_id}-r{attempt}" if attempt else record.job_id
    requests = pod_requests(record)
    group = PodGroup(
        name=name,
        queue=job.queue,
        min_member=record.pods,
        min_resources=_scaled(requests, record.pods),
        created=job.submitted,
    )
    selector = PIN_TO_IDC if job.pinned else NO_SELECTOR
    tolerations = (CLOUD_TOLERATION,) if tolerate_cloud and not job.pinned else ()
    affinity = prefer_idc_and(data_nodes, locality_weight) if tolerations else PREFER_IDC
    annotations = {DATASET_ANNOTATION: job.dataset} if job.dataset else {}
    pods = [
        Pod(
            name=f"{name}-{i}",
            requests=requests,
            node_selector=selector,
            annotations=annotations,
            affinity=affinity,
            tolerations=tolerations,
            group=name,
            task="worker",
            created=job.submitted,
        )
        for i in range(record.pods)
    ]
    return group, pods
