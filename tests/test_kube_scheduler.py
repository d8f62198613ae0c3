"""`ClusterScheduler` against an in-memory API server: what it reads, what it hands the scheduler again,
and what it writes back (bindings with GPU cards, PodGroup status, evictions). The same class against a
real kube-apiserver is in test_kube_apiserver.py."""

from __future__ import annotations

import copy
import dataclasses
import socket
import urllib.error
import urllib.request
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from tidegate.fleet.burst import Burst
from tidegate.fleet.pool import Pool
from tidegate.fleet.spec import BudgetSpec, BudgetThreshold, ClusterSpec, GpuSpec, NodePoolSpec, PricingSpec
from tidegate.kube import scheduler as kube_scheduler
from tidegate.kube.metrics import Heartbeat, SchedulerCollector, serve_metrics
from tidegate.kube.reading import STALE_SLACK, ObjectCache
from tidegate.kube.scheduler import ClusterScheduler, Fleet
from tidegate.model.expand import Workload, workload_from
from tidegate.model.manifests import ManifestSet, load_text
from tidegate.model.objects import PluginOption, SchedulerConfiguration, Tier
from tidegate.scheduler.snapshot import Decisions

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: idc-0, labels: {volcano.sh/node-type: idc}}
status: {allocatable: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "4", pods: "110"}}
---
apiVersion: v1
kind: Node
metadata: {name: cloud-0, labels: {volcano.sh/node-type: cloud-spot}}
spec: {taints: [{key: cloud.provider, value: aliyun, effect: NoSchedule}]}
status: {allocatable: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "4", pods: "110"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
spec: {weight: 1}
"""


def group(name: str, members: int, queue: str = "default") -> str:
    return f"""
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {{name: {name}, namespace: default}}
spec: {{minMember: {members}, queue: {queue}}}
status: {{phase: Pending}}
"""


def pod(name: str, gpus: int, group_name: str = "", scheduler: str = "volcano", node: str = "", extra: str = "") -> str:
    annotations = f"annotations: {{scheduling.k8s.io/group-name: {group_name}}}" if group_name else ""
    bound = f"nodeName: {node}" if node else ""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, {annotations}}}
spec:
  schedulerName: {scheduler}
  {bound}
  {extra}
  containers: [{{name: main, resources: {{requests: {{cpu: "1", nvidia.com/gpu: "{gpus}"}}}}}}]
status: {{phase: Pending}}
"""


class FakeApi:
    """The API server's objects as documents; a bind sets the pod's nodeName, as the real one does."""

    def __init__(self, text: str) -> None:
        self.docs: list[dict[str, Any]] = [d for d in yaml.safe_load_all(text) if d]
        self.binds: list[tuple[str, str, str]] = []
        self.statuses: list[tuple[str, str, str]] = []
        self.evicted: list[str] = []
        self.unschedulable: list[tuple[str, str]] = []
        self.nominations: list[tuple[str, str, str]] = []
        self.events: list[tuple[str, str, str, str]] = []

    def add(self, text: str) -> None:
        self.docs += [d for d in yaml.safe_load_all(text) if d]

    def _find(self, kind: str, name: str) -> dict[str, Any]:
        return next(d for d in self.docs if d["kind"] == kind and d["metadata"]["name"] == name)

    def list_objects(self) -> list[dict[str, Any]]:
        return copy.deepcopy(self.docs)

    def version(self) -> int | None:
        return None  # every read is fresh (as with --list)

    def bind(self, namespace: str, pod: str, node: str, gpu_index: str) -> None:
        found = self._find("Pod", pod)
        found["spec"]["nodeName"] = node
        if gpu_index:
            found["metadata"].setdefault("annotations", {})["volcano.sh/gpu-index"] = gpu_index
        self.binds.append((pod, node, gpu_index))

    def set_group_status(self, namespace: str, name: str, phase: str, message: str) -> None:
        self._find("PodGroup", name)["status"] = {"phase": phase}
        self.statuses.append((name, phase, message))

    def evict(self, namespace: str, pod: str) -> None:
        self.docs.remove(self._find("Pod", pod))
        self.evicted.append(pod)

    def nominate(self, namespace: str, pod: str, node: str, gpu_index: str) -> None:
        found = self._find("Pod", pod)
        status, annotations = found.setdefault("status", {}), found["metadata"].setdefault("annotations", {})
        if node:
            status["nominatedNodeName"] = node
        else:
            status.pop("nominatedNodeName", None)
        if gpu_index:
            annotations["volcano.sh/gpu-index"] = gpu_index
        else:
            annotations.pop("volcano.sh/gpu-index", None)
        self.nominations.append((pod, node, gpu_index))

    def set_pod_unschedulable(self, namespace: str, pod: str, message: str) -> None:
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
        self._find("Pod", pod).setdefault("status", {})["conditions"] = [condition]
        self.unschedulable.append((pod, message))

    def overflow(self, namespace: str, group: str, queue: str, pods: list[str], home: str = "") -> None:
        if home:
            for name in pods:
                self._tolerate(name)
        found = self._find("PodGroup", group)
        found["spec"]["queue"] = queue
        found["metadata"].setdefault("annotations", {})["tidegate.io/home-queue"] = home

    def overflow_pod(self, namespace: str, pod: str, queue: str, home: str = "") -> None:
        if home:
            self._tolerate(pod)
        annotations = self._find("Pod", pod)["metadata"].setdefault("annotations", {})
        annotations |= {"scheduling.volcano.sh/queue-name": queue, "tidegate.io/home-queue": home}

    def record_event(self, involved: dict[str, str], reason: str, message: str, warning: bool = False) -> None:
        self.events.append((involved["kind"], involved["name"], reason, message))

    # -- what the fleet writes (FleetApi) ---------------------------------------------------------------
    def create_node(self, doc: dict[str, Any]) -> None:
        if not any(d["kind"] == "Node" and d["metadata"]["name"] == doc["metadata"]["name"] for d in self.docs):
            self.docs.append(copy.deepcopy(doc))

    def delete_node(self, name: str) -> None:
        self.docs = [d for d in self.docs if not (d["kind"] == "Node" and d["metadata"]["name"] == name)]

    def cordon(self, name: str, cordoned: bool) -> None:
        found = [d for d in self.docs if d["kind"] == "Node" and d["metadata"]["name"] == name]
        for doc in found:
            doc.setdefault("spec", {})["unschedulable"] = cordoned

    def delete_pod(self, namespace: str, pod: str, grace_seconds: int | None = None) -> None:
        """As the API server deletes: a pod gone already is a 404 (`delete_pod` lets it pass), not an eviction
        (the fleet deletes what is left on an instance that goes, as its last read showed it)."""
        kept = [d for d in self.docs if not (d["kind"] == "Pod" and d["metadata"]["name"] == pod)]
        if len(kept) < len(self.docs):
            self.evicted.append(pod)
        self.docs = kept

    def patch_queue(self, name: str, patch: dict[str, Any]) -> None:
        queue = self._find("Queue", name)
        for part, fields in patch.items():
            queue.setdefault(part, {}).update({k: v for k, v in fields.items() if v is not None})

    def tolerate_cloud(self, namespace: str, pod: str) -> None:
        self._tolerate(pod)

    def _tolerate(self, pod: str) -> None:
        spec = self._find("Pod", pod)["spec"]
        spec["tolerations"] = [*spec.get("tolerations", []), {"key": "cloud.provider", "operator": "Exists"}]


def test_a_gang_is_bound_whole_with_its_cards_and_its_podgroup_marked_running() -> None:
    api = FakeApi(CLUSTER + "---" + group("train", 2) + "---" + pod("w0", 2, "train") + "---" + pod("w1", 2, "train"))
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)
    assert sorted(api.binds) == [("w0", "idc-0", "0,1"), ("w1", "idc-0", "2,3")]  # local first: the cloud is tainted
    assert api.statuses == [("train", "Running", "")]
    scheduler.step(1.0)  # read back bound: nothing is bound again, nothing rewritten
    assert len(api.binds) == 2 and len(api.statuses) == 1


