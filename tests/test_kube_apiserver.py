"""tidegate scheduling a real kube-apiserver (v1.20, with Volcano's Queue and PodGroup CRDs): it reads the
cluster, binds whole gangs with their GPU cards, writes PodGroup status, and leaves other schedulers' pods
alone; `tidegate kube` does the same from the command line."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_apiserver import eventually, kube_apiserver, restartable_kube_apiserver
from kubernetes import client, config

from tidegate.fleet.burst import Burst
from tidegate.kube.api import KubeApi
from tidegate.kube.informer import Informer
from tidegate.kube.lease import Lease
from tidegate.kube.scheduler import ClusterScheduler
from tidegate.model.objects import GPU_INDEX_ANNOTATION

GROUP, VERSION = "scheduling.volcano.sh", "v1beta1"


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with kube_apiserver(tmp_path_factory.mktemp("kube")) as path:
        yield path


@pytest.fixture(params=[True, False], ids=["watch", "list"])
def api(kubeconfig: Path, request: pytest.FixtureRequest) -> Iterator[KubeApi]:
    """The API server as tidegate reads it: followed by watches, or listed every cycle."""
    kube = KubeApi(str(kubeconfig), watch=request.param)
    yield kube
    kube.close()


@pytest.fixture
def cluster(kubeconfig: Path, request: pytest.FixtureRequest) -> Iterator[tuple[client.CoreV1Api, Any, str]]:
    """A namespace of the test's own, two 4-GPU nodes (one tainted cloud node) and a queue; cleaned after."""
    api = config.new_client_from_config(config_file=str(kubeconfig))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    namespace = "t-" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:12]  # namespaces never go away here
    _make_cluster(core, custom, namespace)
    yield core, custom, namespace
    for pod in core.list_namespaced_pod(namespace).items:
        core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
    for group in custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "podgroups")["items"]:
        custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, "podgroups", group["metadata"]["name"])
    custom.delete_cluster_custom_object(GROUP, VERSION, "queues", "default")
    for name in ("idc-0", "cloud-0"):
        core.delete_node(name)


def _make_cluster(core: client.CoreV1Api, custom: Any, namespace: str) -> None:
    """The namespace, two 4-GPU nodes (one tainted cloud node) and the queue `default`."""
    core.create_namespace({"metadata": {"name": namespace}})
    for name, kind, taints in (("idc-0", "idc", []), ("cloud-0", "cloud-spot", [_cloud_taint()])):
        core.create_node(
            {
                "metadata": {"name": name, "labels": {"volcano.sh/node-type": kind}},
                "spec": {"taints": taints},
                "status": {
                    "capacity": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "4", "pods": "110"},
                    "allocatable": {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "4", "pods": "110"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            }
        )
        # the API server taints a new node not-ready; with no node controller here, the test lifts it
        core.patch_node(name, {"spec": {"taints": taints}})
    custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        "queues",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}},
    )


def _cloud_taint() -> dict[str, str]:
    return {"key": "cloud.provider", "value": "aliyun", "effect": "NoSchedule"}


def _gang(core: client.CoreV1Api, custom: Any, namespace: str, name: str, pods: int, gpus: int) -> None:
    custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "podgroups",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "PodGroup",
            "metadata": {"name": name},
            "spec": {"minMember": pods, "queue": "default"},
        },
    )
    for i in range(pods):
        _pod(core, namespace, f"{name}-{i}", gpus, {"scheduling.k8s.io/group-name": name})


def _pod(
    core: client.CoreV1Api,
    namespace: str,
    name: str,
    gpus: int,
    annotations: dict[str, str],
    scheduler: str = "volcano",
) -> None:
    requests = {"cpu": "1", "nvidia.com/gpu": str(gpus)}
    core.create_namespaced_pod(
        namespace,
        {
            "metadata": {"name": name, "annotations": annotations},
            "spec": {
                "schedulerName": scheduler,
                "containers": [
                    {"name": "main", "image": "busybox", "resources": {"requests": requests, "limits": requests}}
                ],
            },
        },
    )


