"""Small simulation folders written from Python, for hand-checkable engine tests."""

from __future__ import annotations

from pathlib import Path

import yaml


def scheduler_and_idc(actions: str, cache: str = "") -> str:
    """The scheduler configuration (capacity queues) and the IDC cluster (with its dataset `cache`, if
    any) the test folders use."""
    return f"""apiVersion: tidegate.io/v1alpha1
kind: SchedulerConfiguration
metadata: {{name: s}}
actions: "{actions}"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}]
- plugins: [{{name: drf}}, {{name: predicates}}, {{name: capacity}}, {{name: nodeorder}}, {{name: binpack}}]
---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {{name: idc}}
spec: {{type: idc, region: bj{", cache: " + cache if cache else ""}}}
"""


def dev_and_prod(deserved: int, capability: int, nodes: int) -> str:
    """dev and prod under one parent, each with these GPUs deserved and capability (reclaimable), the
    reclaiming scheduler configuration, and an IDC of `nodes` 8-GPU nodes."""
    limits = f'capability: {{nvidia.com/gpu: "{capability}"}}, deserved: {{nvidia.com/gpu: "{deserved}"}}'
    queues = "".join(
        f"apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {{name: {name}}}\n"
        f"spec: {{weight: 1, parent: pool, reclaimable: true, {limits}}}\n---\n"
        for name in ("dev", "prod")
    )
    pool = f"spec: {{cluster: idc, count: {nodes}, gpu: {{product: A100, count: 8, memoryMiB: 81920}}}}\n"
    return (
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: pool}\nspec: {weight: 1}\n---\n"
        + queues
        + scheduler_and_idc("enqueue, allocate, backfill, reclaim")
        + "---\napiVersion: tidegate.io/v1alpha1\nkind: NodePool\nmetadata: {name: idc-a100}\n"
        + pool
    )


#: pool > dev (8 GPUs deserved and capability) and burst-cloud (capability 16 GPUs).
BURST_QUEUES = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: pool}
spec: {weight: 1}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: dev}
spec: {weight: 1, parent: pool, capability: {nvidia.com/gpu: "8"}, deserved: {nvidia.com/gpu: "8"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: burst-cloud}
spec: {weight: 1, parent: pool, capability: {nvidia.com/gpu: "16"}}
---
"""

QUEUES = (
    BURST_QUEUES
    + scheduler_and_idc("enqueue, allocate, backfill")
    + """---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: aliyun}
spec: {type: cloud, region: hz, provider: aliyun, latencyMs: 35}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {name: idc-a100}
spec: {cluster: idc, count: 1, gpu: {product: A100, count: 8, memoryMiB: 81920}}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {name: cloud-a100}
spec:
  cluster: aliyun
  maxCount: 2
  provisioningDelaySeconds: 60
  gpu: {product: A100, count: 8, memoryMiB: 40960}
  pricing: {model: spot, perHour: 36, reservedMonthly: 7200}
  scaleTargetRef: {name: virtual-kubelet-cloud}
---
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: cloud-burst-hpa}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: virtual-kubelet-cloud}
  minReplicas: 0
  maxReplicas: 2
  metrics:
  - type: External
    external:
      metric:
        name: volcano_queue_pending_jobs_duration_seconds
        selector: {matchLabels: {queue: pool}}
      target: {type: AverageValue, averageValue: "300"}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 600
      policies:
      - {type: Percent, value: 10, periodSeconds: 60}
---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: idc-only}
spec: {quotas: elastic}
---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: burst}
spec: {quotas: elastic, burst: {enabled: true, queue: burst-cloud, afterSeconds: 300}}
"""
)


HELIOS_HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"


def write_helios_sim(folder: Path, base: str, jobs_csv: str, workload_spec: dict[str, object]) -> Path:
    """A folder with the `base` manifests, a Helios-style jobs.csv and a Workload `w` reading it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "base.yaml").write_text(base)
    (folder / "jobs.csv").write_text(HELIOS_HEADER + jobs_csv)
    workload = {
        "apiVersion": "tidegate.io/v1alpha1",
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": {"source": "helios", "path": "jobs.csv", **workload_spec},
    }
    (folder / "workload.yaml").write_text(yaml.safe_dump(workload))
    return folder