def test_waiting_pods_say_why_once_until_the_reason_changes_or_they_wait_anew() -> None:
    api = FakeApi(CLUSTER + "---" + group("big", 2) + "---" + pod("big-0", 4, "big") + "---" + pod("big-1", 4, "big"))
    api.add(pod("solo", 8))  # a bare pod too big for any node
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)
    written = dict(api.unschedulable)
    assert set(written) == {"big-0", "big-1", "solo"} and all(written.values())
    assert scheduler.core is not None and written["big-0"] == scheduler.core.pending_reason("default/big")
    condition = api._find("Pod", "solo")["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == ("PodScheduled", "False", "Unschedulable")
    scheduler.step(1.0)
    scheduler.step(2.0)
    assert len(api.unschedulable) == 3  # the same reason is not written again
    api.docs.remove(api._find("Pod", "big-1"))  # the gang is short of a pod now: a new reason
    scheduler.step(3.0)
    assert [p for p, _ in api.unschedulable[3:]] == ["big-0"] and api.unschedulable[3][1] != written["big-0"]
    api.docs.remove(api._find("Pod", "solo"))  # recreated under its name (as a vcjob's pods are): a new uid
    api.add(pod("solo", 8).replace("namespace: default", "namespace: default, uid: solo-2"))
    scheduler.step(4.0)
    assert api.unschedulable[4:] == [("solo", written["solo"])]


def test_a_gang_that_does_not_fit_is_not_bound_at_all_and_says_why() -> None:
    gang = group("big", 3) + "".join("---" + pod(f"w{i}", 2, "big") for i in range(3))
    api = FakeApi(CLUSTER + "---" + gang)
    ClusterScheduler(api).step(0.0)
    assert api.binds == []
    ((name, phase, message),) = api.statuses
    assert (name, phase) == ("big", "Inqueue") and message


def test_pods_of_other_schedulers_take_their_room_and_theirs_are_left_alone() -> None:
    others = pod("theirs", 3, scheduler="default-scheduler", node="idc-0") + "---" + pod("unbound", 1, scheduler="x")
    api = FakeApi(CLUSTER + "---" + others + "---" + pod("ours", 2))
    ClusterScheduler(api).step(0.0)
    assert api.binds == []  # 1 GPU left locally, and ours does not tolerate the cloud
    assert [d["metadata"]["name"] for d in api.docs if d["kind"] == "Pod" and "nodeName" not in d["spec"]] == [
        "unbound",
        "ours",
    ]


def test_a_pod_tolerating_the_cloud_lands_there_once_the_idc_is_full() -> None:
    tolerant = "tolerations: [{key: cloud.provider, operator: Exists, effect: NoSchedule}]"
    api = FakeApi(CLUSTER + "---" + pod("a", 4, extra=tolerant) + "---" + pod("b", 4, extra=tolerant))
    ClusterScheduler(api).step(0.0)
    assert sorted((p, n) for p, n, _ in api.binds) == [("a", "idc-0"), ("b", "cloud-0")]


def test_changes_between_cycles_are_read_a_new_queue_a_finished_pod_a_new_node() -> None:
    api = FakeApi(CLUSTER + "---" + pod("a", 4) + "---" + pod("b", 4))
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)
    assert [p for p, _, _ in api.binds] == ["a"]
    api._find("Pod", "a")["status"]["phase"] = "Succeeded"  # its kubelet reports it done
    scheduler.step(1.0)
    assert [(p, n) for p, n, _ in api.binds] == [("a", "idc-0"), ("b", "idc-0")]
    api.add("""
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: prod}
spec: {weight: 2}
---
apiVersion: v1
kind: Node
metadata: {name: idc-1, labels: {volcano.sh/node-type: idc}}
status: {allocatable: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "4", pods: "110"}}
""")
    api.add(group("p", 1, "prod") + "---" + pod("c", 4, "p"))
    scheduler.step(2.0)
    assert api.binds[-1][:2] == ("c", "idc-1")