def _placed(core: client.CoreV1Api, namespace: str) -> dict[str, tuple[str, str]]:
    return {
        pod.metadata.name: (pod.spec.node_name or "", (pod.metadata.annotations or {}).get("volcano.sh/gpu-index", ""))
        for pod in core.list_namespaced_pod(namespace).items
    }


def _status(custom: Any, namespace: str, name: str) -> dict[str, Any]:
    status: dict[str, Any] = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "podgroups", name).get(
        "status", {}
    )
    return status


def test_a_gang_is_bound_whole_on_the_idc_with_its_cards_and_its_podgroup_runs(
    api: KubeApi, cluster: tuple[client.CoreV1Api, Any, str]
) -> None:
    core, custom, namespace = cluster
    _gang(core, custom, namespace, "train", pods=2, gpus=2)
    scheduler = ClusterScheduler(api)
    scheduler.step(0.0)
    assert _placed(core, namespace) == {"train-0": ("idc-0", "0,1"), "train-1": ("idc-0", "2,3")}
    assert _status(custom, namespace, "train")["phase"] == "Running"
    decisions = scheduler.step(1.0)  # read back: nothing to do
    assert decisions.binds == [] and scheduler.problems == []


def test_a_gang_that_cannot_fit_stays_unbound_and_its_podgroup_and_pods_say_why(
    api: KubeApi, cluster: tuple[client.CoreV1Api, Any, str]
) -> None:
    core, custom, namespace = cluster
    _pod(core, namespace, "other", 2, {}, scheduler="default-scheduler")
    core.create_namespaced_binding(  # another scheduler's pod takes 2 of the IDC node's GPUs
        namespace,
        {"metadata": {"name": "other"}, "target": {"apiVersion": "v1", "kind": "Node", "name": "idc-0"}},
        _preload_content=False,
    )
    _gang(core, custom, namespace, "big", pods=2, gpus=2)
    ClusterScheduler(api).step(0.0)
    assert _placed(core, namespace) == {"other": ("idc-0", ""), "big-0": ("", ""), "big-1": ("", "")}
    status = _status(custom, namespace, "big")
    assert status["phase"] == "Inqueue"
    (condition,) = status["conditions"]
    assert condition["type"] == "Unschedulable" and condition["message"]
    for name in ("big-0", "big-1"):  # each pod too, as cluster autoscalers and kubectl describe read it
        (scheduled,) = [
            c for c in core.read_namespaced_pod(name, namespace).status.conditions or [] if c.type == "PodScheduled"
        ]
        assert (scheduled.status, scheduled.reason, scheduled.message) == (
            "False",
            "Unschedulable",
            condition["message"],
        )
        events = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
        assert [(e.type, e.reason, e.message, e.source.component) for e in events] == [
            ("Warning", "FailedScheduling", condition["message"], "tidegate")
        ]


def test_a_nomination_is_written_to_the_pod_status_and_cleared(
    api: KubeApi, cluster: tuple[client.CoreV1Api, Any, str]
) -> None:
    core, _, namespace = cluster
    _pod(core, namespace, "waiting", 1, {})
    api.nominate(namespace, "waiting", "idc-0", "")  # whole GPUs: no card written
    assert core.read_namespaced_pod("waiting", namespace).status.nominated_node_name == "idc-0"
    assert eventually(lambda: _nominated(api, "waiting") == ("idc-0", ""))  # and the scheduler reads it back
    api.nominate(namespace, "waiting", "idc-0", "1")  # a GPU slice: its card too
    assert core.read_namespaced_pod("waiting", namespace).metadata.annotations[GPU_INDEX_ANNOTATION] == "1"
    assert eventually(lambda: _nominated(api, "waiting") == ("idc-0", "1"))
    api.nominate(namespace, "waiting", "", "")
    read = core.read_namespaced_pod("waiting", namespace)
    assert read.status.nominated_node_name is None and GPU_INDEX_ANNOTATION not in (read.metadata.annotations or {})


