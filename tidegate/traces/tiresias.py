"""The Tiresias simulator's job traces (SymbioticLab/Tiresias, e.g. `simulator/60_job.csv`).

Header `job_id,num_gpu,submit_time,iterations,model_name,duration,interval`, times in seconds:
`submit_time` is when the job arrives, `duration` how long it runs, `interval` the gap to the next
arrival (redundant with submit_time, not used). The trace records GPUs only, so the servers' size
comes from the caller (`gpus_per_node`, 8 by default; a simulation's Workload gives its IDC's, see
sim/spec.py): a job of `num_gpu` GPUs becomes a gang of
ceil(num_gpu / gpus_per_node) equal pods (see `records.split_gang`: on 8-GPU servers 16 GPUs -> 2 pods
of 8, 1..8 GPUs -> one pod; on 4-GPU servers 8 GPUs -> 2 pods of 4). CPU and memory are not in the
trace and come per GPU from the keyword arguments (defaults in records.py).
"""

from __future__ import annotations

import os

from tidegate.model.manifests import MAX_JOB_PODS
from tidegate.traces.records import (
    DEFAULT_CPU_MILLI_PER_GPU,
    DEFAULT_MEMORY_MIB_PER_GPU,
    GPUS_PER_NODE,
    CsvTable,
    TraceJob,
    split_gang,
)

TIRESIAS_COLUMNS = ("job_id", "num_gpu", "submit_time", "duration")


def read_tiresias(
    path: str | os.PathLike[str],
    *,
    gpus_per_node: int = GPUS_PER_NODE,
    cpu_milli_per_gpu: int = DEFAULT_CPU_MILLI_PER_GPU,
    memory_mib_per_gpu: int = DEFAULT_MEMORY_MIB_PER_GPU,
) -> list[TraceJob]:
    """Read a Tiresias job CSV into whole-card gang jobs, in file order, with queue and user "".

    Raises TraceError (file:line) for a missing column, wrong column count, a non-numeric or negative
    value, num_gpu below 1 or above 10,000 servers' GPUs, or a duplicate job_id.
    """
    table = CsvTable(path, TIRESIAS_COLUMNS)
    has_model = table.has("model_name")
    jobs: list[TraceJob] = []
    seen: set[str] = set()
    for line, row in table.rows:
        job_id = table.text(row, "job_id")
        if not job_id:
            raise table.error(line, "job_id: empty")
        if job_id in seen:
            raise table.error(line, f"job_id: duplicate {job_id!r}")
        seen.add(job_id)
        gpus = table.integer(
            line,
            row,
            "num_gpu",
            minimum=1,
            maximum=gpus_per_node * MAX_JOB_PODS,
            what=f"{MAX_JOB_PODS:,} pods of {gpus_per_node} GPUs",
        )
        pods, per_pod = split_gang(gpus, gpus_per_node)
        jobs.append(
            TraceJob(
                job_id=job_id,
                user="",
                queue="",
                gpus_per_pod=per_pod,
                gpu_milli=1000,
                pods=pods,
                cpu_milli=cpu_milli_per_gpu * per_pod,
                memory_mib=memory_mib_per_gpu * per_pod,
                submit_s=table.time(line, row, "submit_time"),
                duration_s=table.time(line, row, "duration"),
                model_name=table.text(row, "model_name") if has_model else "",
            )
        )
    return jobs