def test_a_node_heartbeat_changes_nothing_and_other_pods_resize_the_node_in_place() -> None:
    api = FakeApi(CLUSTER + "---" + pod("a", 2))
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)
    assert scheduler.core is not None
    table, generation = scheduler.core.ssn.table, scheduler.core.ssn.table.generation
    heartbeat = {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-03T16:00:00Z"}
    api._find("Node", "idc-0")["status"]["conditions"] = [heartbeat]  # the kubelet's status update
    api.add(pod("b", 1))
    scheduler.step(1.0)
    assert scheduler.core.ssn.table is table and table.generation == generation  # the node table is untouched
    # another scheduler's pod takes the GPU left on idc-0: the node's row changes in place
    api.add(pod("other", 1, scheduler="default-scheduler", node="idc-0").replace("Pending", "Running"))
    api.add(pod("c", 1))
    scheduler.step(2.0)
    assert scheduler.core.ssn.table is table and table.generation != generation
    assert table.alloc_rows[table.row["idc-0"]][table.index.col["nvidia.com/gpu"]] == 3000
    assert [p for p, _, _ in api.binds] == ["a", "b"] and "default/podgroup-c" in scheduler.core.waiting
    api._find("Pod", "other")["status"]["phase"] = "Succeeded"  # it leaves: c takes its GPU
    scheduler.step(3.0)
    assert scheduler.core.ssn.table is table and api.binds[-1][:2] == ("c", "idc-0")


def test_only_groups_whose_objects_changed_are_expanded_and_handed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    api = FakeApi(CLUSTER + "".join("---" + pod(f"p{i}", 1) for i in range(3)) + "---" + group("g", 2))
    api.add(pod("g-0", 1, "g") + "---" + pod("g-1", 1, "g"))
    scheduler = ClusterScheduler(api)
    expanded: list[str] = []

    def counting(ms: ManifestSet) -> Workload:
        expanded.extend(pod.name for pod in ms.pods)
        return workload_from(ms)

    monkeypatch.setattr(kube_scheduler, "workload_from", counting)
    scheduler.step(0.0)
    assert sorted(expanded) == ["g-0", "g-1", "p0", "p1", "p2"]
    bound = [p for p, _, _ in api.binds]
    assert len(bound) == 4  # one of the five GPUs asked for does not fit on idc-0
    scheduler.step(1.0)  # the bound pods are read with their nodes, the one waiting with why it waits
    (waiting,) = {"g-0", "g-1", "p0", "p1", "p2"} - set(bound)
    assert sorted(expanded[5:]) == sorted([*bound, waiting])
    expanded.clear()
    done = next(p for p in ("p0", "p1", "p2") if p in bound)
    api._find("Pod", done)["status"]["phase"] = "Succeeded"
    scheduler.step(2.0)  # only its group is expanded again; the one waiting is handed as before and now fits
    assert expanded == [done] and len(api.binds) == 5


def test_objects_it_cannot_read_are_reported_and_the_rest_is_scheduled() -> None:
    bad = pod("bad", 1).replace('nvidia.com/gpu: "1"', 'nvidia.com/gpu: "lots"')
    api = FakeApi(CLUSTER + "---" + bad + "---" + pod("good", 1))
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)
    assert [p for p, _, _ in api.binds] == ["good"]
    (problem,) = scheduler.problems
    assert "kube-apiserver: document 3: Pod/bad" in problem and "nvidia.com/gpu" in problem