def write_sim(folder: Path, jobs_csv: str, scenarios: list[str], pinned_fraction: float = 0.0) -> Path:
    """A one-node IDC, a two-node cloud pool behind the HPA, and jobs from a Helios-style CSV."""
    simulation = {
        "apiVersion": "tidegate.io/v1alpha1",
        "kind": "Simulation",
        "metadata": {"name": "s"},
        "spec": {"workload": "w", "scenarios": scenarios},
    }
    spec = {
        "queueByVc": {"vc1": "dev", "vc2": "burst-cloud"},
        "queues": [{"name": "dev", "share": 1, "pinnedFraction": pinned_fraction}],
    }
    write_helios_sim(folder, QUEUES + "---\n" + yaml.safe_dump(simulation), jobs_csv, spec)
    return folder


ELASTIC = (
    dev_and_prod(deserved=16, capability=32, nodes=4)
    + """---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: static}
spec: {quotas: static}
---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: elastic}
spec: {quotas: elastic}
---
apiVersion: tidegate.io/v1alpha1
kind: Workload
metadata: {name: w}
spec:
  source: synthetic
  synthetic:
    days: 2
    jobsPerDay: 120
    seed: 7
    gpuCounts: {1: 0.3, 2: 0.2, 4: 0.2, 8: 0.2, 16: 0.1}
    durationMedianSeconds: 3600
    durationSigma: 0.8
  queues:
  - {name: dev, share: 0.5, users: 4, tideShiftHours: 0}
  - {name: prod, share: 0.5, users: 4, tideShiftHours: 12}
---
apiVersion: tidegate.io/v1alpha1
kind: Simulation
metadata: {name: s}
spec: {workload: w, scenarios: [static, elastic]}
"""
)


def write_elastic_sim(folder: Path) -> Path:
    """Four 8-GPU IDC nodes shared by dev and prod (deserved 16 GPUs each, capability 32, reclaimable),
    under a tidal synthetic load: lending and reclaim happen every day."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "all.yaml").write_text(ELASTIC)
    return folder


RECLAIM_ONE_NODE = (
    dev_and_prod(deserved=4, capability=8, nodes=1)
    + """---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {name: elastic}
spec: {quotas: elastic}
---
apiVersion: tidegate.io/v1alpha1
kind: Simulation
metadata: {name: s}
spec: {workload: w, scenarios: [elastic]}
"""
)


def write_reclaim_sim(folder: Path, jobs_csv: str, checkpoint_every: float) -> Path:
    """One 8-GPU IDC node shared by dev and prod (deserved 4 GPUs each, capability 8, reclaimable);
    Helios-style jobs, vc1 in dev and vc2 in prod, checkpointing every `checkpoint_every` seconds."""
    spec = {"queueByVc": {"vc1": "dev", "vc2": "prod"}, "checkpointEverySeconds": checkpoint_every}
    return write_helios_sim(folder, RECLAIM_ONE_NODE, jobs_csv, spec)


def spot_folder(
    folder: Path,
    jobs_csv: str,
    *,
    cloud_nodes: int,
    interruption: dict[str, object] | None,
    workload: dict[str, object],
    scenarios: dict[str, dict[str, object]],
    template: str = "",
) -> Path:
    """One 8-GPU IDC node (queue dev, capability 8) and a fixed pool of `cloud_nodes` 8-GPU AWS spot
    nodes (36 an hour spot, 100 on demand; no HPA) for the burst-cloud queue (capability 16): vc1 jobs
    go to dev, vc2 jobs to burst-cloud. `template` is an optional vcjob manifest (the jobTemplate)."""
    base = (
        BURST_QUEUES
        + scheduler_and_idc("enqueue, allocate, backfill")
        + "---\napiVersion: tidegate.io/v1alpha1\nkind: Cluster\nmetadata: {name: aws}\n"
        + "spec: {type: cloud, region: us-east-1, provider: aws}\n---\n"
        + "apiVersion: tidegate.io/v1alpha1\nkind: NodePool\nmetadata: {name: idc-a100}\n"
        + "spec: {cluster: idc, count: 1, gpu: {product: A100, count: 8, memoryMiB: 81920}}\n---\n"
    )
    pool = {
        "apiVersion": "tidegate.io/v1alpha1",
        "kind": "NodePool",
        "metadata": {"name": "spot"},
        "spec": {
            "cluster": "aws",
            "count": cloud_nodes,
            "gpu": {"product": "A100", "count": 8, "memoryMiB": 40960},
            "pricing": {"model": "spot", "perHour": 36, "onDemandPerHour": 100},
        },
    }
    if interruption is not None:
        pool["spec"]["interruption"] = interruption  # type: ignore[index]
    docs: list[dict[str, object]] = [pool]
    for name, spec in scenarios.items():
        docs.append(
            {"apiVersion": "tidegate.io/v1alpha1", "kind": "Scenario", "metadata": {"name": name}, "spec": spec}
        )
    docs.append(
        {
            "apiVersion": "tidegate.io/v1alpha1",
            "kind": "Simulation",
            "metadata": {"name": "s"},
            "spec": {"workload": "w", "scenarios": list(scenarios)},
        }
    )
    text = base + "---\n".join(yaml.safe_dump(doc) for doc in docs) + (f"---\n{template}" if template else "")
    spec = {"queueByVc": {"vc1": "dev", "vc2": "burst-cloud"}, **workload}
    return write_helios_sim(folder, text, jobs_csv, spec)


def data_gravity_base(cloud_nodes: int, link: str, cache: str, datasets: dict[str, str], scenario: str) -> str:
    """One 8-GPU IDC node (dev capped at 8 GPUs) with a dataset `cache`, `cloud_nodes` fixed 8-GPU cloud
    nodes (no autoscaler; 36 a node-hour) behind `link`, the `datasets`, and one Scenario `s` that
    bursts (after 300 s or at capability) with `scenario` fields added."""
    docs = "".join(
        f"---\napiVersion: tidegate.io/v1alpha1\nkind: Dataset\nmetadata: {{name: {name}}}\nspec: {{size: {size}}}\n"
        for name, size in datasets.items()
    )
    return f"""apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: pool}}
