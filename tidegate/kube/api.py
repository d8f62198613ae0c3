"""What tidegate reads from and writes to a Kubernetes API server when it schedules a real cluster.

Reads are plain JSON lists (the official client with `_preload_content=False`: no model objects, and the
same documents `tidegate.model.manifests` parses from files). Writes are what Volcano's scheduler writes:
a pod's GPU cards (annotation `volcano.sh/gpu-index`) and its Binding, a PodGroup's `status.phase` and
conditions, and the deletion of a pod evicted by preempt or reclaim.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

from kubernetes import client
from kubernetes.client import rest
from kubernetes.client.exceptions import ApiException

from tidegate.fleet.pool import CLOUD_TOLERATION
from tidegate.kube.failures import NoRetryOfTimeouts
from tidegate.kube.informer import Informer, documents
from tidegate.kube.kubeconfig import api_client
from tidegate.model.manifests import QUEUE_NAME_ANNOTATION
from tidegate.model.objects import GPU_INDEX_ANNOTATION, TaintEffect

VOLCANO_GROUP, VOLCANO_VERSION = "scheduling.volcano.sh", "v1beta1"
#: Where a PodGroup (or a bare pod) moved to the burst queue keeps the queue it was submitted to.
HOME_QUEUE_ANNOTATION = "tidegate.io/home-queue"
#: The component named as the source of the events tidegate records.
EVENT_SOURCE = "tidegate"
#: Seconds a first read waits for the watches' first listings.
SYNC_SECONDS = 60.0
#: Seconds a request may take to connect, and then for each part of its answer, unless told (kubectl's
#: --request-timeout; 0: no limit): a server that accepts connections but never answers fails the request
#: then, not never. A watch reads for its own timeoutSeconds longer.
REQUEST_TIMEOUT_SECONDS = 30.0
#: Seconds `close` waits for each stopped watch's thread.
STOP_SECONDS = 5.0
_log = logging.getLogger(__name__)


class ClusterApi(Protocol):
    """The cluster as the scheduler sees it (a real API server, or a fake in tests)."""

    def list_objects(self) -> list[dict[str, Any]]:
        """Nodes, PriorityClasses, Queues, PodGroups, Pods and Namespaces, each with its apiVersion and kind."""
        ...

    def version(self) -> int | None:
        """A number that changes whenever what `list_objects` returns may have changed; None when it cannot
        tell (each read is fresh)."""
        ...

    def bind(self, namespace: str, pod: str, node: str, gpu_index: str) -> None:
        """Bind the pod to the node (its GPU cards first, when it has some)."""
        ...

    def set_group_status(self, namespace: str, name: str, phase: str, message: str) -> None:
        """Write a PodGroup's phase and, while it cannot be placed, why (condition Unschedulable)."""
        ...

    def evict(self, namespace: str, pod: str) -> None:
        """Delete an evicted pod (its controller recreates it, as its job's policies say)."""
        ...

    def nominate(self, namespace: str, pod: str, node: str, gpu_index: str) -> None:
        """Write the node a pipelined pod waits for (`status.nominatedNodeName`; "" clears it) and the GPU card
        its slice holds there (`volcano.sh/gpu-index`, written first; "" removes it), so another replica or
        a restart holds that node's room, and that card, for it."""
        ...

    def set_pod_unschedulable(self, namespace: str, pod: str, message: str) -> None:
        """Say why a pod waits, as Volcano's and kube-scheduler's do: its `PodScheduled` condition False with
        reason Unschedulable (what cluster autoscalers look for), and a `FailedScheduling` Warning event."""
        ...

    def overflow(self, namespace: str, group: str, queue: str, pods: list[str], home: str = "") -> None:
        """Move a waiting PodGroup to another queue; to the burst queue (`home` its own queue) its pods first
        get the cloud toleration, and `home` is kept on it (`tidegate.io/home-queue`)."""
        ...

    def overflow_pod(self, namespace: str, pod: str, queue: str, home: str = "") -> None:
        """Move a waiting pod that names no PodGroup to another queue, as `overflow` does: its queue annotation
        names its one-pod group's queue."""
        ...