RECLAIMABLE_QUEUES = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: prod}
spec: {weight: 1, reclaimable: true}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: dev}
spec: {weight: 1, reclaimable: true}
"""
RECLAIMING = SchedulerConfiguration(
    actions=("enqueue", "allocate", "reclaim", "backfill"),
    tiers=(
        Tier((PluginOption("priority"), PluginOption("gang"))),
        Tier((PluginOption("predicates"), PluginOption("proportion"), PluginOption("nodeorder"))),
    ),
)


def _dev_borrowing_the_idc(api_type: type[FakeApi] = FakeApi) -> FakeApi:
    """The IDC node alone (4 GPUs), dev's two jobs on it, prod's share idle."""
    idc = CLUSTER.split("---")[0]
    api = api_type(idc + "---" + RECLAIMABLE_QUEUES + "---" + group("d0", 1, "dev") + "---" + pod("d0-0", 2, "d0"))
    api.add(group("d1", 1, "dev") + "---" + pod("d1-0", 2, "d1"))
    return api


def test_reclaim_deletes_the_borrowed_pod_and_the_next_cycle_binds_the_owner() -> None:
    api = _dev_borrowing_the_idc()
    scheduler = ClusterScheduler(api, RECLAIMING)
    scheduler.step(0.0)  # dev borrows prod's idle half
    assert sorted(p for p, _, _ in api.binds) == ["d0-0", "d1-0"]
    api.add(group("urgent", 1, "prod") + "---" + pod("urgent-0", 2, "urgent"))
    decisions = scheduler.step(1.0)
    assert len(api.evicted) == 1 and api.evicted[0].startswith("d") and decisions.evictions
    scheduler.step(2.0)  # the evicted pod is gone from the API server: its room is the owner's
    assert api.binds[-1][:2] == ("urgent-0", "idc-0")


class GracefulApi(FakeApi):
    """Evicted pods take their time to go (their grace period): they stay, Running and marked for deletion
    as the API server marks them, until `gone`."""

    def evict(self, namespace: str, pod: str) -> None:
        self._find("Pod", pod)["metadata"]["deletionTimestamp"] = "2026-12-03T00:00:00Z"
        self.evicted.append(pod)

    def gone(self) -> None:
        """The evicted pods have stopped: they leave the API server."""
        evicted = set(self.evicted)
        self.docs = [d for d in self.docs if not (d["kind"] == "Pod" and d["metadata"]["name"] in evicted)]


def test_a_nomination_is_written_so_a_new_leader_waits_for_the_victim_instead_of_evicting_again() -> None:
    api = _dev_borrowing_the_idc(GracefulApi)
    assert isinstance(api, GracefulApi)
    scheduler = ClusterScheduler(api, RECLAIMING)
    scheduler.step(0.0)
    api.add(group("urgent", 1, "prod") + "---" + pod("urgent-0", 2, "urgent"))
    scheduler.step(1.0)  # reclaim evicts a dev pod; urgent-0 waits for its room
    assert len(api.evicted) == 1 and api.nominations == [("urgent-0", "idc-0", "")]
    assert api._find("Pod", "urgent-0")["status"]["nominatedNodeName"] == "idc-0"
    scheduler.step(2.0)
    assert api.nominations == [("urgent-0", "idc-0", "")]  # written once
    leader = ClusterScheduler(api, RECLAIMING)  # a restart, or another replica taking the Lease over
    leader.step(3.0)
    assert leader.core is not None and "default/urgent-0" in leader.core.ssn.pipelined
    assert len(api.evicted) == 1 and api.nominations == [("urgent-0", "idc-0", "")]  # no second victim
    api.gone()
    leader.step(4.0)
    assert api.binds[-1][:2] == ("urgent-0", "idc-0") and len(api.evicted) == 1


SHARED_NODE = """
apiVersion: v1
kind: Node
metadata: {name: idc-0, labels: {volcano.sh/node-type: idc}}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110", volcano.sh/gpu-memory: "16384", volcano.sh/gpu-number: "2"}
"""


def slice_pod(name: str, mib: int, group_name: str) -> str:
    return pod(name, 0, group_name).replace('nvidia.com/gpu: "0"', f'volcano.sh/gpu-memory: "{mib}"')


def test_a_gpu_slice_nomination_writes_its_card_so_a_new_leader_holds_that_card() -> None:
    """Two cards of 8 GiB, dev's slices of 6 GiB on both; prod's slice reclaims one card. Without the card
    written, a new leader held the node's memory but no card, and any slice could take the victim's card."""
    api = GracefulApi(SHARED_NODE + "---" + RECLAIMABLE_QUEUES)
    for name in ("d0", "d1"):
        api.add(group(name, 1, "dev") + "---" + slice_pod(f"{name}-0", 6144, name))
    config = dataclasses.replace(RECLAIMING, tiers=(*RECLAIMING.tiers, Tier((PluginOption("gpushare"),))))
    scheduler = ClusterScheduler(api, config)
    scheduler.step(0.0)
    assert sorted(cards for _, _, cards in api.binds) == ["0", "1"]
    api.add(group("urgent", 1, "prod") + "---" + slice_pod("urgent-0", 6144, "urgent"))
    scheduler.step(1.0)
    (victim,) = api.evicted
    card = next(cards for pod, _, cards in api.binds if pod == victim)
    assert api.nominations == [("urgent-0", "idc-0", card)]
    assert api._find("Pod", "urgent-0")["metadata"]["annotations"]["volcano.sh/gpu-index"] == card
    leader = ClusterScheduler(api, config)  # a restart, or another replica taking the Lease over
    leader.step(2.0)
    assert leader.core is not None
    assert leader.core.ssn.pipelined["default/urgent-0"].cards == (int(card),)
    assert api.nominations == [("urgent-0", "idc-0", card)] and len(api.evicted) == 1
    api.gone()
    leader.step(3.0)
    assert api.binds[-1] == ("urgent-0", "idc-0", card)


def test_pending_seconds_count_waiting_groups_not_pinned_and_reach_the_metrics() -> None:
    queues = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: hybrid}
spec: {weight: 1}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: dev}
spec: {weight: 1, parent: hybrid}
"""
    created = "creationTimestamp: '1970-01-01T00:01:40Z'"  # 100 s
    pinned = 'nodeSelector: {"volcano.sh/node-type": idc}'
    waiting = group("wait", 1, "dev").replace("namespace: default", f"namespace: default, {created}")
    api = FakeApi(CLUSTER + "---" + queues + "---" + waiting + "---" + pod("wait-0", 8, "wait"))
    api.add(group("pin", 1, "dev").replace("namespace: default", f"namespace: default, {created}"))
    api.add(pod("pin-0", 8, "pin", extra=pinned))
    scheduler = ClusterScheduler(api)
    scheduler.step(130.0)
    assert scheduler.pending_seconds(130.0) == {"default": 0.0, "hybrid": 30.0, "dev": 30.0}
    registry = CollectorRegistry()
    registry.register(SchedulerCollector(scheduler))
    text = generate_latest(registry).decode()
    assert "tidegate_scheduling_cycles_total 1.0" in text and "tidegate_pods_bound_total 0.0" in text
    assert 'volcano_queue_pending_jobs_duration_seconds{queue="dev"}' in text