def _nominated(api: KubeApi, pod: str) -> tuple[str, str]:
    for doc in api.list_objects():
        if doc["kind"] == "Pod" and doc["metadata"]["name"] == pod:
            card = doc["metadata"].get("annotations", {}).get(GPU_INDEX_ANNOTATION, "")
            return str(doc.get("status", {}).get("nominatedNodeName", "")), str(card)
    return "", ""


def test_tidegate_kube_schedules_the_cluster_from_the_command_line(
    kubeconfig: Path, cluster: tuple[client.CoreV1Api, Any, str]
) -> None:
    core, _, namespace = cluster
    _pod(core, namespace, "solo", 1, {})  # no PodGroup: it gets a group of its own
    command = [sys.executable, "-m", "tidegate.cli.main", "kube", "--kubeconfig", str(kubeconfig), "--cycles", "1"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "cycle 1: 1 bound, 0 evicted" in done.stdout
    assert _placed(core, namespace) == {"solo": ("idc-0", "0")}


def test_the_kube_cycle_benchmark_runs_and_binds_every_waiting_group() -> None:
    from bench.kube_cycle import run

    rows, bound = run(nodes=3, running=4, pending=2, repeat=1)
    assert bound == 2 and rows[0][0] == "list (read the cluster)"
    assert all(seconds > 0 for _, seconds in rows)


def test_an_informer_follows_adds_changes_and_deletions(cluster: tuple[client.CoreV1Api, Any, str]) -> None:
    core, _, namespace = cluster
    informer = Informer(partial(core.list_namespaced_pod, namespace), "v1", "Pod")
    informer.start()
    try:
        assert informer.synced.wait(30) and informer.items() == []
        _pod(core, namespace, "p", 1, {})
        assert eventually(lambda: [d["metadata"]["name"] for d in informer.items()] == ["p"])
        assert informer.items()[0]["kind"] == "Pod" and informer.items()[0]["apiVersion"] == "v1"
        core.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"seen": "yes"}}})
        assert eventually(lambda: informer.items()[0]["metadata"].get("labels") == {"seen": "yes"})
        core.delete_namespaced_pod("p", namespace, grace_period_seconds=0)
        assert eventually(lambda: informer.items() == [])
        assert informer.lists == 1  # one list, then the watch alone
    finally:
        informer.stop()
    started = time.monotonic()
    assert informer.join(10.0)  # its open watch (60 s) was shut: the thread ends at once
    assert time.monotonic() - started < 2.0


def test_only_the_lease_holder_schedules_and_a_rival_takes_over_a_lease_left_to_expire(kubeconfig: Path) -> None:
    coordination = client.CoordinationV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    a = Lease(coordination, "default", "test-lease", "a", duration_seconds=2.0, renew_seconds=0.3)
    b = Lease(coordination, "default", "test-lease", "b", duration_seconds=2.0, renew_seconds=0.3)
    assert a.hold() and not b.hold()
    time.sleep(0.4)
    assert a.hold() and not b.hold()  # renewed: b's view of the record changed, its wait starts again
    assert eventually(b.hold, 10.0)  # a stopped renewing: after the duration b takes over
    assert not a.hold()
    b.release()
    assert a.hold()  # released: no need to wait the duration out
    lease = coordination.read_namespaced_lease("test-lease", "default")
    assert lease.spec.holder_identity == "a" and lease.spec.lease_transitions == 2
    a.release()