class FleetApi(ClusterApi, Protocol):
    """What `tidegate kube` also writes when it hosts the fleet's controllers (`tidegate.kube.fleet`)."""

    def tolerate_cloud(self, namespace: str, pod: str) -> None:
        """Add the cloud toleration to a pod (a pod's tolerations may be added to)."""
        ...

    def create_node(self, doc: dict[str, Any]) -> None:
        """Register a Node (a virtual node of a served pool), Ready, with its taints; one that exists already is
        left as it is."""
        ...

    def delete_node(self, name: str) -> None:
        """Deregister a Node (gone already is fine)."""
        ...

    def cordon(self, name: str, cordoned: bool) -> None:
        """Set a Node's `spec.unschedulable`."""
        ...

    def delete_pod(self, namespace: str, pod: str, grace_seconds: int | None = None) -> None:
        """Delete a pod with its own termination grace period (or `grace_seconds`); gone already is fine."""
        ...

    def patch_queue(self, name: str, patch: dict[str, Any]) -> None:
        """A JSON merge patch of a Volcano Queue."""
        ...

    def record_event(self, involved: dict[str, str], reason: str, message: str, warning: bool = False) -> None:
        """An Event about an object (`apiVersion`, `kind`, `name`, and `namespace` for a namespaced one)."""
        ...


def timed(api: client.ApiClient, seconds: float) -> client.ApiClient:
    """`api` with a timeout on every request that sets none itself: `seconds` to connect, and `seconds` for
    each read of the answer (none when 0, as kubectl's `--request-timeout=0`). A request that timed out is
    not retried by the transport (urllib3 retries a read three times, which would make one attempt cost
    four timeouts): the caller's backoff tries again, one line an attempt."""
    api.configuration.retries = NoRetryOfTimeouts(3)  # urllib3's default count otherwise
    timeout = (seconds, seconds) if seconds > 0 else None
    api.rest_client.close()
    api.rest_client = _TimedRESTClient(api.configuration, timeout)  # the pool manager reads `retries` when made
    return api


class _TimedRESTClient(rest.RESTClientObject):
    """The client's transport, with a (connect, read) timeout for requests that give none."""

    def __init__(self, configuration: client.Configuration, timeout: tuple[float, float] | None) -> None:
        super().__init__(configuration)
        self.timeout = timeout

    def request(
        self,
        method: str,
        url: str,
        headers: Any = None,
        body: Any = None,
        post_params: Any = None,
        _request_timeout: Any = None,
    ) -> Any:
        timeout = _request_timeout or self.timeout
        return super().request(method, url, headers, body, post_params, timeout)  # type: ignore[no-untyped-call]