def test_metrics_and_healthz_are_served_and_a_stuck_loop_fails_healthz() -> None:
    scheduler = ClusterScheduler(FakeApi(CLUSTER + "---" + pod("a", 2)))
    scheduler.step(0.0)
    now = [0.0]
    heartbeat = Heartbeat(timeout=60.0, clock=lambda: now[0])
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = serve_metrics(scheduler, port, heartbeat, address="127.0.0.1")
    base = f"http://127.0.0.1:{port}"
    try:
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as response:
            assert "tidegate_pods_bound_total 1.0" in response.read().decode()
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
            assert response.status == 200 and response.read() == b"ok\n"
        now[0] = 61.0  # the loop has not gone round for a minute: stuck
        with pytest.raises(urllib.error.HTTPError) as stuck:
            urllib.request.urlopen(f"{base}/healthz", timeout=5)
        assert stuck.value.code == 503 and b"has not gone round for 61 s" in stuck.value.read()
        stuck.value.close()
        heartbeat.beat()
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as response:
            assert response.status == 200
    finally:
        server.shutdown()
        server.server_close()
    assert Heartbeat.for_period(1.0).timeout == 60.0 and Heartbeat.for_period(10.0).timeout == 200.0


def test_a_bind_the_api_server_refuses_is_retried_from_what_it_says_next() -> None:
    api = FakeApi(CLUSTER + "---" + pod("a", 2))
    refused = [True]
    bind = api.bind

    def flaky(namespace: str, name: str, node: str, gpu_index: str) -> None:
        if refused.pop() if refused else False:
            raise RuntimeError("conflict")
        bind(namespace, name, node, gpu_index)

    api.bind = flaky  # type: ignore[method-assign]
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)
    assert api.binds == []
    scheduler.step(1.0)
    assert [(p, n) for p, n, _ in api.binds] == [("a", "idc-0")]


def _versioned(text: str) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(text) if d]
    for i, doc in enumerate(docs):
        doc["metadata"].update(uid=f"u{i}", resourceVersion="1")
    return docs


def test_the_reader_parses_an_object_again_only_when_its_version_or_the_priority_classes_change() -> None:
    classes = "\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n"
    docs = _versioned(CLUSTER + "---" + classes + "---" + pod("a", 1, extra="priorityClassName: high"))
    reader = ObjectCache()
    first = reader.read(docs)
    assert reader.parsed == 5 and first.pods[0].priority == 1000
    again = reader.read(copy.deepcopy(docs))  # a fresh listing: each object found by its version
    assert reader.parsed == 1 and again.pods[0] is first.pods[0]  # only the PriorityClass, always read
    assert reader.read(docs).pods[0] is first.pods[0] and reader.parsed == 1  # the same documents: by identity
    docs = copy.deepcopy(docs)  # a changed object comes as a new document, as from a watch
    docs[4]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "lots"
    docs[4]["metadata"]["resourceVersion"] = "2"
    broken = reader.read(docs)
    assert reader.parsed == 2 and broken.pods == [] and "Pod/a" in str(broken.errors[0])
    assert broken.errors[0].source.index == 4  # its place in the listing
    docs = copy.deepcopy(docs)
    docs[3]["value"], docs[3]["metadata"]["resourceVersion"] = 5, "2"
    docs[4]["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    docs[4]["metadata"]["resourceVersion"] = "3"
    fixed = reader.read(docs)
    assert reader.parsed == 5 and fixed.pods[0].priority == 5 and not fixed.errors


def test_the_reader_forgets_replaced_documents_before_they_pile_up() -> None:
    docs = _versioned(CLUSTER + "---" + pod("a", 1))
    reader = ObjectCache()
    reader.read(docs)
    for version in range(2, 2 * STALE_SLACK):  # an informer's listing: the pod's document replaced at every read
        docs = [*docs[:-1], copy.deepcopy(docs[-1])]
        docs[-1]["metadata"]["resourceVersion"] = str(version)
        assert len(reader.read(docs).pods) == 1 and reader.parsed == 1
    assert len(reader) <= 2 * len(docs) + STALE_SLACK


def test_a_podgroup_naming_a_queue_that_does_not_exist_waits_and_says_so() -> None:
    api = FakeApi(CLUSTER + "---" + group("lost", 1, "nowhere") + "---" + pod("lost-0", 1, "lost"))
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)
    assert api.binds == [] and api.statuses == [("lost", "Pending", "queue nowhere does not exist")]
    scheduler.step(1.0)
    assert len(api.statuses) == 1  # written once


