"""The Alibaba GPU cluster trace 2023 ("openb", USENIX ATC'23 "Beware of Fragmentation") as records
and as Kubernetes objects.

Files (see ../shared/data/README.md): node lists `sn,cpu_milli,memory_mib,gpu,model` and pod lists
`name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,
scheduled_time` (the `multigpu*` variants have only the first five columns). A pod uses `num_gpu`
cards, `gpu_milli` thousandths of each: `num_gpu=1, gpu_milli=460` shares 46% of one card,
`num_gpu=4, gpu_milli=1000` takes four whole cards. That is the `TraceJob` convention too.

Kubernetes form, in tidegate's canonical units (quantity.py: bytes for memory, thousandths for every
other resource):

- Node: `cpu` = cpu_milli (already milli-cores), `memory` = memory_mib * 2**20 bytes,
  `nvidia.com/gpu` and `volcano.sh/gpu-number` = cards * 1000, `volcano.sh/gpu-memory` =
  cards * MiB-per-card * 1000 (a count of MiB, so milli-units like every non-memory resource),
  `tidegate.io/gpu-milli` = cards * 1000 thousandths * 1000, label `nvidia.com/gpu.product` = model,
  `Node.gpu_memory_mib` = one entry per card.
- Pod: whole cards ask `nvidia.com/gpu: <cards>`; a shared slice asks `tidegate.io/gpu-milli:
  "<thousandths>"`, written like any count ("460" = 46% of one card) and so stored canonically
  x1000 (Resources({GPU_MILLI: 460_000})); the scheduler reads it back as requests[GPU_MILLI] // 1000.
  `gpu_spec` becomes required node affinity `nvidia.com/gpu.product In [models]`.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from tidegate.model.manifests import MAX_GPU_CARDS
from tidegate.model.objects import (
    DEFAULT_NAMESPACE,
    GPU_PRODUCT_LABEL,
    Node,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
)
from tidegate.model.resources import CPU, GPU_MEMORY, GPU_MILLI, GPU_NUMBER, MEMORY, NVIDIA_GPU, Resources
from tidegate.traces.records import (
    MAX_CPU_MILLI,
    MAX_MEMORY_MIB,
    MAX_TIME_S,
    CsvTable,
    TraceJob,
    check_gpu_shape,
)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

MIB = 2**20
#: Label carrying the node's name, as the kubelet sets it.
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: Annotation keeping a pod's openb QoS class (LS, BE, Burstable, Guaranteed).
QOS_ANNOTATION = "tidegate.io/qos"

#: Memory of one card in MiB, by openb GPU model: the totals the ATC'23 authors' simulator uses
#: (hkust-adsl/kubernetes-scheduler-simulator, pkg/type/open-gpu-share/utils/const.go), i.e. what the
#: driver reports and a device plugin advertises, a little under the marketing size: T4 "16 GB" ->
#: 15109, P100 16 GB -> 16280, V100 SXM2 16 GB -> 16160, V100 32 GB -> 32510, A10 24 GB -> 22731.
#: G2 and G3 are anonymised models in the trace; their figures (20000, 30000) are that simulator's
#: placeholders, not measurements. Pass your own table to `openb_nodes_to_k8s` to change any of them.
GPU_MEMORY_MIB_BY_MODEL: Mapping[str, int] = MappingProxyType(
    {
        "T4": 15109,
        "P100": 16280,
        "V100M16": 16160,
        "V100M32": 32510,
        "A10": 22731,
        "G2": 20000,
        "G3": 30000,
    }
)

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
#: A pod's fields in `OpenbPod` order, as `_pod_jobs` takes them.
PodFields = tuple[str, int, int, int, int, tuple[str, ...], str, str, float | None, float | None, float | None]


@dataclass(frozen=True, slots=True)
class OpenbNode:
    """One row of an openb node list: CPU in milli-cores, memory in MiB, `gpu` cards of `model`
    ("" for CPU-only nodes)."""

    sn: str
    cpu_milli: int
    memory_mib: int
    gpu: int
    model: str


@dataclass(frozen=True, slots=True)
class OpenbPod:
    """One row of an openb pod list. Times are seconds from the trace start; None when the file has
    no such column (multigpu variants) or the cell is empty (`scheduled_time` of never-placed pods)."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...] = ()
    qos: str = ""
    pod_phase: str = ""
    creation_time: float | None = None
    deletion_time: float | None = None
    scheduled_time: float | None = None