class KubeApi:
    """ClusterApi over the official Python client, from a kubeconfig (or in-cluster service account).

    With `watch` (the default) the objects are listed once and then followed by watches (`Informer`): a
    read costs no API call. Without it every read lists the cluster."""

    def __init__(
        self,
        kubeconfig: str | None = None,
        context: str | None = None,
        watch: bool = True,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        """The cluster as kubectl finds it (`tidegate.kube.kubeconfig`: --kubeconfig, $KUBECONFIG,
        ~/.kube/config, the pod's service account); raises KubeconfigError saying why it cannot. Every request
        times out after `request_timeout` seconds (`timed`)."""
        self.client = timed(api_client(kubeconfig, context), request_timeout)
        self.request_timeout = request_timeout
        #: The API server's address, as messages name it.
        self.host = str(self.client.configuration.host)
        self.core = client.CoreV1Api(self.client)
        self.scheduling = client.SchedulingV1Api(self.client)
        self.custom = client.CustomObjectsApi(self.client)
        volcano = f"{VOLCANO_GROUP}/{VOLCANO_VERSION}"
        custom = partial(self.custom.list_cluster_custom_object, VOLCANO_GROUP, VOLCANO_VERSION)
        #: What a read returns, kind by kind, in this order, and how to list each.
        self.kinds: list[tuple[Callable[..., Any], str, str]] = [
            (self.core.list_node, "v1", "Node"),
            (self.scheduling.list_priority_class, "scheduling.k8s.io/v1", "PriorityClass"),
            (partial(custom, "queues"), volcano, "Queue"),
            (partial(custom, "podgroups"), volcano, "PodGroup"),
            (self.core.list_pod_for_all_namespaces, "v1", "Pod"),
            (self.core.list_namespace, "v1", "Namespace"),  # their labels, for pod affinity's namespaceSelector
        ]
        self.watch = watch
        self.informers: list[Informer] = []

    def list_objects(self) -> list[dict[str, Any]]:
        if not self.watch:
            listings = [(json.loads(call(_preload_content=False).data), api, kind) for call, api, kind in self.kinds]
            return [doc for listing, api, kind in listings for doc in documents(listing, api, kind)]
        if not self.informers:
            self.informers = [
                Informer(call, api_version, kind, self.request_timeout) for call, api_version, kind in self.kinds
            ]
            for informer in self.informers:
                informer.start()
        for informer in self.informers:
            informer.ready(SYNC_SECONDS)  # Unreachable while its last list or watch failed
        return [doc for informer in self.informers for doc in informer.items()]

    def version(self) -> int | None:
        if not self.watch or not self.informers or any(informer.error for informer in self.informers):
            return None  # listing every cycle, or a watch failing: the objects may have changed unseen
        return sum(informer.changes for informer in self.informers)

    def close(self) -> None:
        """Stop the watches and wait for their threads (a few seconds at most)."""
        for informer in self.informers:
            informer.stop()
        for informer in self.informers:
            if not informer.join(STOP_SECONDS):
                _log.warning("%s informer did not stop within %g s", informer.kind, STOP_SECONDS)

    def bind(self, namespace: str, pod: str, node: str, gpu_index: str) -> None:
        if gpu_index:
            patch = {"metadata": {"annotations": {GPU_INDEX_ANNOTATION: gpu_index}}}
            self.core.patch_namespaced_pod(pod, namespace, patch)
        binding = client.V1Binding(
            metadata=client.V1ObjectMeta(name=pod, namespace=namespace),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        # the client raises on reading a successful bind's answer (kubernetes-client/python#547): not read
        self.core.create_namespaced_pod_binding(pod, namespace, binding, _preload_content=False)

    def set_group_status(self, namespace: str, name: str, phase: str, message: str) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status: dict[str, Any] = {"phase": phase}
        if message:
            status["conditions"] = [
                {
                    "type": "Unschedulable",
                    "status": "True",
                    "reason": "NotEnoughResources",
                    "message": message,
                    "lastTransitionTime": now,
                }
            ]
        body = {"status": status}
        args = (VOLCANO_GROUP, VOLCANO_VERSION, namespace, "podgroups", name, body)
        try:
            self.custom.patch_namespaced_custom_object_status(*args)
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.custom.patch_namespaced_custom_object(*args)  # a CRD without the status subresource

    def overflow(self, namespace: str, group: str, queue: str, pods: list[str], home: str = "") -> None:
        if home:
            for name in pods:
                self.tolerate_cloud(namespace, name)
        patch = {"metadata": {"annotations": {HOME_QUEUE_ANNOTATION: home or None}}, "spec": {"queue": queue}}
        self.custom.patch_namespaced_custom_object(VOLCANO_GROUP, VOLCANO_VERSION, namespace, "podgroups", group, patch)

    def overflow_pod(self, namespace: str, pod: str, queue: str, home: str = "") -> None:
        if home:
            self.tolerate_cloud(namespace, pod)
        annotations = {QUEUE_NAME_ANNOTATION: queue, HOME_QUEUE_ANNOTATION: home or None}
        self.core.patch_namespaced_pod(pod, namespace, {"metadata": {"annotations": annotations}})

    def create_node(self, doc: dict[str, Any]) -> None:
        body: Any = doc  # a plain document: the client sends it as it is
        try:
            self.core.create_node(body, _preload_content=False)
        except ApiException as exc:
            if exc.status != 409:  # registered already
                raise
            return
        # The API server taints a new node not-ready until the node controller sees it Ready; registered Ready,
        # it has the taints it was given (what that controller would leave).
        taints = doc.get("spec", {}).get("taints", [])
        self.core.patch_node(doc["metadata"]["name"], {"spec": {"taints": taints}}, _preload_content=False)

    def delete_node(self, name: str) -> None:
        try:
            self.core.delete_node(name, _preload_content=False)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def cordon(self, name: str, cordoned: bool) -> None:
        try:
            self.core.patch_node(name, {"spec": {"unschedulable": cordoned or None}}, _preload_content=False)
        except ApiException as exc:
            if exc.status != 404:  # gone meanwhile: nothing to cordon
                raise

    def delete_pod(self, namespace: str, pod: str, grace_seconds: int | None = None) -> None:
        try:
            self.core.delete_namespaced_pod(pod, namespace, grace_period_seconds=grace_seconds, _preload_content=False)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def patch_queue(self, name: str, patch: dict[str, Any]) -> None:
        self.custom.patch_cluster_custom_object(VOLCANO_GROUP, VOLCANO_VERSION, "queues", name, patch)

    def record_event(self, involved: dict[str, str], reason: str, message: str, warning: bool = False) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        namespace = involved.get("namespace") or "default"  # a cluster-scoped object's events go to default
        event: Any = {
            "metadata": {"generateName": f"{involved['name']}.", "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message[:1024],
            "type": "Warning" if warning else "Normal",
            "source": {"component": EVENT_SOURCE},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self.core.create_namespaced_event(namespace, event, _preload_content=False)

    def tolerate_cloud(self, namespace: str, pod: str) -> None:
        toleration = {"key": CLOUD_TOLERATION.key, "operator": "Exists", "effect": TaintEffect.NO_SCHEDULE.value}
        # a pod's tolerations may be added to, not changed: the list is written whole
        response: Any = self.core.read_namespaced_pod(pod, namespace, _preload_content=False)
        tolerations = json.loads(response.data).get("spec", {}).get("tolerations") or []
        if toleration not in tolerations:
            self.core.patch_namespaced_pod(pod, namespace, {"spec": {"tolerations": [*tolerations, toleration]}})

    def nominate(self, namespace: str, pod: str, node: str, gpu_index: str) -> None:
        if gpu_index or not node:  # a whole-GPU pod's nomination has no card to write
            patch = {"metadata": {"annotations": {GPU_INDEX_ANNOTATION: gpu_index or None}}}
            self.core.patch_namespaced_pod(pod, namespace, patch)
        self.core.patch_namespaced_pod_status(pod, namespace, {"status": {"nominatedNodeName": node or None}})

    def set_pod_unschedulable(self, namespace: str, pod: str, message: str) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": now,
        }
        self.core.patch_namespaced_pod_status(pod, namespace, {"status": {"conditions": [condition]}})
        event: Any = {  # a plain document: the client sends it as it is
            "metadata": {"generateName": f"{pod}.", "namespace": namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": pod},
            "reason": "FailedScheduling",
            "message": message,
            "type": "Warning",
            "source": {"component": EVENT_SOURCE},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
        self.core.create_namespaced_event(namespace, event)

    def evict(self, namespace: str, pod: str) -> None:
        try:
            self.core.delete_namespaced_pod(pod, namespace)
        except ApiException as exc:
            if exc.status != 404:  # already gone
                raise
