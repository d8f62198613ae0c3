"""The IDC side of the seed's two-cluster system at 1,000 nodes: how fast `tidegate kube` binds, and how fast its
cloud member carries the pods bound to virtual nodes into the cloud cluster and their status back.

Two v1.20 kube-apiservers + etcd on loopback (tests/kube_apiserver.py): the IDC's, with `--idc` eight-GPU nodes,
and a cloud's (Karpenter's NodeClaim CRD), whose `--virtual` instances the member asks for (the benchmark plays
Karpenter's provisioner and the kubelets, tests/cloud_cluster.py) and registers in the IDC as virtual nodes:
`--idc` + `--virtual` nodes in all. `--pending` one-GPU PodGroups wait, tolerating the cloud. Measured once:
- *bind*: `ClusterScheduler.step` from nothing: read both kinds of node, place every group, write each Binding
  and PodGroup status (eight writes at a time);
- *carry*: the member's sync that creates, in the cloud, each pod bound to a virtual node;
- *status back*: the cloud's kubelets start them, and the member's sync writes each Running status to its IDC pod;
- *baseline*, in the same run on the same API server: the same number of pods placed by a loop that knows where
  each goes (no reading, no scheduling), writing what tidegate writes for each (its Binding, its PodGroup's
  status) one after another: the API server's own pace for a scheduler's writes.

python -m bench.kube_hybrid            # 800 IDC nodes, 200 virtual nodes, 500 pending groups
python -m bench.kube_hybrid --write    # and rewrite the results in BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from kubernetes import client, config

from bench.run_all import BENCHMARKS_MD, load_average, machine, write
from tidegate.fleet.spec import ClusterSpec, GpuSpec, NodePoolSpec, PricingSpec
from tidegate.kube.api import KubeApi, timed
from tidegate.kube.cloud_member import CloudMember
from tidegate.kube.nodeclaims import InstanceState
from tidegate.kube.scheduler import ClusterScheduler

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from cloud_cluster import FakeCloud  # noqa: E402  (the tests' cloud machinery)
from kube_apiserver import install_nodeclaim_crd, kube_apiserver  # noqa: E402

START, END = "<!-- bench:kube-hybrid:start -->", "<!-- bench:kube-hybrid:end -->"
GROUP, VERSION = "scheduling.volcano.sh", "v1beta1"
NAMESPACE = "bench"
POOL = NodePoolSpec(
    cluster="aws",
    gpu=GpuSpec(product="NVIDIA-A100-SXM4-40GB", count=8, memory_mib=40960),
    cpu="96",
    memory="768Gi",
    pricing=PricingSpec(model="spot", per_hour=10.81),
    labels={"node.kubernetes.io/instance-type": "p4d.24xlarge"},
)
TOLERATE = [{"key": "cloud.provider", "operator": "Exists", "effect": "NoSchedule"}]


def populate_idc(core: client.CoreV1Api, custom: client.CustomObjectsApi, nodes: int, pending: int) -> None:
    core.create_namespace({"metadata": {"name": NAMESPACE}})
    gpus = {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8", "pods": "110"}
    for i in range(nodes):
        name = f"idc-{i}"
        status = {"capacity": gpus, "allocatable": gpus, "conditions": [{"type": "Ready", "status": "True"}]}
        core.create_node({"metadata": {"name": name, "labels": {"volcano.sh/node-type": "idc"}}, "status": status})
        core.patch_node(name, {"spec": {"taints": []}})  # no node controller here to lift not-ready
    queue = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": "default"}, "spec": {}}
    custom.create_cluster_custom_object(GROUP, VERSION, "queues", queue)
    for i in range(pending):
        pending_group(core, custom, f"job-{i}", cloud=i % 5 < 2)  # two in five bound to virtual nodes


def pending_group(core: client.CoreV1Api, custom: client.CustomObjectsApi, name: str, cloud: bool = False) -> None:
    group = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": name}}
    custom.create_namespaced_custom_object(
        GROUP, VERSION, NAMESPACE, "podgroups", {**group, "spec": {"minMember": 1, "queue": "default"}}
    )
    ask = {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"}
    container = {"name": "main", "image": "trainer", "resources": {"requests": ask, "limits": ask}}
    meta = {"name": f"{name}-0", "annotations": {"scheduling.k8s.io/group-name": name}}
    spec = {"schedulerName": "volcano", "tolerations": TOLERATE, "containers": [container]}
    if cloud:  # as the burst queue's pods land on the cloud when the IDC is full
        spec["nodeSelector"] = {"volcano.sh/node-type": "cloud-spot"}
    core.create_namespaced_pod(NAMESPACE, {"metadata": meta, "spec": spec})


def run(idc_nodes: int, virtual: int, pending: int) -> list[tuple[str, float, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        for side in ("idc", "cloud"):
            (Path(tmp) / side).mkdir()
        with kube_apiserver(Path(tmp) / "idc") as idc, kube_apiserver(Path(tmp) / "cloud") as cloud:
            return measure(idc, cloud, idc_nodes, virtual, pending)


def measure(idc: Path, cloud: Path, idc_nodes: int, virtual: int, pending: int) -> list[tuple[str, float, int]]:
    install_nodeclaim_crd(cloud)
    admin = config.new_client_from_config(config_file=str(idc))
    core, custom = client.CoreV1Api(admin), client.CustomObjectsApi(admin)
    populate_idc(core, custom, idc_nodes, pending)
    member = CloudMember(
        "aws",
        ClusterSpec(type="cloud", provider="aws", region="us-east-1", latency_ms=2),
        {"p4d-spot": POOL},
        timed(config.new_client_from_config(config_file=str(idc)), 30.0),
        timed(config.new_client_from_config(config_file=str(cloud)), 30.0),
        watch=False,
    )
    fake = FakeCloud(cloud, "aws", NAMESPACE)
    member.sync(0.0)
    for _ in range(virtual):
        member.provision("p4d-spot")
    fake.provision()
    member.sync(1.0)
    ready = [i for i in member.instances().values() if i.state is InstanceState.READY]
    assert len(ready) == virtual, f"{len(ready)} of {virtual} instances ready"
    api = KubeApi(str(idc), watch=False)
    try:
        scheduler = ClusterScheduler(api)
        start = time.perf_counter()
        bound = len(scheduler.step(2.0).binds)
        bind_s = time.perf_counter() - start
        on_virtual = sum(
            1 for pod in core.list_namespaced_pod(NAMESPACE).items if pod.spec.node_name in {i.name for i in ready}
        )
        start = time.perf_counter()
        member.sync(3.0)
        carry_s = time.perf_counter() - start
        carried = len(fake.all_pods())
        fake.run()
        start = time.perf_counter()
        member.sync(4.0)
        back_s = time.perf_counter() - start
        baseline_s = naive_binds(core, custom, idc_nodes, bound)
    finally:
        api.close()
        member.close()
    return [
        (
            f"bind: place and bind {bound:,} pods on {idc_nodes + virtual:,} nodes ({on_virtual} on virtual nodes)",
            bind_s,
            bound,
        ),
        (f"carry: create the {carried} pods bound to virtual nodes in the cloud", carry_s, carried),
        (f"status back: write their {carried} Running statuses to the IDC pods", back_s, carried),
        (f"baseline: {bound:,} Bindings and PodGroup statuses one after another, targets known", baseline_s, bound),
    ]


def naive_binds(core: client.CoreV1Api, custom: client.CustomObjectsApi, nodes: int, count: int) -> float:
    """The same number of new pods bound one at a time to nodes chosen beforehand (no read, no scheduling)."""
    for i in range(count):
        pending_group(core, custom, f"naive-{i}")
    start = time.perf_counter()
    for i in range(count):
        name = f"naive-{i}-0"
        target = {"apiVersion": "v1", "kind": "Node", "name": f"idc-{i % nodes}"}
        core.create_namespaced_binding(
            NAMESPACE, {"metadata": {"name": name}, "target": target}, _preload_content=False
        )
    return time.perf_counter() - start


def report(rows: list[tuple[str, float, int]], idc: int, virtual: int, pending: int, load: str) -> str:
    bind, baseline = rows[0], rows[3]
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {machine()}; load average {load} before, {load_average()} after.",
        f"Command: `python -m bench.kube_hybrid` ({idc:,} IDC nodes, {virtual:,} virtual nodes of a cloud member, "
        f"{pending:,} pending one-GPU PodGroups; each measured once).",
        "",
        "| what | seconds | per second |",
        "|---|---:|---:|",
        *(f"| {what} | {seconds:.3f} | {count / seconds:,.0f} |" for what, seconds, count in rows),
        "",
        f"tidegate binds **{bind[2] / bind[1]:,.0f} pods a second** at {idc + virtual:,} nodes, read and scheduling "
        f"included: **{(bind[2] / bind[1]) / (baseline[2] / baseline[1]):.1f}x** the pace of the same writes made one "
        "after another with nothing to read or decide (the baseline), as it writes eight at a time.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idc", type=int, default=800)
    parser.add_argument("--virtual", type=int, default=200)
    parser.add_argument("--pending", type=int, default=500)
    parser.add_argument("--write", action="store_true", help="rewrite the results in BENCHMARKS.md")
    args = parser.parse_args(argv)
    load = load_average()
    rows = run(args.idc, args.virtual, args.pending)
    if rows[0][2] != args.pending:
        print(f"expected {args.pending} binds, got {rows[0][2]}", file=sys.stderr)
        return 1
    text = report(rows, args.idc, args.virtual, args.pending, load)
    print(text)
    if args.write:
        write(text, BENCHMARKS_MD, START, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