@dataclass(frozen=True, slots=True, eq=False)
class OpenbPodArrays:
    """A pod list as read-only numpy columns, one entry a pod in file order, for fast experiments.

    `gpu_spec[i]` indexes `specs`, the distinct GPU model lists in order of first use; `specs[0]` is
    always () ("any model"). Missing times are NaN.
    """

    names: tuple[str, ...]
    cpu_milli: IntArray
    memory_mib: IntArray
    num_gpu: IntArray
    gpu_milli: IntArray
    gpu_spec: IntArray
    specs: tuple[tuple[str, ...], ...]
    creation: FloatArray
    deletion: FloatArray
    scheduled: FloatArray

    def __len__(self) -> int:
        return len(self.names)

    @property
    def gpu_milli_per_pod(self) -> IntArray:
        """Thousandths of a card each pod holds (num_gpu * gpu_milli)."""
        out: IntArray = self.num_gpu * self.gpu_milli
        return out


def _cpu_milli(table: CsvTable, line: int, row: list[str]) -> int:
    return table.integer(line, row, "cpu_milli", maximum=MAX_CPU_MILLI, what="a million cores")


def _memory_mib(table: CsvTable, line: int, row: list[str]) -> int:
    return table.integer(line, row, "memory_mib", maximum=MAX_MEMORY_MIB, what="32 TiB")


def read_openb_nodes(path: str | os.PathLike[str]) -> list[OpenbNode]:
    """Read an openb node list; raise TraceError (file:line) on a malformed row."""
    table = CsvTable(path, NODE_COLUMNS)
    nodes: list[OpenbNode] = []
    seen: set[str] = set()
    for line, row in table.rows:
        sn = table.text(row, "sn")
        if not sn:
            raise table.error(line, "sn: empty node name")
        if sn in seen:
            raise table.error(line, f"sn: duplicate node name {sn!r}")
        seen.add(sn)
        gpu = table.integer(line, row, "gpu", maximum=MAX_GPU_CARDS, what="GPUs a node")
        model = table.text(row, "model")
        if gpu > 0 and not model:
            raise table.error(line, f"model: empty for a node with {gpu} GPUs")
        nodes.append(
            OpenbNode(
                sn=sn,
                cpu_milli=_cpu_milli(table, line, row),
                memory_mib=_memory_mib(table, line, row),
                gpu=gpu,
                model=model,
            )
        )
    return nodes


def openb_node_to_k8s(node: OpenbNode, gpu_memory_mib_by_model: Mapping[str, int] = GPU_MEMORY_MIB_BY_MODEL) -> Node:
    """One openb node as a Kubernetes Node (units in the module docstring).

    Raises ValueError for a GPU model missing from `gpu_memory_mib_by_model`.
    """
    resources: dict[str, int] = {CPU: node.cpu_milli, MEMORY: node.memory_mib * MIB}
    labels = {HOSTNAME_LABEL: node.sn}
    cards: tuple[int, ...] = ()
    if node.gpu > 0:
        if node.model not in gpu_memory_mib_by_model:
            known = ", ".join(sorted(gpu_memory_mib_by_model))
            raise ValueError(
                f"node {node.sn}: GPU model {node.model!r} has no memory size; known models: {known}"
                " (pass gpu_memory_mib_by_model)"
            )
        per_card = gpu_memory_mib_by_model[node.model]
        cards = (per_card,) * node.gpu
        resources[NVIDIA_GPU] = node.gpu * 1000
        resources[GPU_NUMBER] = node.gpu * 1000
        resources[GPU_MEMORY] = node.gpu * per_card * 1000
        resources[GPU_MILLI] = node.gpu * 1000 * 1000
        labels[GPU_PRODUCT_LABEL] = node.model
    allocatable = Resources(resources)
    return Node(name=node.sn, allocatable=allocatable, capacity=allocatable, labels=labels, gpu_memory_mib=cards)


def openb_nodes_to_k8s(
    nodes: Iterable[OpenbNode], gpu_memory_mib_by_model: Mapping[str, int] = GPU_MEMORY_MIB_BY_MODEL
) -> list[Node]:
    """Every openb node as a Kubernetes Node; see `openb_node_to_k8s`."""
    return [openb_node_to_k8s(node, gpu_memory_mib_by_model) for node in nodes]


@dataclass(slots=True)
class _PodColumns:
    """A pod list read column by column, validated: what both pod readers build from."""

    names: list[str] = field(default_factory=list)
    cpu_milli: list[int] = field(default_factory=list)
    memory_mib: list[int] = field(default_factory=list)
    num_gpu: list[int] = field(default_factory=list)
    gpu_milli: list[int] = field(default_factory=list)
    gpu_spec: list[tuple[str, ...]] = field(default_factory=list)
    qos: list[str] = field(default_factory=list)
    pod_phase: list[str] = field(default_factory=list)
    creation: list[float | None] = field(default_factory=list)
    deletion: list[float | None] = field(default_factory=list)
    scheduled: list[float | None] = field(default_factory=list)