def test_tidegate_kube_with_leader_election_schedules_once_it_holds_the_lease(
    kubeconfig: Path, cluster: tuple[client.CoreV1Api, Any, str]
) -> None:
    core, _, namespace = cluster
    _pod(core, namespace, "elected", 1, {})
    command = [sys.executable, "-m", "tidegate.cli.main", "kube", "--kubeconfig", str(kubeconfig), "--cycles", "1"]
    command += ["--leader-elect", "--lock-namespace", "default", "--lock-name", "cli-lease"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "leading as" in done.stdout and _placed(core, namespace) == {"elected": ("idc-0", "0")}


def test_tidegate_kube_stopped_by_sigterm_releases_its_lease_at_once(
    kubeconfig: Path, cluster: tuple[client.CoreV1Api, Any, str], tmp_path: Path
) -> None:
    command = [sys.executable, "-m", "tidegate.cli.main", "kube", "--kubeconfig", str(kubeconfig)]
    command += ["--leader-elect", "--lock-namespace", "default", "--lock-name", "sigterm-lease"]
    coordination = client.CoordinationV1Api(config.new_client_from_config(config_file=str(kubeconfig)))
    log = tmp_path / "kube.log"
    with log.open("w") as output:
        replica = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, text=True)
    try:
        assert eventually(lambda: "leading as" in log.read_text(), 60.0), log.read_text()
        holder = coordination.read_namespaced_lease("sigterm-lease", "default").spec.holder_identity
        assert holder
        replica.send_signal(signal.SIGTERM)  # what the kubelet sends a pod it stops
        assert replica.wait(timeout=30) == 0, log.read_text()
    finally:
        if replica.poll() is None:
            replica.kill()
    lease = coordination.read_namespaced_lease("sigterm-lease", "default")
    assert not lease.spec.holder_identity  # released: a standby takes over without waiting 15 s


@pytest.mark.parametrize("bare", [False, True], ids=["podgroup", "bare-pod"])
def test_a_waiting_podgroup_or_bare_pod_bursts_to_the_cloud_node_through_the_api_server(
    api: KubeApi, cluster: tuple[client.CoreV1Api, Any, str], bare: bool
) -> None:
    core, custom, namespace = cluster
    queue = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Queue", "metadata": {"name": "burst-cloud"}, "spec": {}}
    custom.create_cluster_custom_object(GROUP, VERSION, "queues", queue)
    try:
        scheduler = ClusterScheduler(api, burst=Burst("burst-cloud", after_seconds=0))
        _gang(core, custom, namespace, "local", pods=1, gpus=4)
        scheduler.step(time.time())
        assert _placed(core, namespace)["local-0"][0] == "idc-0"  # the IDC node is full now
        if bare:  # a pod naming no PodGroup: its queue is its annotation's
            _pod(core, namespace, "extra-0", 4, {})
        else:
            _gang(core, custom, namespace, "extra", pods=1, gpus=4)

        def moved() -> bool:
            scheduler.step(time.time())
            return bool(scheduler.overflowed)

        assert eventually(moved)
        key = f"{namespace}/podgroup-extra-0" if bare else f"{namespace}/extra"
        assert scheduler.overflowed == {key: "default"}
        pod = core.read_namespaced_pod("extra-0", namespace)
        if bare:
            assert pod.metadata.annotations["scheduling.volcano.sh/queue-name"] == "burst-cloud"
        else:
            group = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, "podgroups", "extra")
            assert group["spec"]["queue"] == "burst-cloud"
        assert any(t.key == "cloud.provider" and t.operator == "Exists" for t in pod.spec.tolerations)

        def landed() -> bool:
            scheduler.step(time.time())
            return _placed(core, namespace)["extra-0"][0] != ""

        assert eventually(landed)
        assert _placed(core, namespace)["extra-0"][0] == "cloud-0"
    finally:
        custom.delete_cluster_custom_object(GROUP, VERSION, "queues", "burst-cloud")


def test_tidegate_kube_reads_kubeconfig_merged_from_the_environment(
    kubeconfig: Path, cluster: tuple[client.CoreV1Api, Any, str], tmp_path: Path
) -> None:
    core, _, namespace = cluster
    _pod(core, namespace, "merged", 1, {})
    document = yaml.safe_load(kubeconfig.read_text())
    # as kubectl merges $KUBECONFIG: the first file to name a context or set current-context wins, files that
    # do not exist are skipped, and the second file supplies the cluster and user the context names
    first = {"contexts": document["contexts"], "current-context": "t", "clusters": [], "users": []}
    second = {
        "clusters": document["clusters"],
        "users": document["users"],
        "contexts": [{"name": "t", "context": {"cluster": "elsewhere", "user": "nobody"}}],
        "current-context": "other",
    }
    (tmp_path / "first").write_text(yaml.safe_dump(first))
    (tmp_path / "second").write_text(yaml.safe_dump(second))
    listed = ":".join(str(tmp_path / name) for name in ("first", "missing", "second"))
    command = [sys.executable, "-m", "tidegate.cli.main", "kube", "--cycles", "1"]
    environment = {**os.environ, "KUBECONFIG": listed, "HOME": str(tmp_path)}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=environment)
    assert done.returncode == 0, done.stderr
    assert _placed(core, namespace) == {"merged": ("idc-0", "0")}