spec: {{weight: 1}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: dev}}
spec: {{weight: 1, parent: pool, capability: {{nvidia.com/gpu: "8"}}, deserved: {{nvidia.com/gpu: "8"}}}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {{name: burst-cloud}}
spec: {{weight: 1, parent: pool, capability: {{nvidia.com/gpu: "16"}}}}
---
{scheduler_and_idc("enqueue, allocate, backfill", cache)}---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {{name: aliyun}}
spec: {{type: cloud, region: hz, provider: aliyun{", link: " + link if link else ""}}}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {{name: idc-a100}}
spec: {{cluster: idc, count: 1, gpu: {{product: A100, count: 8, memoryMiB: 81920}}}}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {{name: cloud-a100}}
spec:
  cluster: aliyun
  count: {cloud_nodes}
  gpu: {{product: A100, count: 8, memoryMiB: 40960}}
  pricing: {{model: on-demand, perHour: 36}}
{docs}---
apiVersion: tidegate.io/v1alpha1
kind: Scenario
metadata: {{name: s}}
spec: {{quotas: elastic, burst: {{enabled: true, queue: burst-cloud, afterSeconds: 300}}{scenario}}}
---
apiVersion: tidegate.io/v1alpha1
kind: Simulation
metadata: {{name: s}}
spec: {{workload: w, scenarios: [s]}}
"""


def write_data_sim(
    folder: Path,
    jobs_csv: str,
    *,
    cloud_nodes: int = 1,
    link: str = "{bandwidthGbps: 10, perPodGbps: 8}",
    cache: str = "",
    datasets: dict[str, str] | None = None,
    scenario: str = "",
    workload: dict[str, object] | None = None,
) -> Path:
    """`data_gravity_base` with Helios-style jobs (vc1 in dev, vc2 in burst-cloud) all reading dataset `d`
    (10 GB unless `datasets` says otherwise), plus `workload` fields."""
    datasets = datasets if datasets is not None else {"d": "10G"}
    spec: dict[str, object] = {
        "queueByVc": {"vc1": "dev", "vc2": "burst-cloud"},
        "datasets": [{"name": name} for name in datasets],
        **(workload or {}),
    }
    base = data_gravity_base(cloud_nodes, link, cache, datasets, scenario)
    return write_helios_sim(folder, base, jobs_csv, spec)