def _parse_spec(cell: str) -> tuple[str, ...]:
    """A stripped gpu_spec cell as its distinct models ("" for any model); ValueError for an empty model."""
    if not cell:
        return ()
    models = [model.strip() for model in cell.split("|")]
    if any(not model for model in models):
        raise ValueError(f"gpu_spec: {cell!r} has an empty model name")
    return tuple(dict.fromkeys(models))


def _read_pod_columns(path: str | os.PathLike[str]) -> _PodColumns:
    """A pod list, validated: a column at a time when every cell is plainly valid (a real trace), else row
    by row, which raises a TraceError naming the first bad row."""
    table = CsvTable(path, POD_COLUMNS)
    cols = _clean_pod_columns(table)
    return cols if cols is not None else _checked_pod_columns(table)


def _clean_pod_columns(table: CsvTable) -> _PodColumns | None:
    """The pod list converted a whole column at a time, or None as soon as any cell is unusual or wrong:
    `_checked_pod_columns` then reads it again row by row, to name the first bad row. It makes the same
    checks (mostly by the same functions), so what it accepts it reads to the same values, a few times
    faster than cell by cell."""
    cells = table.columns()
    count = len(table.rows)
    names = [cell.strip() for cell in cells["name"]]
    try:
        cpu_milli, memory_mib, num_gpu, gpu_milli = (
            list(map(int, cells[column])) for column in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
        )
        creation, deletion, scheduled = (
            _clean_times(cells.get(column), count) for column in ("creation_time", "deletion_time", "scheduled_time")
        )
        for gpus, milli in set(zip(num_gpu, gpu_milli, strict=True)):
            check_gpu_shape(gpus, milli, "num_gpu", "gpu_milli")
        specs = {cell: _parse_spec(cell.strip()) for cell in set(cells.get("gpu_spec", ()))}
    except ValueError:
        return None
    if not all(names) or len(set(names)) < count or min(cpu_milli, default=0) < 0 or min(memory_mib, default=0) < 0:
        return None
    if (
        max(cpu_milli, default=0) > MAX_CPU_MILLI
        or max(memory_mib, default=0) > MAX_MEMORY_MIB
        or max(num_gpu, default=0) > MAX_GPU_CARDS
    ):
        return None
    gpu_spec: list[tuple[str, ...]] = (
        [specs[cell] for cell in cells["gpu_spec"]] if "gpu_spec" in cells else [()] * count
    )
    if any(spec and not gpus for spec, gpus in zip(gpu_spec, num_gpu, strict=True)):
        return None
    for created, deleted, started in zip(creation, deletion, scheduled, strict=True):
        if created is not None and (
            (deleted is not None and deleted < created) or (started is not None and started < created)
        ):
            return None
        if deleted is not None and started is not None and started > deleted:
            return None
    qos, pod_phase = (
        [cell.strip() for cell in cells[column]] if column in cells else [""] * count for column in ("qos", "pod_phase")
    )
    return _PodColumns(
        names, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation, deletion, scheduled
    )


def _clean_times(cells: Sequence[str] | None, count: int) -> list[float | None]:
    """A time column whose cells are each empty (None) or a finite time >= 0 (None for all without the
    column); ValueError for anything else, a time spelled "nan" or a padded empty cell included."""
    if cells is None:
        return [None] * count
    values: list[float | None]
    if all(cells):
        times = list(map(float, cells))
        values = list(times)
    else:
        values = [float(cell) if cell else None for cell in cells]
        times = [value for value in values if value is not None]
    if min(times, default=0.0) < 0.0 or not math.isfinite(sum(times)):  # a NaN or an infinity makes the sum one
        raise ValueError("not only plain times")
    if max(times, default=0.0) > MAX_TIME_S:
        raise ValueError("a time too far off")
    return values


