"""Properties of `tidegate kube` under random sequences of what happens in a cluster (hypothesis), against
the in-memory API server of test_kube_scheduler.py: PodGroups and pods created, pods finishing, groups
deleted, nodes added, relabelled, cordoned and removed, pods of other schedulers bound, the scheduler
restarted (a new process reading the cluster back), and scheduling periods. After each period:

- no node holds more GPUs than it has, counting every running pod (ours and other schedulers');
- gangs are whole: a PodGroup has none of its pods bound by us, or at least minMember;
- tidegate binds only its own pods, to nodes that exist and that they tolerate, each pod once;
- a PodGroup marked Running has its gang bound.

A second run adds two reclaimable queues, reclaim, and evictions that take their time (an evicted pod
stays, holding its room, until it is gone): there each pod is evicted at most once, restarts included,
and a pod nominated to a node is bound there if at all while the node exists. A third adds cloud burst,
bare pods and pods pinned to the IDC: a pinned pod is never bound to a cloud node, nor moved to the
burst queue. A fourth runs the fleet: virtual nodes tidegate registers for a cloud pool, spot notices (a
node's node-termination-handler taint), the cloud's link going and coming (its nodes' Ready), time passing
(the fleet's timers), and pinned pods that tolerate every taint: a pinned (sensitive) pod still never reaches
a virtual node, whatever happens.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import yaml
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from test_kube_scheduler import RECLAIMABLE_QUEUES, RECLAIMING, FakeApi, GracefulApi, group, pod

from tidegate.fleet.burst import Burst
from tidegate.fleet.pool import Pool
from tidegate.fleet.spec import ClusterSpec, GpuSpec, NodePoolSpec, PricingSpec
from tidegate.kube.scheduler import ClusterScheduler, Fleet
from tidegate.model.objects import SchedulerConfiguration

QUEUE = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
spec: {weight: 1}
"""
TOLERATE = "tolerations: [{key: cloud.provider, operator: Exists, effect: NoSchedule}]"

operation = st.one_of(
    # members, GPUs each, tolerating the cloud, in prod (with reclaim) or pinned to the IDC (with burst)
    st.tuples(st.just("gang"), st.integers(1, 3), st.sampled_from([1, 2, 4, 8]), st.booleans(), st.booleans()),
    st.tuples(st.just("finish"), st.integers(0, 99)),
    st.tuples(st.just("delete"), st.integers(0, 99)),
    st.tuples(st.just("node"), st.booleans()),
    st.tuples(st.just("relabel"), st.integers(0, 9)),
    st.tuples(st.just("cordon"), st.integers(0, 9), st.booleans()),
    st.tuples(st.just("remove"), st.integers(0, 9)),
    st.tuples(st.just("theirs"), st.integers(0, 9), st.sampled_from([1, 2])),
    st.tuples(st.just("restart")),
    st.tuples(st.just("step")),
)
#: With burst: bare pods too (GPUs, pinned).
bursting_operation = st.one_of(operation, st.tuples(st.just("bare"), st.sampled_from([1, 2, 4, 8]), st.booleans()))
BURST_QUEUE = """
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: burst-cloud}
spec: {weight: 1}
"""
PINNED = 'nodeSelector: {"volcano.sh/node-type": idc}'
#: With reclaim: prod's gangs more often (each may reclaim), and the evicted pods going.
prod_gang = st.tuples(st.just("gang"), st.integers(1, 2), st.sampled_from([1, 2, 4]), st.just(False), st.just(True))
reclaiming_operation = st.one_of(operation, prod_gang, prod_gang.map(tuple), st.tuples(st.just("gone")))


def node(name: str, cloud: bool) -> dict[str, Any]:
    kind = "cloud-spot" if cloud else "idc"
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"volcano.sh/node-type": kind}},
        "spec": {},
        "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8", "pods": "110"}},
    }
    if cloud:
        doc["spec"]["taints"] = [{"key": "cloud.provider", "value": "aliyun", "effect": "NoSchedule"}]
    return doc


