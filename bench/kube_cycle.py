"""`tidegate kube`'s cycle against a real kube-apiserver: what one scheduling period costs.

A v1.20 kube-apiserver + etcd on loopback (tests/kube_apiserver.py; binaries from tools/build-kube-apiserver)
holds a cluster of `--nodes` eight-GPU nodes, `--running` one-GPU pods already bound (half the GPUs), and
`--pending` one-pod PodGroups waiting. Measured, each the median of `--repeat` runs:
- *list*: reading Nodes, PriorityClasses, Queues, PodGroups and Pods (`KubeApi.list_objects`);
- *first cycle*: `ClusterScheduler.step` from nothing: read, build the scheduler, place every pending
  group and write its Bindings and PodGroup status (the writes are most of it);
- *steady cycle*: `step` when nothing placeable changed: read, compare, a cycle with nothing to do; reading
  by a list every period (nothing changed), and following watches (`tidegate kube`'s default: a read costs
  no API call) with one node relabelled before each period;
- *quiet period*: following watches, nothing changed since a cycle that did nothing: the period is left out;
- *baseline*: what a stateless scheduler does every period on the same cluster: read, parse, and a fresh
  `schedule(snapshot)` over everything (no writes).

python -m bench.kube_cycle             # 1,000 nodes, 4,000 running pods, 500 pending groups
python -m bench.kube_cycle --write     # and rewrite the results in BENCHMARKS.md
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client, config

from bench.run_all import BENCHMARKS_MD, load_average, machine, write
from tidegate.kube.api import KubeApi
from tidegate.kube.reading import SOURCE
from tidegate.kube.scheduler import ClusterScheduler
from tidegate.model.expand import workload_from
from tidegate.model.manifests import load_objects
from tidegate.scheduler.scheduler import schedule
from tidegate.scheduler.snapshot import Snapshot

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from kube_apiserver import kube_apiserver  # noqa: E402  (the tests' harness)

START, END = "<!-- bench:kube-cycle:start -->", "<!-- bench:kube-cycle:end -->"
GROUP, VERSION = "scheduling.volcano.sh", "v1beta1"


def populate(kubeconfig: Path, nodes: int, running: int, pending: int) -> None:
    api = config.new_client_from_config(config_file=str(kubeconfig))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    gpus = {"cpu": "96", "memory": "768Gi", "nvidia.com/gpu": "8", "pods": "110"}
    for i in range(nodes):
        name = f"node-{i}"
        core.create_node({"metadata": {"name": name}, "status": {"capacity": gpus, "allocatable": gpus}})
        core.patch_node(name, {"spec": {"taints": []}})  # no node controller here to lift not-ready
    queue = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Queue",
        "metadata": {"name": "default"},
        "spec": {"weight": 1},
    }
    custom.create_cluster_custom_object(GROUP, VERSION, "queues", queue)
    ask = {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": "1"}
    container = [{"name": "main", "image": "x", "resources": {"requests": ask, "limits": ask}}]
    for i in range(running):
        name = f"running-{i}"
        core.create_namespaced_pod("default", {"metadata": {"name": name}, "spec": {"containers": container}})
        target = {"apiVersion": "v1", "kind": "Node", "name": f"node-{i % nodes}"}
        binding = {"metadata": {"name": name}, "target": target}
        core.create_namespaced_binding("default", binding, _preload_content=False)
    for i in range(pending):
        name = f"job-{i}"
        spec = {"minMember": 1, "queue": "default"}
        group = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", "podgroups", group)
        meta = {"name": f"{name}-0", "annotations": {"scheduling.k8s.io/group-name": name}}
        core.create_namespaced_pod(
            "default", {"metadata": meta, "spec": {"schedulerName": "volcano", "containers": container}}
        )


def timed(action: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def stateless(api: KubeApi) -> None:
    """The baseline: read everything and schedule it afresh, as a scheduler keeping no state would."""
    ms = load_objects(api.list_objects(), SOURCE)
    workload = workload_from(ms)
    pods = [pod for group in workload.groups for pod in workload.pods_by_group[group.key]]
    schedule(Snapshot(nodes=ms.nodes, queues=ms.queues, groups=workload.groups, pods=pods, now=0.0))


def run(nodes: int, running: int, pending: int, repeat: int) -> tuple[list[tuple[str, float]], int]:
    with tempfile.TemporaryDirectory() as tmp, kube_apiserver(Path(tmp)) as kubeconfig:
        populate(kubeconfig, nodes, running, pending)
        listing, watching = KubeApi(str(kubeconfig), watch=False), KubeApi(str(kubeconfig), watch=True)
        try:
            listed = timed(listing.list_objects, repeat)
            scheduler = ClusterScheduler(listing)
            start = time.perf_counter()
            first = scheduler.step(0.0)
            first_s = time.perf_counter() - start
            steady = timed(lambda: scheduler.step(1.0), repeat)
            follower = ClusterScheduler(watching)
            follower.step(2.0)  # its first read lists; it finds everything placed
            follower.step(3.0)  # an idle cycle: from now on, nothing changed means nothing to do
            quiet = timed(lambda: follower.step(4.0), repeat)
            core = client.CoreV1Api(watching.client)

            def relabel(i: int) -> None:
                core.patch_node("node-0", {"metadata": {"labels": {"tick": str(i)}}})

            def heartbeat(i: int) -> None:
                ready = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": f"tick {i}"}
                core.patch_node_status("node-1", {"status": {"conditions": [ready]}})

            def other_pod(i: int) -> None:
                container = [{"name": "main", "image": "x", "resources": {"requests": {"cpu": "1"}}}]
                spec = {"nodeName": "node-2", "containers": container}
                core.create_namespaced_pod("default", {"metadata": {"name": f"other-{i}"}, "spec": spec})

            changed = {
                name: changed_period(watching, follower, change, repeat)
                for name, change in (("relabel", relabel), ("heartbeat", heartbeat), ("other", other_pod))
            }
            baseline = timed(lambda: stateless(listing), repeat)
        finally:
            watching.close()
        rows = [
            ("list (read the cluster)", listed),
            (f"first cycle (place and bind {len(first.binds):,} pods)", first_s),
            ("steady cycle, listing every period (nothing changed)", steady),
            ("steady cycle, following watches: a node relabelled (node table rebuilt)", changed["relabel"]),
            (
                "steady cycle, following watches: a node's status heartbeat (nothing the scheduler reads)",
                changed["heartbeat"],
            ),
            (
                "steady cycle, following watches: another scheduler's pod on a node (node resized in place)",
                changed["other"],
            ),
            ("quiet period, following watches (nothing changed since an idle cycle: left out)", quiet),
            ("baseline: list + fresh schedule(snapshot)", baseline),
        ]
        return rows, len(first.binds)


def changed_period(api: KubeApi, scheduler: ClusterScheduler, change: Callable[[int], None], repeat: int) -> float:
    """The median period after one change made before each: the watch brings it, then the period runs."""
    times = []
    for i in range(repeat):
        version = api.version()
        change(i)
        while api.version() == version:
            time.sleep(0.005)
        times.append(timed(lambda: scheduler.step(5.0), 1))
    return statistics.median(times)


def report(rows: list[tuple[str, float]], nodes: int, running: int, pending: int, repeat: int, load: str) -> str:
    baseline = rows[7][1]
    lines = [
        f"Measured {time.strftime('%Y-%m-%d')} on {machine()}; load average {load} before, {load_average()} after.",
        f"Command: `python -m bench.kube_cycle` ({nodes:,} nodes, {running:,} running pods, {pending:,} pending "
        f"one-pod PodGroups; median of {repeat} runs, the first cycle once).",
        "",
        "| what | seconds |",
        "|---|---:|",
        *(f"| {what} | {seconds:.3f} |" for what, seconds in rows),
        "",
        f"Steady cycle vs the stateless baseline, following watches: **{baseline / rows[3][1]:.0f}x** less time with a "
        f"node relabelled, **{baseline / rows[4][1]:.0f}x** with a heartbeat, **{baseline / rows[5][1]:.0f}x** with "
        f"another scheduler's pod; {baseline / rows[2][1]:.1f}x listing every period; a quiet period is left out "
        f"({rows[6][1] * 1e3:.2f} ms).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--running", type=int, default=4000)
    parser.add_argument("--pending", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write", action="store_true", help="rewrite the results in BENCHMARKS.md")
    args = parser.parse_args(argv)
    load = load_average()
    rows, bound = run(args.nodes, args.running, args.pending, args.repeat)
    if bound != args.pending:
        print(f"expected {args.pending} binds, got {bound}", file=sys.stderr)
        return 1
    text = report(rows, args.nodes, args.running, args.pending, args.repeat, load)
    print(text)
    if args.write:
        write(text, BENCHMARKS_MD, START, END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