def _checked_pod_columns(table: CsvTable) -> _PodColumns:
    """The pod list read row by row, each cell checked: raises a TraceError naming the first bad row."""
    cols = _PodColumns()
    has_spec, has_qos, has_phase = table.has("gpu_spec"), table.has("qos"), table.has("pod_phase")
    specs: dict[str, tuple[str, ...]] = {}
    seen: set[str] = set()
    for line, row in table.rows:
        name = table.text(row, "name")
        if not name:
            raise table.error(line, "name: empty pod name")
        if name in seen:
            raise table.error(line, f"name: duplicate pod name {name!r}")
        seen.add(name)
        num_gpu = table.integer(line, row, "num_gpu", maximum=MAX_GPU_CARDS, what="GPUs a pod")
        gpu_milli = table.integer(line, row, "gpu_milli")
        spec: tuple[str, ...] = ()
        try:
            check_gpu_shape(num_gpu, gpu_milli, "num_gpu", "gpu_milli")
            if has_spec:
                cell = table.text(row, "gpu_spec")
                spec = specs[cell] if cell in specs else specs.setdefault(cell, _parse_spec(cell))
        except ValueError as exc:
            raise table.error(line, str(exc)) from None
        if spec and num_gpu == 0:
            raise table.error(line, f"gpu_spec: {cell!r} given for a pod without GPUs")
        creation = table.optional_number(line, row, "creation_time", maximum=MAX_TIME_S)
        deletion = table.optional_number(line, row, "deletion_time", maximum=MAX_TIME_S)
        scheduled = table.optional_number(line, row, "scheduled_time", maximum=MAX_TIME_S)
        if creation is not None and deletion is not None and deletion < creation:
            raise table.error(line, f"deletion_time: {deletion:g} is before creation_time {creation:g}")
        if creation is not None and scheduled is not None and scheduled < creation:
            raise table.error(line, f"scheduled_time: {scheduled:g} is before creation_time {creation:g}")
        if deletion is not None and scheduled is not None and scheduled > deletion:
            raise table.error(line, f"scheduled_time: {scheduled:g} is after deletion_time {deletion:g}")
        cols.names.append(name)
        cols.cpu_milli.append(_cpu_milli(table, line, row))
        cols.memory_mib.append(_memory_mib(table, line, row))
        cols.num_gpu.append(num_gpu)
        cols.gpu_milli.append(gpu_milli)
        cols.gpu_spec.append(spec)
        cols.qos.append(table.text(row, "qos") if has_qos else "")
        cols.pod_phase.append(table.text(row, "pod_phase") if has_phase else "")
        cols.creation.append(creation)
        cols.deletion.append(deletion)
        cols.scheduled.append(scheduled)
    return cols


def read_openb_pods(path: str | os.PathLike[str]) -> list[OpenbPod]:
    """Read an openb pod list (full or five-column variant); raise TraceError (file:line) on a
    malformed row: wrong column count, non-integer or negative value, gpu_milli outside 0..1000,
    a GPU shape breaking the convention (num_gpu > 1 needs gpu_milli 1000, num_gpu 0 needs 0),
    duplicate names, or times out of order (creation <= scheduled <= deletion, whichever are given)."""
    cols = _read_pod_columns(path)
    return [
        OpenbPod(
            name=cols.names[i],
            cpu_milli=cols.cpu_milli[i],
            memory_mib=cols.memory_mib[i],
            num_gpu=cols.num_gpu[i],
            gpu_milli=cols.gpu_milli[i],
            gpu_spec=cols.gpu_spec[i],
            qos=cols.qos[i],
            pod_phase=cols.pod_phase[i],
            creation_time=cols.creation[i],
            deletion_time=cols.deletion[i],
            scheduled_time=cols.scheduled[i],
        )
        for i in range(len(cols.names))
    ]


def _times(values: list[float | None]) -> FloatArray:
    out = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    out.setflags(write=False)
    return out


def _ints(values: list[int]) -> IntArray:
    out = np.array(values, dtype=np.int64)
    out.setflags(write=False)
    return out


def read_openb_pods_arrays(path: str | os.PathLike[str]) -> OpenbPodArrays:
    """Read an openb pod list into read-only numpy columns (validated like `read_openb_pods`)."""
    cols = _read_pod_columns(path)
    index: dict[tuple[str, ...], int] = {(): 0}
    spec_ids = [index.setdefault(spec, len(index)) for spec in cols.gpu_spec]
    return OpenbPodArrays(
        names=tuple(cols.names),
        cpu_milli=_ints(cols.cpu_milli),
        memory_mib=_ints(cols.memory_mib),
        num_gpu=_ints(cols.num_gpu),
        gpu_milli=_ints(cols.gpu_milli),
        gpu_spec=_ints(spec_ids),
        specs=tuple(index),
        creation=_times(cols.creation),
        deletion=_times(cols.deletion),
        scheduled=_times(cols.scheduled),
    )


