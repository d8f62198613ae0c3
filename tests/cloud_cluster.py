"""The cloud cluster's machinery that a test plays, since a bare kube-apiserver has none: the provisioner
(Karpenter's part: a NodeClaim becomes a Ready Node labelled with the claim's requirements, linked by the
claim's `status.nodeName`; a Node whose claim went is deleted) and the kubelets (a pod bound to a Node
starts running, finishes, and on deletion gets its grace period, then is deleted for good)."""

from __future__ import annotations

import contextlib
import itertools
import time
from pathlib import Path
from typing import Any

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

GROUP, VERSION, PLURAL = "karpenter.sh", "v1", "nodeclaims"
#: The label by which the fake provisioner knows its Nodes' claims (Karpenter uses an owner reference).
CLAIM_LABEL = "test.tidegate.io/nodeclaim"
_numbers = itertools.count(1)


def now_stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class FakeCloud:
    """One cloud cluster's provisioner and kubelets, for the NodeClaims of one member (its cluster label)."""

    def __init__(self, kubeconfig: Path, member: str, namespace: str) -> None:
        """`namespace`: where the test's pods are (the member makes its cloud pods in the IDC pods' namespace)."""
        api = config.new_client_from_config(config_file=str(kubeconfig))
        self.core, self.custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        self.member, self.namespace = member, namespace
        #: Grace periods the kubelets were given, by pod (namespace/name), as deletions came.
        self.graces: dict[str, int | None] = {}

    # -- the provisioner ------------------------------------------------------------------------------
    def claims(self) -> list[dict[str, Any]]:
        found = self.custom.list_cluster_custom_object(
            GROUP, VERSION, PLURAL, label_selector=f"tidegate.io/cluster={self.member}"
        )
        return list(found["items"])

    def nodes(self) -> list[dict[str, Any]]:
        listed = self.core.list_node(label_selector=f"{CLAIM_LABEL},test.tidegate.io/member={self.member}")
        return [client.ApiClient().sanitize_for_serialization(node) for node in listed.items]

    def provision(self, ready: bool = True, gpus: str = "") -> list[str]:
        """Every claim without a Node gets one; returns the new Nodes' names."""
        made = []
        for claim in self.claims():
            if (claim.get("status") or {}).get("nodeName") or claim["metadata"].get("deletionTimestamp"):
                continue
            name = f"ip-10-0-{next(_numbers)}-{self.member[-6:]}.ec2.internal"
            labels = {CLAIM_LABEL: claim["metadata"]["name"], "test.tidegate.io/member": self.member}
            for requirement in claim["spec"]["requirements"]:
                if requirement["operator"] == "In" and len(requirement["values"]) == 1:
                    labels[requirement["key"]] = requirement["values"][0]  # as Karpenter labels its nodes
            labels |= {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name}
            requests = claim["spec"]["resources"]["requests"]
            resources = {
                "cpu": "95",  # what the instance has left for pods: not the pool's 96
                "memory": requests.get("memory", "1Ti"),
                "nvidia.com/gpu": gpus or requests.get("nvidia.com/gpu", "0"),
                "pods": "110",
            }
            status = "True" if ready else "False"
            self.core.create_node(
                {
                    "metadata": {"name": name, "labels": labels},
                    "spec": {"providerID": f"aws:///us-east-1a/i-{next(_numbers):017x}"},
                    "status": {
                        "capacity": {**resources, "cpu": "96"},
                        "allocatable": resources,
                        "conditions": [{"type": "Ready", "status": status, "reason": "KubeletReady"}],
                        "nodeInfo": _node_info(),
                    },
                }
            )
            self.core.patch_node(name, {"spec": {"taints": []}})  # no node lifecycle controller here: lifted
            self.custom.patch_cluster_custom_object_status(
                GROUP,
                VERSION,
                PLURAL,
                claim["metadata"]["name"],
                {"status": {"nodeName": name, "conditions": [{"type": "Ready", "status": status}]}},
            )
            made.append(name)
        return made

    def set_ready(self, node: str, ready: bool) -> None:
        condition = {"type": "Ready", "status": "True" if ready else "False", "reason": "KubeletReady"}
        self.core.patch_node_status(node, {"status": {"conditions": [condition]}})

    def reclaim(self) -> list[str]:
        """Nodes whose claim is gone are deleted (with them, nothing: there is no pod garbage collector)."""
        claims = {claim["metadata"]["name"] for claim in self.claims()}
        gone = [
            node["metadata"]["name"] for node in self.nodes() if node["metadata"]["labels"][CLAIM_LABEL] not in claims
        ]
        for name in gone:
            self.core.delete_node(name)
        return gone

    def taint(self, node: str, key: str, value: str = "") -> None:
        """An interruption notice, as node-termination-handler or Karpenter put it on the Node."""
        taints = self.core.read_node(node).spec.taints or []
        kept = [{"key": t.key, "value": t.value, "effect": t.effect} for t in taints]
        self.core.patch_node(node, {"spec": {"taints": [*kept, {"key": key, "value": value, "effect": "NoSchedule"}]}})

    # -- the kubelets ---------------------------------------------------------------------------------
    def all_pods(self) -> list[dict[str, Any]]:
        """The pods the member made in the test's namespace."""
        try:
            listed = self.core.list_namespaced_pod(self.namespace, label_selector="tidegate.io/idc-uid")
        except ApiException as exc:
            if exc.status == 404:
                return []
            raise
        return [client.ApiClient().sanitize_for_serialization(pod) for pod in listed.items]

    def pods(self) -> list[dict[str, Any]]:
        """Those of them on a Node of the member's that exists (which a kubelet runs)."""
        nodes = {node["metadata"]["name"] for node in self.nodes()}
        return [pod for pod in self.all_pods() if pod["spec"].get("nodeName") in nodes]

    def run(self) -> list[str]:
        """Pods bound to a Ready Node and Pending start running; returns them."""
        started = []
        for pod in self.pods():
            if (pod.get("status") or {}).get("phase", "Pending") == "Pending" and not pod["metadata"].get(
                "deletionTimestamp"
            ):
                self.set_phase(pod["metadata"]["namespace"], pod["metadata"]["name"], "Running")
                started.append(pod["metadata"]["name"])
        return started

    def set_phase(self, namespace: str, name: str, phase: str, exit_code: int = 0) -> None:
        """The pod's status as its kubelet writes it in that phase."""
        pod = self.core.read_namespaced_pod(name, namespace)
        at = now_stamp()
        if phase == "Running":
            state: dict[str, Any] = {"running": {"startedAt": at}}
        elif phase in ("Succeeded", "Failed"):
            reason = "Completed" if phase == "Succeeded" else "Error"
            state = {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": at, "finishedAt": at}}
        else:
            state = {"waiting": {"reason": "ContainerCreating"}}
        containers = [
            {
                "name": container.name,
                "image": container.image,
                "imageID": f"docker-pullable://{container.image}@sha256:{'0' * 64}",
                "ready": phase == "Running",
                "restartCount": 0,
                "state": state,
                "started": phase == "Running",
            }
            for container in pod.spec.containers
        ]
        ready = "True" if phase == "Running" else "False"
        status = {
            "phase": phase,
            "hostIP": "10.0.0.1",
            "podIP": pod.status.pod_ip or f"10.1.{next(_numbers) % 250}.{next(_numbers) % 250}",
            "startTime": pod.status.start_time.strftime("%Y-%m-%dT%H:%M:%SZ") if pod.status.start_time else at,
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": at},
                {"type": "Ready", "status": ready, "lastTransitionTime": at},
                {"type": "ContainersReady", "status": ready, "lastTransitionTime": at},
            ],
            "containerStatuses": containers,
            "qosClass": "BestEffort",
        }
        self.core.patch_namespaced_pod_status(name, namespace, {"status": status})

    def terminate(self) -> list[str]:
        """Pods marked for deletion: their containers stop (the preStop hook ran within the grace period), then
        the kubelet deletes them for good. Returns them (namespace/name)."""
        done = []
        for pod in self.pods():
            meta = pod["metadata"]
            if not meta.get("deletionTimestamp"):
                continue
            where = f"{meta['namespace']}/{meta['name']}"
            self.graces[where] = meta.get("deletionGracePeriodSeconds")
            try:
                self.core.delete_namespaced_pod(
                    meta["name"],
                    meta["namespace"],
                    body=client.V1DeleteOptions(
                        grace_period_seconds=0, preconditions=client.V1Preconditions(uid=meta["uid"])
                    ),
                )
            except ApiException as exc:
                if exc.status not in (404, 409):
                    raise
            done.append(where)
        return done

    def delete_pod(self, namespace: str, name: str) -> None:
        """Someone deletes the pod in the cloud cluster (at once)."""
        self.core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)

    def clean(self) -> None:
        """Remove everything of the member's (at the end of a test)."""
        for pod in self.all_pods():
            with contextlib.suppress(ApiException):
                self.core.delete_namespaced_pod(
                    pod["metadata"]["name"], pod["metadata"]["namespace"], grace_period_seconds=0
                )
        for claim in self.claims():
            self.custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, claim["metadata"]["name"])
        self.reclaim()


def _node_info() -> dict[str, str]:
    return {
        "architecture": "amd64",
        "operatingSystem": "linux",
        "osImage": "Amazon Linux 2",
        "kernelVersion": "5.10.0",
        "containerRuntimeVersion": "containerd://1.7.0",
        "kubeletVersion": "v1.20.2",
        "kubeProxyVersion": "v1.20.2",
        "machineID": "",
        "systemUUID": "",
        "bootID": "",
    }
