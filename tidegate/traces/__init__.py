"""Workload and cluster traces: readers for public GPU traces and a tidal workload generator.

Every workload becomes a list of `TraceJob` (records.py: units and the GPU convention), which the
simulator turns into vcjobs; the openb node and pod lists also convert straight to Kubernetes
`Node` and `Pod` objects. Readers raise `TraceError` ("file:line: column: problem") on bad rows.
This package sits above tidegate.model and imports nothing else from tidegate.
"""

from tidegate.traces.helios import (
    EarthGpuNumber,
    HeliosSequence,
    read_earth_gpu_number,
    read_helios_jobs,
    read_helios_sequence,
)
from tidegate.traces.openb import (
    GPU_MEMORY_MIB_BY_MODEL,
    QOS_ANNOTATION,
    OpenbNode,
    OpenbPod,
    OpenbPodArrays,
    gpu_spec_affinity,
    openb_node_to_k8s,
    openb_nodes_to_k8s,
    openb_pod_requests,
    openb_pod_to_k8s,
    openb_pods_to_jobs,
    read_openb_jobs,
    read_openb_nodes,
    read_openb_pods,
    read_openb_pods_arrays,
)
from tidegate.traces.records import (
    DEFAULT_CPU_MILLI_PER_GPU,
    DEFAULT_MEMORY_MIB_PER_GPU,
    GPUS_PER_NODE,
    TraceError,
    TraceJob,
    split_gang,
)
from tidegate.traces.synthetic import (
    DEFAULT_DURATION_MEDIAN_S,
    DEFAULT_DURATION_SIGMA,
    DEFAULT_GPU_COUNTS,
    DEFAULT_SHARED_GPU_MILLI,
    HELIOS_IRREGULAR_DAYS,
    QueueShare,
    SyntheticWorkload,
    TideProfile,
    expected_jobs,
    generate,
    tide_from_helios,
)
from tidegate.traces.tiresias import read_tiresias

__all__ = [
    "DEFAULT_CPU_MILLI_PER_GPU",
    "DEFAULT_DURATION_MEDIAN_S",
    "DEFAULT_DURATION_SIGMA",
    "DEFAULT_GPU_COUNTS",
    "DEFAULT_MEMORY_MIB_PER_GPU",
    "DEFAULT_SHARED_GPU_MILLI",
    "GPUS_PER_NODE",
    "GPU_MEMORY_MIB_BY_MODEL",
    "HELIOS_IRREGULAR_DAYS",
    "QOS_ANNOTATION",
    "EarthGpuNumber",
    "HeliosSequence",
    "OpenbNode",
    "OpenbPod",
    "OpenbPodArrays",
    "QueueShare",
    "SyntheticWorkload",
    "TideProfile",
    "TraceError",
    "TraceJob",
    "expected_jobs",
    "generate",
    "gpu_spec_affinity",
    "openb_node_to_k8s",
    "openb_nodes_to_k8s",
    "openb_pod_requests",
    "openb_pod_to_k8s",
    "openb_pods_to_jobs",
    "read_earth_gpu_number",
    "read_helios_jobs",
    "read_helios_sequence",
    "read_openb_jobs",
    "read_openb_nodes",
    "read_openb_pods",
    "read_openb_pods_arrays",
    "read_tiresias",
    "split_gang",
    "tide_from_helios",
]