def test_tidegate_kube_rides_out_an_api_server_that_stops_and_comes_back(tmp_path: Path) -> None:
    (tmp_path / "kube").mkdir()
    with restartable_kube_apiserver(tmp_path / "kube") as (kubeconfig, apiserver):
        api = config.new_client_from_config(config_file=str(kubeconfig))
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        _make_cluster(core, custom, "away")
        _pod(core, "away", "before", 1, {})
        log = tmp_path / "kube.log"
        command = [sys.executable, "-m", "tidegate.cli.main", "kube", "--kubeconfig", str(kubeconfig)]
        with log.open("w") as output:
            scheduler = subprocess.Popen([*command, "--period", "0.2"], stdout=output, stderr=subprocess.STDOUT)
        try:
            assert eventually(lambda: _placed(core, "away").get("before", ("",))[0] == "idc-0", 60), log.read_text()
            apiserver.stop()
            assert eventually(lambda: "trying again in 4 s" in log.read_text(), 60), log.read_text()
            apiserver.start()
            apiserver.wait_ready(kubeconfig)
            _pod(core, "away", "after", 1, {})
            assert eventually(lambda: _placed(core, "away").get("after", ("",))[0] == "idc-0", 90), log.read_text()
            assert scheduler.poll() is None, log.read_text()
        finally:
            scheduler.send_signal(signal.SIGTERM)
            stopped = scheduler.wait(timeout=30)
        text = log.read_text()
        assert stopped == 0, text
    failed = [line for line in text.splitlines() if line.startswith("cycle failed (")]
    assert "Traceback" not in text and len(failed) < 20, text  # one line an attempt, not a traceback a call
    waits = [float(line.rsplit("trying again in ", 1)[1].split()[0]) for line in failed]
    assert waits[:3] == [1.0, 2.0, 4.0] and waits == sorted(waits), text  # doubling, while they fail
    assert all("unreachable" in line or "broke" in line for line in failed), text


def test_a_vcjob_s_pods_made_only_once_its_podgroup_is_inqueue_are_bound(
    api: KubeApi, cluster: tuple[client.CoreV1Api, Any, str]
) -> None:
    """The way Volcano's job controller works: it creates the PodGroup, waits for the scheduler to put it
    Inqueue, and only then creates the job's pods. The scheduler runs its loop meanwhile, as `tidegate kube`."""
    core, custom, namespace = cluster
    scheduler = ClusterScheduler(api)
    stop, failures = threading.Event(), []

    def loop() -> None:
        while not stop.is_set():
            try:
                scheduler.step(time.time())
            except Exception as exc:  # reported by the test
                failures.append(exc)
            stop.wait(0.2)

    runner = threading.Thread(target=loop, daemon=True)
    runner.start()
    try:
        spec = {"minMember": 2, "queue": "default", "minResources": {"cpu": "2", "nvidia.com/gpu": "4"}}
        group = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "PodGroup", "metadata": {"name": "train"}, "spec": spec}
        custom.create_namespaced_custom_object(GROUP, VERSION, namespace, "podgroups", group)
        assert eventually(lambda: _status(custom, namespace, "train").get("phase") == "Inqueue"), failures
        assert _placed(core, namespace) == {}  # no pod exists until the group is admitted
        for i in range(2):  # the job controller's turn
            _pod(core, namespace, f"train-{i}", 2, {"scheduling.k8s.io/group-name": "train"})
        assert eventually(lambda: all(node for node, _ in _placed(core, namespace).values())), failures
        assert _placed(core, namespace) == {"train-0": ("idc-0", "0,1"), "train-1": ("idc-0", "2,3")}
        assert eventually(lambda: _status(custom, namespace, "train").get("phase") == "Running"), failures
    finally:
        stop.set()
        runner.join(10)
    assert failures == []