def gpu_spec_affinity(models: tuple[str, ...]) -> NodeAffinity | None:
    """Required node affinity `nvidia.com/gpu.product In [models]`, or None for "any model"."""
    if not models:
        return None
    requirement = NodeSelectorRequirement(key=GPU_PRODUCT_LABEL, operator="In", values=models)
    return NodeAffinity(required=(NodeSelectorTerm(match_expressions=(requirement,)),))


def openb_pod_requests(cpu_milli: int, memory_mib: int, num_gpu: int, gpu_milli: int) -> Resources:
    """The requests of a pod of this shape: cpu, memory and either whole cards or a card slice."""
    requests = {CPU: cpu_milli, MEMORY: memory_mib * MIB}
    if num_gpu >= 1 and gpu_milli == 1000:
        requests[NVIDIA_GPU] = num_gpu * 1000
    elif num_gpu == 1 and gpu_milli > 0:
        requests[GPU_MILLI] = gpu_milli * 1000
    return Resources(requests)


def openb_pod_to_k8s(pod: OpenbPod, namespace: str = DEFAULT_NAMESPACE) -> Pod:
    """One openb pod as a pending Kubernetes Pod (units in the module docstring).

    `created` is the trace's creation_time (0 when absent); the QoS class is kept in the
    `tidegate.io/qos` annotation. The trace's own pod_phase is history, not state: the pod is Pending.
    """
    return Pod(
        name=pod.name,
        namespace=namespace,
        requests=openb_pod_requests(pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_milli),
        annotations={QOS_ANNOTATION: pod.qos} if pod.qos else {},
        affinity=gpu_spec_affinity(pod.gpu_spec),
        created=pod.creation_time or 0.0,
    )


def openb_pods_to_jobs(pods: Iterable[OpenbPod]) -> list[TraceJob]:
    """One single-pod `TraceJob` per pod with both creation and deletion times, in input order.

    Pods lacking either time (the five-column multigpu files) are skipped: the number skipped is
    the input length minus the result length. `submit_s` is creation_time; `duration_s` is how
    long the pod held its resources, deletion - scheduled, or deletion - creation for a pod the trace
    never placed (its lifetime until deleted, the best stand-in the trace has). `wait_s` is
    scheduled - creation when known; user and queue are "" (the trace has neither). Pods deleted at
    the trace's last second (12,902,960 s in the default list) were still running: their durations
    are censored.
    """
    return _pod_jobs(
        (
            pod.name,
            pod.cpu_milli,
            pod.memory_mib,
            pod.num_gpu,
            pod.gpu_milli,
            pod.gpu_spec,
            pod.qos,
            pod.pod_phase,
            pod.creation_time,
            pod.deletion_time,
            pod.scheduled_time,
        )
        for pod in pods
    )


def read_openb_jobs(path: str | os.PathLike[str]) -> list[TraceJob]:
    """`openb_pods_to_jobs(read_openb_pods(path))` without an `OpenbPod` per row in between (what the
    simulator replays)."""
    return read_openb_jobs_counted(path)[0]


def read_openb_jobs_counted(path: str | os.PathLike[str]) -> tuple[list[TraceJob], int]:
    """`read_openb_jobs` and the number of pods it skipped (those lacking creation_time or deletion_time)."""
    cols = _read_pod_columns(path)
    jobs = _pod_jobs(
        zip(
            cols.names,
            cols.cpu_milli,
            cols.memory_mib,
            cols.num_gpu,
            cols.gpu_milli,
            cols.gpu_spec,
            cols.qos,
            cols.pod_phase,
            cols.creation,
            cols.deletion,
            cols.scheduled,
            strict=True,
        )
    )
    return jobs, len(cols.names) - len(jobs)


def _pod_jobs(pods: Iterable[PodFields]) -> list[TraceJob]:
    """The jobs of `openb_pods_to_jobs`, from each pod's fields."""
    jobs: list[TraceJob] = []
    for name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, phase, created, deleted, scheduled in pods:
        if created is None or deleted is None:
            continue
        start = created if scheduled is None else scheduled
        jobs.append(
            TraceJob(
                job_id=name,
                user="",
                queue="",
                gpus_per_pod=num_gpu,
                gpu_milli=gpu_milli,
                pods=1,
                cpu_milli=cpu_milli,
                memory_mib=memory_mib,
                submit_s=created,
                duration_s=max(0.0, deleted - start),
                gpu_spec=gpu_spec,
                state=phase,
                qos=qos,
                wait_s=None if scheduled is None else scheduled - created,
            )
        )
    return jobs