def test_a_waiting_podgroup_or_bare_pod_overflows_to_the_burst_queue_and_lands_on_a_cloud_node() -> None:
    burst_queue = """
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: burst-cloud}
spec: {weight: 1}
"""
    created = "creationTimestamp: '1970-01-01T00:00:00Z'"
    pinned = 'nodeSelector: {"volcano.sh/node-type": idc}'
    full = pod("theirs", 4, scheduler="default-scheduler", node="idc-0")  # the IDC node is full
    api = FakeApi(CLUSTER + "---" + burst_queue + "---" + full)
    for name, extra in (("train", ""), ("secret", pinned)):
        api.add(group(name, 1).replace("namespace: default", f"namespace: default, {created}"))
        api.add(pod(f"{name}-0", 2, name, extra=extra))
    for name, extra in (("solo", ""), ("solo-secret", pinned)):  # pods naming no PodGroup
        api.add(pod(name, 2, extra=extra).replace("namespace: default", f"namespace: default, {created}"))
    scheduler = ClusterScheduler(api, burst=Burst("burst-cloud", after_seconds=600))
    scheduler.step(599.0)
    assert api.binds == [] and scheduler.overflowed == {}  # not waited long enough
    scheduler.step(600.0)
    assert scheduler.overflowed == {"default/train": "default", "default/podgroup-solo": "default"}
    assert api._find("PodGroup", "train")["spec"]["queue"] == "burst-cloud"
    solo = api._find("Pod", "solo")
    assert solo["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "burst-cloud"
    assert solo["spec"]["tolerations"] == [{"key": "cloud.provider", "operator": "Exists"}]
    scheduler.step(601.0)  # read back in the burst queue, tolerating the cloud; the queue deserves one of them
    ((first, node, _),) = api.binds
    assert first in ("train-0", "solo") and node == "cloud-0"
    api._find("Pod", first)["status"]["phase"] = "Succeeded"
    scheduler.step(602.0)
    assert {p for p, _, _ in api.binds} == {"train-0", "solo"} and api.binds[-1][1] == "cloud-0"
    assert api._find("PodGroup", "secret")["spec"]["queue"] == "default"  # pinned: never moves
    assert "annotations" not in api._find("Pod", "solo-secret")["metadata"]
    assert len(scheduler.overflowed) == 2  # moved groups are remembered while they exist
    api.evict("default", "solo")
    scheduler.step(603.0)
    assert scheduler.overflowed == {"default/train": "default"}


def test_a_queue_that_does_not_take_a_namespace_leaves_its_groups_waiting_and_keeps_them_out_of_burst() -> None:
    """default takes team-a's work only: team-b's group waits there and says why; the burst queue takes
    team-a only too, so team-b's group never overflows, while team-a's does once the IDC is full."""
    only_a = "metadata: {name: default, annotations: {tidegate.io/namespaces: team-a}}"
    cluster = CLUSTER.replace("metadata: {name: default}", only_a)
    burst_queue = (
        f"\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\n{only_a.replace('default', 'burst-cloud')}\n"
    )
    full = pod("theirs", 4, scheduler="default-scheduler", node="idc-0")
    api = FakeApi(cluster + "---" + burst_queue + "---" + full)
    for namespace in ("team-a", "team-b"):
        api.add(
            (group(f"g-{namespace}", 1) + "---" + pod(f"p-{namespace}", 2, f"g-{namespace}")).replace(
                "namespace: default", f"namespace: {namespace}"
            )
        )
    scheduler = ClusterScheduler(api, burst=Burst("burst-cloud", after_seconds=600))
    scheduler.step(0.0)
    refused = "queue default takes work from namespace(s) team-a only, not team-b"
    assert ("g-team-b", "Pending", refused) in api.statuses
    assert ("p-team-b", refused) in api.unschedulable
    scheduler.step(600.0)
    assert scheduler.overflowed == {"team-a/g-team-a": "default"}
    scheduler.step(601.0)
    assert api.binds == [("p-team-a", "cloud-0", "0,1")]


def test_a_pod_that_moves_to_another_group_is_handed_over_without_failing_the_cycle() -> None:
    """The bare pod's group was added before its old one left: "already in the session", every cycle."""
    api = FakeApi(CLUSTER + "---" + group("g", 1) + "---" + pod("a", 8))
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)
    api._find("Pod", "a")["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": "g"}
    scheduler.step(1.0)
    assert scheduler.core is not None and "default/g" in scheduler.core.jobs
    api.add(pod("small", 1))
    scheduler.step(2.0)
    assert api.binds[-1][:2] == ("small", "idc-0")


@pytest.mark.parametrize("cards", ["-1", "99"])
def test_a_gpu_index_naming_a_card_the_node_lacks_is_chosen_anew_with_a_warning(cards: str) -> None:
    bound = pod("a", 1, node="idc-0").replace(
        "namespace: default,", f"namespace: default, annotations: {{volcano.sh/gpu-index: '{cards}'}},"
    )
    api = FakeApi(CLUSTER + "---" + bound + "---" + pod("good", 3))
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)  # it failed every cycle
    assert scheduler.core is not None
    assert any(f"gpu-index ({cards},) names a card node idc-0 does not have" in w for w in scheduler.core.ssn.warnings)
    (bind,) = [b for b in api.binds if b[0] == "good"]
    assert bind[1] == "idc-0" and len(bind[2].split(",")) == 3  # the other three cards


def test_an_edited_node_selector_is_what_the_pod_is_placed_by() -> None:
    theirs = pod("theirs", 4, scheduler="default-scheduler", node="idc-0").replace("Pending", "Running")
    api = FakeApi(CLUSTER + "---" + theirs + "---" + pod("p", 2))
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)
    api._find("Pod", "p")["spec"]["nodeSelector"] = {"gpu": "h100"}  # no node has it
    api._find("Pod", "theirs")["status"]["phase"] = "Succeeded"
    scheduler.step(1.0)
    assert api.binds == []


PRIORITY_CLASS = "\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: urgent}\nvalue: 5000\n"
TEAM_QUEUE = "\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: team}\nspec: {weight: 1}\n"


def test_a_running_pod_the_scheduler_no_longer_has_still_holds_its_room() -> None:
    """Its group's queue deleted, the running pod left the scheduler, and the next pod was bound onto the
    same four cards."""
    running = group("a", 1, "team") + "---" + pod("a-0", 4, "a", extra="priorityClassName: urgent")
    api = FakeApi(CLUSTER.split("---")[0] + "---" + CLUSTER.split("---")[2] + "---" + PRIORITY_CLASS)
    api.add(TEAM_QUEUE + "---" + running)
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)
    assert api.binds == [("a-0", "idc-0", "0,1,2,3")]
    api.docs.remove(api._find("Queue", "team"))
    api.add(pod("b", 4))
    scheduler.step(1.0)
    scheduler.step(2.0)
    assert [b for b in api.binds if b[0] == "b"] == []


def test_a_node_that_leaves_the_listing_and_comes_back_keeps_its_running_pods_room() -> None:
    api = FakeApi(CLUSTER + "---" + pod("a", 4))
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)
    node = api._find("Node", "idc-0")
    api.docs.remove(node)
    scheduler.step(1.0)
    api.docs.insert(0, node)
    api.add(pod("b", 4, extra='nodeSelector: {"volcano.sh/node-type": idc}'))
    scheduler.step(2.0)
    assert [b[:2] for b in api.binds] == [("a", "idc-0")]  # b waits: a still holds the four cards