#: One cloud pool of two 8-GPU spot nodes, registered by tidegate.
CLOUD_POOL = Pool(
    "cloud-a100",
    NodePoolSpec(
        cluster="aws",
        count=2,
        gpu=GpuSpec(product="A100", count=8),
        cpu="32",
        memory="256Gi",
        pricing=PricingSpec(model="spot", per_hour=30),
    ),
    "aws",
    ClusterSpec(type="cloud", provider="aws", region="us-east-1", latency_ms=20),
)
TOLERATE_ALL = "tolerations: [{operator: Exists}]"
#: With the fleet: spot notices, the cloud's link, time passing, and pinned pods tolerating everything.
fleet_operation = st.one_of(
    bursting_operation,
    st.tuples(st.just("notice"), st.integers(0, 9)),
    st.tuples(st.just("link"), st.booleans()),
    st.tuples(st.just("later"), st.sampled_from([15, 60, 150])),
    st.tuples(st.just("sensitive"), st.integers(1, 2), st.sampled_from([1, 4, 8])),
)


class Cluster:
    def __init__(
        self, config: SchedulerConfiguration | None = None, burst: Burst | None = None, fleet: bool = False
    ) -> None:
        self.config, self.burst, self.fleet = config, burst, fleet
        if config is not None:
            self.api: FakeApi = GracefulApi(RECLAIMABLE_QUEUES)
        else:
            self.api = FakeApi(QUEUE + (BURST_QUEUE if burst else ""))
        self.api.docs += [node("n0", False)] + ([node("n1", True)] if config is None else [])
        self.made = 0
        self.now = 0.0
        self.scheduler = self._scheduler()
        #: Pods tidegate bound, and to which node (each must be bound once).
        self.bound: Counter[str] = Counter()
        if burst is not None:  # the IDC node is full: what comes next waits, and may burst
            self.do(("gang", 1, 8, False, False))
        if config is not None:  # dev borrows the whole cluster (one node); prod's first job reclaims
            self.do(("gang", 1, 8, False, False))
            self.do(("gang", 1, 1, False, True))

    def _scheduler(self) -> ClusterScheduler:
        if not self.fleet:
            return ClusterScheduler(self.api, self.config, burst=self.burst)
        pool = Pool(CLOUD_POOL.name, CLOUD_POOL.spec, CLOUD_POOL.cluster_name, CLOUD_POOL.cluster)
        fleet = Fleet((pool,), (), self.burst)
        return ClusterScheduler(self.api, self.config, fleet=fleet, start=self.now)

    def objects(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.api.docs if d["kind"] == kind]

    def do(self, op: tuple[Any, ...]) -> None:
        kind = op[0]
        nodes = self.objects("Node")
        ours = [d for d in self.objects("Pod") if d["spec"].get("schedulerName") == "volcano"]
        if kind == "gang":
            _, members, gpus, tolerant, flag = op
            queue = "default" if self.config is None else ("prod" if flag else "dev")
            extra = PINNED if flag and self.burst else TOLERATE if tolerant else ""
            self.made += 1
            name = f"g{self.made}"
            docs = group(name, members, queue) + "".join(
                "---" + pod(f"{name}-{i}", gpus, name, extra=extra) for i in range(members)
            )
            self.api.add(docs)
        elif kind == "bare":
            self.made += 1
            self.api.add(pod(f"b{self.made}", op[1], extra=PINNED if op[2] else ""))
        elif kind == "finish":
            running = [d for d in ours if d["spec"].get("nodeName") and d["status"]["phase"] != "Succeeded"]
            if running:
                running[op[1] % len(running)]["status"]["phase"] = "Succeeded"
        elif kind == "delete":
            groups = self.objects("PodGroup")
            if groups:
                name = groups[op[1] % len(groups)]["metadata"]["name"]
                self.api.docs = [d for d in self.api.docs if not _of_group(d, name)]
        elif kind == "node":
            self.made += 1
            self.api.docs.append(node(f"node-{self.made}", op[1]))
        elif kind == "relabel" and nodes:
            nodes[op[1] % len(nodes)]["metadata"]["labels"]["rack"] = str(op[1])
        elif kind == "cordon" and nodes:
            nodes[op[1] % len(nodes)]["spec"]["unschedulable"] = op[2]
        elif kind == "remove" and nodes:
            gone = nodes[op[1] % len(nodes)]["metadata"]["name"]
            # as the node controller would: the node goes, and its pods with it
            self.api.docs = [d for d in self.api.docs if not _on(d, gone) and d is not nodes[op[1] % len(nodes)]]
        elif kind == "theirs" and nodes:
            target = nodes[op[1] % len(nodes)]["metadata"]["name"]
            free = 8_000 - _used(self.api.docs, target)
            if free >= op[2] * 1000:
                self.made += 1
                self.api.add(pod(f"t{self.made}", op[2], scheduler="default-scheduler", node=target))
                self.objects("Pod")[-1]["status"]["phase"] = "Running"
        elif kind == "restart":
            self.scheduler = self._scheduler()
        elif kind == "notice":
            virtual = [n for n in nodes if n["metadata"]["labels"].get("tidegate.io/pool")]
            if virtual:
                taint = {"key": "aws-node-termination-handler/spot-itn", "value": "true", "effect": "NoSchedule"}
                spec = virtual[op[1] % len(virtual)]["spec"]
                spec["taints"] = [*spec.get("taints", []), taint]
        elif kind == "link":
            for n in nodes:
                if n["metadata"]["labels"].get("tidegate.io/pool"):
                    n["status"]["conditions"] = [{"type": "Ready", "status": "True" if op[1] else "False"}]
        elif kind == "later":
            self.now += op[1]
        elif kind == "sensitive":  # pinned, and tolerating every taint: only the nodeSelector keeps it home
            self.made += 1
            name = f"s{self.made}"
            extra = f"{PINNED}\n  {TOLERATE_ALL}"
            docs = group(name, op[1]) + "".join(
                "---" + pod(f"{name}-{i}", op[2], name, extra=extra) for i in range(op[1])
            )
            self.api.add(docs)
        elif kind == "gone" and isinstance(self.api, GracefulApi):
            self.api.gone()
        before = len(self.api.binds)
        self.now = max(self.now, float(self.made))
        self.scheduler.step(self.now)
        for pod_name, node_name, _ in self.api.binds[before:]:
            self.bound[pod_name] += 1
            assert any(n["metadata"]["name"] == node_name for n in self.objects("Node")), f"{pod_name} on {node_name}"

    def check(self) -> None:
        assert max(self.bound.values(), default=1) == 1, f"bound twice: {self.bound.most_common(1)}"
        evicted = Counter(self.api.evicted)
        assert max(evicted.values(), default=1) == 1, f"evicted twice: {evicted.most_common(1)}"
        cloud = {
            n["metadata"]["name"]
            for n in self.objects("Node")
            if n["spec"].get("taints") or n["metadata"]["labels"].get("volcano.sh/node-type", "").startswith("cloud")
        }
        for d in self.objects("Pod"):  # guard rail: pinned pods stay in the IDC and in their queue
            if "nodeSelector" in d["spec"]:
                assert d["spec"].get("nodeName") not in cloud, f"pinned {d['metadata']['name']} on the cloud"
                queue = (d["metadata"].get("annotations") or {}).get("scheduling.volcano.sh/queue-name")
                assert queue != "burst-cloud", d
                added = [t for t in d["spec"].get("tolerations", []) if t.get("key") == "cloud.provider"]
                assert not added, f"pinned {d['metadata']['name']} given the cloud toleration"
        for g in self.objects("PodGroup"):
            pods = [d for d in self.objects("Pod") if _of_group(d, g["metadata"]["name"])]
            if any("nodeSelector" in d["spec"] for d in pods):
                assert g["spec"]["queue"] != "burst-cloud", f"pinned gang {g['metadata']['name']} burst"
        names = {n["metadata"]["name"] for n in self.objects("Node")}
        for d in self.objects("Pod"):  # a nominated pod is bound there or not at all, while that node exists
            nominated = d.get("status", {}).get("nominatedNodeName")  # (the field may stay once bound)
            assert nominated not in names or d["spec"].get("nodeName") in (None, nominated), d
        for n in self.objects("Node"):
            name = n["metadata"]["name"]
            assert _used(self.api.docs, name) <= 8_000, f"{name} over-committed"
        for g in self.objects("PodGroup"):
            name, members = g["metadata"]["name"], g["spec"]["minMember"]
            pods = [d for d in self.objects("Pod") if _of_group(d, name) and d["kind"] == "Pod"]
            ours = [d for d in pods if d["metadata"]["name"] in self.bound]
            assert not ours or len(ours) >= members or len(pods) < members, f"gang {name} partly bound"
            if g.get("status", {}).get("phase") == "Running":
                assert len([d for d in pods if d["spec"].get("nodeName")]) >= min(members, len(pods)), name
        for d in self.objects("Pod"):
            bound_to = d["spec"].get("nodeName")
            if d["metadata"]["name"] in self.bound and bound_to:
                target = next((n for n in self.objects("Node") if n["metadata"]["name"] == bound_to), None)
                if target is None:  # a finished pod may outlive its node (the pod GC's to remove), no other
                    phase = d.get("status", {}).get("phase")
                    assert phase in ("Succeeded", "Failed"), f"{d['metadata']['name']} {phase} on {bound_to}, gone"
                    continue
                if target["spec"].get("taints"):
                    assert "tolerations" in d["spec"], f"{d['metadata']['name']} on tainted {bound_to}"