def test_nothing_overflows_to_a_burst_queue_that_does_not_exist() -> None:
    full = pod("theirs", 4, scheduler="default-scheduler", node="idc-0")
    api = FakeApi(CLUSTER + "---" + full + "---" + group("g", 1) + "---" + pod("g-0", 2, "g"))
    scheduler = ClusterScheduler(api, burst=Burst("burst-cloud", after_seconds=0))
    scheduler.step(0.0)
    scheduler.step(1.0)
    assert scheduler.overflowed == {} and api._find("PodGroup", "g")["spec"]["queue"] == "default"


class WatchedApi(FakeApi):
    """As if followed by watches: a version that moves with every change (what `KubeApi.version` reports)."""

    reads = 0

    def version(self) -> int | None:
        return hash(repr(self.docs))

    def list_objects(self) -> list[dict[str, Any]]:
        self.reads += 1
        return super().list_objects()


def test_a_cycle_is_left_out_while_nothing_changed_since_one_that_did_nothing() -> None:
    api = WatchedApi(CLUSTER + "---" + group("g", 1) + "---" + pod("g-0", 2, "g"))
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)  # binds g-0 and writes g's status
    scheduler.step(1.0)  # reads the bind back: nothing to do
    reads = api.reads
    assert scheduler.step(2.0) == Decisions() and scheduler.step(3.0) == Decisions()
    assert api.reads == reads and scheduler.quiet_cycles == 2  # no read, no cycle
    api.add(pod("small", 1))
    scheduler.step(4.0)
    assert api.binds[-1][:2] == ("small", "idc-0") and api.reads == reads + 1


def test_a_quiet_cluster_still_bursts_a_group_once_its_wait_is_over() -> None:
    burst_queue = "\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: burst-cloud}\n"
    full = pod("theirs", 4, scheduler="default-scheduler", node="idc-0")
    api = WatchedApi(CLUSTER + "---" + burst_queue + "---" + full + "---" + group("g", 1) + "---" + pod("g-0", 2, "g"))
    scheduler = ClusterScheduler(api, burst=Burst("burst-cloud", after_seconds=600))
    scheduler.step(0.0)
    scheduler.step(1.0)
    scheduler.step(2.0)
    assert scheduler.quiet_cycles == 1 and scheduler.overflowed == {}
    scheduler.step(600.0)  # the wait is over: not left out
    assert scheduler.overflowed == {"default/g": "default"}


def test_a_pod_asking_for_a_resource_no_node_offers_waits_until_one_does() -> None:
    cpu_only = """
apiVersion: v1
kind: Node
metadata: {name: cpu-0}
status: {allocatable: {cpu: "32", memory: 256Gi, pods: "110"}}
---
apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: default}
spec: {weight: 1}
"""
    api = FakeApi(cpu_only + "---" + group("train", 1) + "---" + pod("w0", 2, "train"))
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)  # no column for nvidia.com/gpu when the scheduler started: the pod waits, no crash
    assert api.binds == []
    ((name, phase, message),) = api.statuses
    assert name == "train" and phase in ("Pending", "Inqueue") and message
    api.add(CLUSTER.split("---")[0])  # a GPU node joins
    scheduler.step(1.0)
    assert api.binds == [("w0", "idc-0", "0,1")]


def test_a_podgroup_is_admitted_before_its_pods_exist_as_volcano_s_job_controller_needs() -> None:
    """Volcano's job controller creates a vcjob's pods only once its PodGroup is Inqueue: the scheduler admits
    a PodGroup with no pod yet on its minResources, then binds the pods once they come."""
    vcjob_group = group("train", 2).replace("queue: default}", 'queue: default, minResources: {nvidia.com/gpu: "4"}}')
    api = FakeApi(CLUSTER + "---" + vcjob_group)
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)
    ((name, phase, message),) = api.statuses
    assert (name, phase) == ("train", "Inqueue") and message == "gang: 0/2 pods exist (minMember 2)"
    assert api._find("PodGroup", "train")["status"]["phase"] == "Inqueue"
    api.add(pod("train-0", 2, "train") + "---" + pod("train-1", 2, "train"))  # the job controller's turn
    scheduler.step(1.0)
    assert sorted(api.binds) == [("train-0", "idc-0", "0,1"), ("train-1", "idc-0", "2,3")]
    assert api.statuses[-1] == ("train", "Running", "")


def test_a_podgroup_without_pods_is_left_alone_when_another_scheduler_has_its_pods_or_it_has_run() -> None:
    done = group("done", 1).replace("phase: Pending", "phase: Completed")
    theirs = group("theirs", 1) + "---" + pod("theirs-0", 1, "theirs", scheduler="default-scheduler")
    api = FakeApi(CLUSTER + "---" + done + "---" + theirs)
    ClusterScheduler(api).step(0.0)
    assert api.statuses == [] and api.binds == []


def test_a_podgroup_without_pods_neither_bursts_nor_counts_as_pending_until_its_pods_come() -> None:
    """Overflow gives the cloud toleration to a group's pods: one with none yet stays home (its pods would
    come without it), and it waits for its job controller, not for nodes, so the HPA's metric leaves it out."""
    burst_queue = "\napiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: burst-cloud}\nspec: {}\n"
    created = "creationTimestamp: '1970-01-01T00:00:00Z'"
    full = pod("theirs", 4, scheduler="default-scheduler", node="idc-0")  # the IDC node is full
    early = group("early", 1).replace("namespace: default", f"namespace: default, {created}")
    api = FakeApi(CLUSTER + "---" + burst_queue + "---" + full + "---" + early)
    scheduler = ClusterScheduler(api, burst=Burst("burst-cloud", after_seconds=0))
    scheduler.step(700.0)
    assert scheduler.overflowed == {} and api._find("PodGroup", "early")["spec"]["queue"] == "default"
    assert scheduler.pending_seconds(700.0)["default"] == 0.0
    api.add(pod("early-0", 2, "early"))
    scheduler.step(701.0)
    assert scheduler.overflowed == {"default/early": "default"}
    assert api._find("Pod", "early-0")["spec"]["tolerations"] == [{"key": "cloud.provider", "operator": "Exists"}]