def _of_group(doc: dict[str, Any], name: str) -> bool:
    meta = doc["metadata"]
    if doc["kind"] == "PodGroup":
        return bool(meta["name"] == name)
    return doc["kind"] == "Pod" and (meta.get("annotations") or {}).get("scheduling.k8s.io/group-name") == name


def _on(doc: dict[str, Any], node_name: str) -> bool:
    return doc["kind"] == "Pod" and doc["spec"].get("nodeName") == node_name


def _used(docs: list[dict[str, Any]], node_name: str) -> int:
    """GPUs (canonical thousandths) the node's running pods hold."""
    total = 0
    for doc in docs:
        if _on(doc, node_name) and doc["status"]["phase"] not in ("Succeeded", "Failed"):
            requests = doc["spec"]["containers"][0]["resources"]["requests"]
            total += int(float(yaml.safe_load(str(requests.get("nvidia.com/gpu", "0")))) * 1000)
    return total


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(operation, min_size=1, max_size=30))
def test_what_tidegate_kube_binds_holds_under_any_sequence_of_events(operations: list[tuple[Any, ...]]) -> None:
    cluster = Cluster()
    for op in operations:
        cluster.do(op)
        cluster.check()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(reclaiming_operation, min_size=1, max_size=30))
def test_with_reclaim_and_slow_evictions_no_pod_is_evicted_twice(operations: list[tuple[Any, ...]]) -> None:
    cluster = Cluster(RECLAIMING)
    for op in operations:
        cluster.do(op)
        cluster.check()
    event(f"evictions: {min(len(cluster.api.evicted), 3)}{'+' if len(cluster.api.evicted) > 3 else ''}")
    event(f"nominated: {bool(cluster.api.nominations)}")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(bursting_operation, min_size=1, max_size=30))
def test_with_burst_pinned_pods_never_reach_the_cloud(operations: list[tuple[Any, ...]]) -> None:
    cluster = Cluster(burst=Burst("burst-cloud", after_seconds=2))
    for op in operations:
        cluster.do(op)
        cluster.check()
    event(f"overflowed: {bool(cluster.scheduler.overflowed)}")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(fleet_operation, min_size=1, max_size=30))
# another scheduler's pod on a virtual node: deleted at the notice, and again, as gone already, at its end
@example([("theirs", 2, 1), ("gang", 1, 1, False, False), ("notice", 0), ("later", 150)])
# a pod finished on a virtual node, the link down, a restart: the idle node is deregistered, the pod stays
@example([("gang", 2, 1, True, False), ("finish", 2), ("link", False), ("gang", 1, 1, False, False), ("restart",)])
def test_with_the_fleet_a_sensitive_pod_never_reaches_a_virtual_node(operations: list[tuple[Any, ...]]) -> None:
    cluster = Cluster(burst=Burst("burst-cloud", after_seconds=2), fleet=True)
    for op in operations:
        cluster.do(op)
        cluster.check()
    virtual = [n for n in cluster.objects("Node") if n["metadata"]["labels"].get("tidegate.io/pool")]
    event(f"virtual nodes: {len(virtual)}")
    event(f"noticed: {bool(cluster.scheduler.fleet.fleet.spot.noticed)}")