def test_pod_anti_affinity_and_namespace_labels_are_read_from_the_api_server() -> None:
    """Two pods of a group that anti-affine each other on the hostname land on two nodes; a pod selected by an
    existing pod's term whose namespaceSelector picks the pod's namespace by a Namespace's label waits, and is
    placed once the Namespace loses that label."""
    hosts = CLUSTER.replace("labels: {volcano.sh/node-type: idc}", "labels: {volcano.sh/node-type: idc, h: a}")
    hosts += """---
apiVersion: v1
kind: Node
metadata: {name: idc-1, labels: {volcano.sh/node-type: idc, h: b}}
status: {allocatable: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "4", pods: "110"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: default, labels: {team: web}}
"""
    apart = (
        "affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: "
        "[{labelSelector: {matchLabels: {app: web}}, topologyKey: h, namespaceSelector: {matchLabels: {team: web}}}]}}"
    )
    labelled = "namespace: default, labels: {app: web},"
    web = [pod(f"web-{i}", 1, "web", extra=apart).replace("namespace: default,", labelled) for i in range(2)]
    api = FakeApi(hosts + "---" + group("web", 2) + "---" + "---".join(web))
    ClusterScheduler(api).step(0.0)
    assert sorted(node for _, node, _ in api.binds) == ["idc-0", "idc-1"]
    api.add(pod("third", 1).replace("namespace: default,", labelled))
    scheduler = ClusterScheduler(api)
    scheduler.step(1.0)
    assert [name for name, _, _ in api.binds].count("third") == 0
    next(d for d in api.docs if d["kind"] == "Namespace")["metadata"]["labels"] = {}
    scheduler.step(2.0)
    assert [name for name, _, _ in api.binds].count("third") == 1


def test_a_podgroup_s_sla_waiting_time_is_measured_from_its_creation_and_a_quiet_scheduler_wakes_for_it() -> None:
    sla = SchedulerConfiguration(
        actions=("enqueue", "allocate"),
        tiers=(
            Tier((PluginOption("priority"), PluginOption("sla"))),
            Tier((PluginOption("gang"), PluginOption("predicates"), PluginOption("proportion"))),
        ),
    )
    capped = CLUSTER.replace("spec: {weight: 1}", 'spec: {weight: 1, capability: {nvidia.com/gpu: "4"}}')
    running = pod("running", 4, node="idc-0").replace("status: {phase: Pending}", "status: {phase: Running}")
    late = (
        group("late", 1)
        .replace(
            "metadata: {name: late, namespace: default}",
            'metadata: {name: late, namespace: default, creationTimestamp: "1970-01-01T00:00:00Z", '
            "annotations: {sla-waiting-time: 60s}}",
        )
        .replace("queue: default}", "queue: default, minResources: {nvidia.com/gpu: 1}}")
    )
    api = FakeApi(capped + "---" + running + "---" + late + "---" + pod("late-0", 1, "late"))
    api.version = lambda: 1  # type: ignore[method-assign]  # nothing changes: quiet cycles are left out
    scheduler = ClusterScheduler(api, sla)
    assert scheduler.step(10.0).wake_at == 60.0
    assert api.statuses[-1][:2] == ("late", "Pending")
    scheduler.step(30.0)
    assert scheduler.quiet_cycles == 1  # nothing changed, and no deadline came
    scheduler.step(60.0)
    assert scheduler.quiet_cycles == 1 and api.statuses[-1][:2] == ("late", "Inqueue")


def test_a_restarted_tidegate_kube_goes_on_with_the_budget_s_period_and_spend() -> None:
    """The budget's period and the pools' bill are kept on its Queue (annotation tidegate.io/budget-state): a
    new process spends on from them, and crosses the threshold when the first would have (not a period later)."""
    api = FakeApi(CLUSTER.replace("{name: default}", "{name: burst-cloud}"))
    spec = NodePoolSpec(cluster="aws", count=1, gpu=GpuSpec(product="A100", count=8), cpu="32", memory="256Gi",
                        pricing=PricingSpec(model="spot", per_hour=36))  # fmt: skip
    cloud = ClusterSpec(type="cloud", provider="aws", region="us-east-1", latency_ms=2)
    budget = BudgetSpec(per_period=2, queue="burst-cloud", thresholds=[BudgetThreshold(spent_fraction=0.5, weight=10)])
    queues = tuple(load_text(CLUSTER.replace("{name: default}", "{name: burst-cloud}"), "q.yaml").queues)

    def process(start: float) -> ClusterScheduler:
        fleet = Fleet((Pool("cloud-a100", spec, "aws", cloud),), (), None, budget, queues)
        return ClusterScheduler(api, fleet=fleet, start=start)

    first = process(0.0)
    for t in range(0, 61, 5):
        first.step(float(t))  # one node at 36 an hour: 0.01 a second, 0.6 by 60 s
    assert api._find("Queue", "burst-cloud")["spec"]["weight"] == 1
    again = process(61.0)  # the node ran on while no process did: it is billed for that too
    for t in range(61, 111, 5):
        again.step(float(t))
    assert again.fleet.bill.spent(110.0) == pytest.approx(1.1)
    assert api._find("Queue", "burst-cloud")["spec"]["weight"] == 10  # 1.0 reached at 100 s
    assert any(reason == "BudgetThreshold" for _, _, reason, _ in api.events)
