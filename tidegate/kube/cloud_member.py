"""A cloud cluster as a member of the IDC cluster: everything that crosses between the two API servers.

The IDC cluster runs tidegate's scheduler; a public cloud's GPU instances appear in it as virtual Nodes
(Virtual Kubelet style) whose pods run in the cloud's own cluster. One `CloudMember` serves one cloud
cluster (a `Cluster` of type cloud and its `NodePool`s, tidegate/fleet/spec.py). Every period `sync(now)`
reads both sides and makes them agree:

- instances: the member's NodeClaims in the cloud (`tidegate.kube.nodeclaims`), each `provisioning` until
  its Node is Ready, then `ready`, then `gone`;
- registration: one virtual node in the IDC per ready instance, named as the instance
  (`tidegate.kube.virtual_nodes`), its Ready condition heartbeated as a kubelet's; removed when the instance
  goes, its pods then marked Failed (`NodeLost`);
- pods (`tidegate.kube.pod_mirror`): a pod bound to a virtual node is created in the cloud, bound to its
  instance's Node; the cloud pod's status is written back to the IDC pod; an IDC pod marked for deletion
  has its cloud pod deleted with the same grace period, and is deleted for good (as a kubelet does) once
  the cloud pod is gone; a cloud pod whose IDC pod is gone is deleted; an IDC pod whose cloud pod
  disappeared while it ran is marked Failed (`CloudPodLost`);
- spot notices: an interruption taint on a cloud Node (AWS node-termination-handler's, Karpenter's) is
  copied onto its virtual node and reported by `notices()`;
- the link: while the cloud's API server cannot be reached, `reachable` is False, the virtual nodes' Ready
  condition is Unknown (reason `CloudUnreachable`: the IDC's scheduler places nothing new there) and what
  was known is kept; the next sync that reaches it reconciles from what both sides say then.

What to do about any of it is the fleet's (how many instances, when to drain, what a cut link means): the
member offers operations for that, `provision`, `release`, `cordon` and `drain`, and observations,
`instances`, `notices`, `pods_by_node`, `reachable`. It keeps nothing of its own that a restart would miss:
both API servers hold the state (labels and annotations tie the two sides together), so a restarted member
adopts what exists, and nothing is created twice. A conclusion that deletes or fails something (a claim,
a cloud pod, an IDC pod gone) is checked with a fresh read first, as watches may lag. With a `Lease`, only
its holder acts, so two replicas never both mirror.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import replace
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tidegate.fleet.pool import POOL_LABEL, Pool
from tidegate.fleet.spec import ClusterSpec, NodePoolSpec
from tidegate.kube.api import REQUEST_TIMEOUT_SECONDS
from tidegate.kube.failures import describe, expected
from tidegate.kube.lease import Lease
from tidegate.kube.member_api import CloudSide, IdcSide
from tidegate.kube.nodeclaims import (
    Instance,
    InstanceState,
    claim_message,
    claimed_node,
    node_ready,
    nodeclaim,
)
from tidegate.kube.nodeclaims import selector as claim_selector
from tidegate.kube.pod_mirror import (
    CLOUD_POD_ANNOTATION,
    CLOUD_POD_LOST,
    FINISHED,
    IDC_UID_LABEL,
    NODE_LOST,
    annotation,
    cloud_pod,
    deleting,
    grace_seconds,
    key,
    lost_status,
    phase,
    status_patch,
    uid,
)
from tidegate.kube.virtual_nodes import (
    CLOUD_UNREACHABLE,
    NOTICED_ANNOTATION,
    RELEASING_ANNOTATION,
    merged_taints,
    notice_taints,
    ready_condition,
    same_taints,
    seconds,
    stamp,
    virtual_node,
)
from tidegate.kube.virtual_nodes import selector as node_selector

_log = logging.getLogger(__name__)
#: Seconds between heartbeats of a virtual node's Ready condition (a kubelet's nodeStatusUpdateFrequency).
HEARTBEAT_SECONDS = 10.0
#: Seconds an instance that went is still reported (as `gone`) by `instances`.
GONE_SECONDS = 600.0
try:
    VERSION = package_version("tidegate")
except PackageNotFoundError:  # run from a tree that was not installed
    VERSION = "0"


NOT_READ = "not read yet"


class NotLeading(RuntimeError):
    """An operation was asked of a member whose process does not hold the lease: another replica acts."""


class _LinkDown(Exception):
    """The cloud's API server stopped answering in the middle of a sync."""


def _meta(doc: Mapping[str, Any]) -> dict[str, Any]:
    meta = doc.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _name(doc: Mapping[str, Any]) -> str:
    return str(_meta(doc).get("name", ""))


def _labels(doc: Mapping[str, Any]) -> dict[str, str]:
    labels = _meta(doc).get("labels")
    return labels if isinstance(labels, dict) else {}


def _ready_of(doc: Mapping[str, Any]) -> dict[str, Any]:
    for condition in (doc.get("status") or {}).get("conditions") or ():
        if isinstance(condition, dict) and condition.get("type") == "Ready":
            return condition
    return {}


class CloudMember:
    """One cloud cluster's instances, virtual nodes and pods, kept in step with the IDC cluster."""

    def __init__(
        self,
        name: str,
        cluster: ClusterSpec,
        pools: Mapping[str, NodePoolSpec],
        idc: client.ApiClient,
        cloud: client.ApiClient,
        *,
        watch: bool = True,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
        lease: Lease | None = None,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
        node_class: dict[str, str] | None = None,
    ) -> None:
        """`name` is the cloud's Cluster name, `pools` NodePools by name (those of other clusters are left
        out); `idc` and `cloud` are API clients whose requests time out (`tidegate.kube.api.timed`). With
        `lease`, the member acts only while it holds it. `node_class`: the NodeClass its NodeClaims name
        (`nodeclaims.DEFAULT_NODE_CLASS` by default)."""
        if cluster.type != "cloud":
            raise ValueError(f"cluster {name} is of type {cluster.type}, not cloud")
        self.name, self.cluster = name, cluster
        self.pools = {pool: Pool(pool, spec, name, cluster) for pool, spec in pools.items() if spec.cluster == name}
        if not self.pools:
            raise ValueError(f"cluster {name} has no NodePool")
        self.idc = IdcSide(idc, node_selector(name), watch, request_timeout)
        self.cloud = CloudSide(cloud, claim_selector(name), watch, request_timeout)
        self.lease, self.heartbeat_seconds, self.node_class = lease, heartbeat_seconds, node_class
        self._lock = threading.RLock()
        #: Whether the last sync read the cloud's API server, and if not, why.
        self.reachable = False
        self.link_error = NOT_READ
        #: Whether the last sync acted (it holds the lease, or has none).
        self.leading = lease is None
        self.syncs = 0
        #: Writes refused by an API server (each logged); a refused write is tried again at the next sync.
        self.failed_writes = 0
        self._instances: dict[str, Instance] = {}
        self._gone: dict[str, tuple[Instance, float]] = {}
        #: Instances asked for and not yet listed: their pool, whether their claim was created, why not.
        self._wanted: dict[str, tuple[str, bool, str]] = {}
        self._releasing: set[str] = set()
        self._noticed: dict[str, float] = {}
        self._pods_by_node: dict[str, list[str]] = {}
        self._namespaces: set[str] = set()
        self._now = 0.0

    # -- observations -------------------------------------------------------------------------------
    def instances(self) -> dict[str, Instance]:
        """Every instance: those asked for, provisioning and ready, and those gone in the last GONE_SECONDS.
        While the cloud cannot be reached, as last seen."""
        with self._lock:
            gone = {name: instance for name, (instance, at) in self._gone.items() if self._now - at <= GONE_SECONDS}
            return {**gone, **self._instances}

    def notices(self) -> dict[str, float]:
        """Virtual nodes whose instance has an interruption notice, and when the member first saw it."""
        with self._lock:
            return {
                name: instance.noticed_at
                for name, instance in self._instances.items()
                if instance.noticed_at is not None and instance.state is InstanceState.READY
            }

    def pods_by_node(self) -> dict[str, list[str]]:
        """Each virtual node's pods (namespace/name) not finished, as the last sync read them."""
        with self._lock:
            return {node: list(pods) for node, pods in self._pods_by_node.items()}

    # -- operations ---------------------------------------------------------------------------------
    def provision(self, pool: str) -> str:
        """Ask for one instance of the pool: a NodeClaim, created now or, while the cloud cannot be reached,
        at the first sync that reaches it. Returns the instance's name (its virtual node's, once ready)."""
        with self._lock:
            self._check_leading()
            if pool not in self.pools:
                raise KeyError(f"cluster {self.name} has no NodePool {pool}")
            name = f"{pool}-{secrets.token_hex(3)}"
            self._wanted[name] = (pool, False, "")
            self._instances[name] = Instance(name, pool, InstanceState.PROVISIONING)
            if self.reachable:
                try:
                    self._create_claim(name)
                except _LinkDown as exc:
                    self._lost_link(str(exc))
            return name

    def release(self, instance: str) -> None:
        """Give the instance up: its virtual node is cordoned and marked (so a restarted member carries on),
        and its NodeClaim deleted now or once the cloud answers; the provisioner then removes its Node, and
        the member its virtual node (what still runs there is marked Failed). Releasing twice is harmless."""
        with self._lock:
            self._check_leading()
            self._releasing.add(instance)
            wanted = self._wanted.get(instance)
            if wanted is not None and not wanted[1]:  # never created: nothing to delete
                self._wanted.pop(instance)
                self._releasing.discard(instance)
                self._went(instance)
                return
            patch = {"metadata": {"annotations": {RELEASING_ANNOTATION: "true"}}, "spec": {"unschedulable": True}}
            self.idc.patch_node(instance, patch)
            if instance in self._instances:
                self._instances[instance] = replace(self._instances[instance], releasing=True, cordoned=True)
            if self.reachable:
                try:
                    with self._write(f"deleting NodeClaim {instance}", cloud=True):
                        self.cloud.delete_claim(instance)
                except _LinkDown as exc:
                    self._lost_link(str(exc))

    def cordon(self, node: str, cordoned: bool = True) -> None:
        """Mark the virtual node unschedulable (or schedulable again): the IDC's scheduler places nothing new
        there; what runs there keeps running."""
        with self._lock:
            self._check_leading()
            self.idc.patch_node(node, {"spec": {"unschedulable": cordoned}})
            if node in self._instances:
                self._instances[node] = replace(self._instances[node], cordoned=cordoned)

    def drain(self, node: str, grace_seconds: int) -> list[str]:
        """Cordon the virtual node and delete its pods in the IDC with that grace period (their controllers
        recreate them elsewhere); each cloud pod is then deleted with the same grace period, which its
        containers' preStop hooks (a checkpoint) get. Works while the cloud cannot be reached: the cloud
        pods are deleted once it answers. Returns the pods (namespace/name) deleted."""
        with self._lock:
            self._check_leading()
            self.cordon(node, True)
            deleted = []
            for pod in self.idc.pods_on(node):
                if deleting(pod) or phase(pod) in FINISHED:
                    continue
                namespace, _, name = key(pod).partition("/")
                if self.idc.delete_pod(namespace, name, uid(pod), grace_seconds):
                    deleted.append(key(pod))
            return deleted

    def close(self) -> None:
        """Stop following both API servers (the watches' threads end)."""
        self.idc.close()
        self.cloud.close()

    def _check_leading(self) -> None:
        if self.lease is not None and not self.lease.holding:
            raise NotLeading(f"cloud member {self.name}: another replica holds the lease")

    # -- the sync -----------------------------------------------------------------------------------
    def sync(self, now: float) -> None:
        """Read both sides and make them agree (see the module). Raises when the IDC's API server cannot be
        read; a cloud that cannot be reached is not an error (`reachable`)."""
        with self._lock:
            self._now = now
            if self.lease is not None and not self.lease.hold():
                self.leading = False
                return
            self.leading = True
            self.syncs += 1
            vnodes = {_name(doc): doc for doc in self.idc.nodes.read()}
            bound: dict[str, list[dict[str, Any]]] = {name: [] for name in vnodes}
            for pod in self.idc.pods.read():
                node = str((pod.get("spec") or {}).get("nodeName") or "")
                if node in bound:
                    bound[node].append(pod)
            self._pods_by_node = {
                node: [key(pod) for pod in pods if phase(pod) not in FINISHED] for node, pods in bound.items()
            }
            for name, doc in vnodes.items():
                if (_meta(doc).get("annotations") or {}).get(RELEASING_ANNOTATION):
                    self._releasing.add(name)  # a release asked of an earlier process
            try:
                claims = {_name(doc): doc for doc in self.cloud.claims.read()}
                cloud_nodes = {_name(doc): doc for doc in self.cloud.nodes.read()}
                cloud_pods = self.cloud.pods.read()
            except Exception as exc:
                if not expected(exc):
                    raise
                self._lost_link(describe(exc))
                self._heartbeat_unreachable(vnodes, now)
                self._known_from(vnodes)
                return
            if not self.reachable and self.link_error != NOT_READ:
                _log.warning("cloud %s: its API server answers again: reconciling", self.name)
            self.reachable, self.link_error = True, ""
            try:
                self._reconcile(vnodes, bound, claims, cloud_nodes, cloud_pods, now)
            except _LinkDown as exc:
                self._lost_link(str(exc))
                self._heartbeat_unreachable(vnodes, now)

    def _reconcile(
        self,
        vnodes: dict[str, dict[str, Any]],
        bound: dict[str, list[dict[str, Any]]],
        claims: dict[str, dict[str, Any]],
        cloud_nodes: dict[str, dict[str, Any]],
        cloud_pods: list[dict[str, Any]],
        now: float,
    ) -> None:
        self._provision_wanted(claims)
        self._release_asked(claims)
        instances = self._read_instances(vnodes, claims, cloud_nodes, now)
        by_uid: dict[str, dict[str, Any]] = {}
        for pod in cloud_pods:
            by_uid.setdefault(_labels(pod).get(IDC_UID_LABEL, ""), pod)
        # claims of pools the member does not serve (one removed from the folder): their nodes and pods are left alone
        foreign = {name for name, claim in claims.items() if _labels(claim).get(POOL_LABEL) not in self.pools}
        foreign_nodes = {claimed_node(claims[name]) for name in foreign}
        ready = sorted(name for name, instance in instances.items() if instance.state is InstanceState.READY)
        for name in vnodes.keys() - set(ready) - foreign:
            self._unregister(name, bound[name], by_uid, cloud_nodes)
        for name in ready:
            instance = instances[name]
            self._register(instance, vnodes.get(name), cloud_nodes[instance.cloud_node], now)
            for pod in bound.get(name, ()):
                self._pod(pod, by_uid.pop(uid(pod), None), instance)
        for pod in by_uid.values():
            if str((pod.get("spec") or {}).get("nodeName") or "") not in foreign_nodes:
                self._orphan(pod, cloud_nodes)
        for name in self._instances.keys() - instances.keys():
            self._went(name)
        self._instances = instances

    # -- instances ----------------------------------------------------------------------------------
    def _create_claim(self, name: str) -> None:
        """Create a wanted instance's NodeClaim; a refusal is kept as its message and tried again next sync."""
        pool = self._wanted[name][0]
        with self._write(f"creating NodeClaim {name}", cloud=True, quiet=True) as outcome:
            self.cloud.create_claim(nodeclaim(self.pools[pool], name, self.name, self.node_class))
        if outcome.succeeded:
            self._wanted[name] = (pool, True, "")
            _log.info("cloud %s: asked for instance %s of pool %s", self.name, name, pool)
        else:
            if self._wanted[name][2] != outcome.error:
                _log.warning("cloud %s: creating NodeClaim %s failed: %s", self.name, name, outcome.error)
            self._wanted[name] = (pool, False, outcome.error)

    def _provision_wanted(self, claims: dict[str, dict[str, Any]]) -> None:
        for name, (_, created, _) in list(self._wanted.items()):
            if name in claims:
                del self._wanted[name]  # listed: an instance like any other from now on
            elif not created:
                self._create_claim(name)
            elif self.cloud.get_claim(name) is None:  # created, and gone before it was ever listed
                del self._wanted[name]

    def _release_asked(self, claims: dict[str, dict[str, Any]]) -> None:
        for name in sorted(self._releasing):
            claim = claims.get(name)
            if claim is None:
                if name not in self._wanted:
                    self._releasing.discard(name)  # done (its virtual node goes with the instance)
                continue
            if not deleting(claim):
                with self._write(f"deleting NodeClaim {name}", cloud=True):
                    self.cloud.delete_claim(name)

    def _read_instances(
        self,
        vnodes: dict[str, dict[str, Any]],
        claims: dict[str, dict[str, Any]],
        cloud_nodes: dict[str, dict[str, Any]],
        now: float,
    ) -> dict[str, Instance]:
        """The instances the claims listed make (and those asked for and not listed yet). A claim whose Node
        went is gone, though the claim stays until released; a Node that is not Ready yet is provisioning,
        and one that stops being Ready once registered stays ready (its virtual node says NotReady)."""
        instances: dict[str, Instance] = {}
        for name, claim in claims.items():
            pool = _labels(claim).get(POOL_LABEL, "")
            if pool not in self.pools:
                continue
            linked = claimed_node(claim)
            node = cloud_nodes.get(linked) if linked else None
            if linked and node is None:
                node = self.cloud.get_node(linked)  # the watches of claims and nodes may not agree yet
                if node is not None:
                    cloud_nodes[linked] = node
            vnode = vnodes.get(name)
            releasing = name in self._releasing or deleting(claim)
            cordoned = bool(((vnode or {}).get("spec") or {}).get("unschedulable"))
            if node is None:
                state = InstanceState.GONE if linked else InstanceState.PROVISIONING
                message = f"its Node {linked} is gone" if linked else claim_message(claim)
                instances[name] = Instance(name, pool, state, linked, None, cordoned, releasing, message)
                continue
            status, _, why = node_ready(node)
            if status != "True" and vnode is None:
                message = claim_message(claim) or f"its Node {linked} is not Ready" + (f": {why}" if why else "")
                instances[name] = Instance(
                    name, pool, InstanceState.PROVISIONING, linked, None, False, releasing, message
                )
                continue
            noticed = self._notice(name, node, vnode, now)
            message = "" if status == "True" else why
            instances[name] = Instance(name, pool, InstanceState.READY, linked, noticed, cordoned, releasing, message)
        for name, (pool, _, why) in self._wanted.items():
            if name not in instances:
                instances[name] = Instance(name, pool, InstanceState.PROVISIONING, message=why)
        return instances

    def _notice(self, name: str, node: dict[str, Any], vnode: dict[str, Any] | None, now: float) -> float | None:
        """When the instance's interruption notice was first seen (None: it has none)."""
        if not notice_taints(node):
            self._noticed.pop(name, None)
            return None
        if name not in self._noticed:
            written = seconds(str((_meta(vnode or {}).get("annotations") or {}).get(NOTICED_ANNOTATION, "")))
            self._noticed[name] = written if written is not None else now
            _log.warning("cloud %s: instance %s has an interruption notice", self.name, name)
        return self._noticed[name]

    def _went(self, name: str) -> None:
        instance = self._instances.pop(name, None)
        pool = instance.pool if instance is not None else ""
        self._gone[name] = (Instance(name, pool, InstanceState.GONE), self._now)
        self._noticed.pop(name, None)
        self._gone = {n: (i, at) for n, (i, at) in self._gone.items() if self._now - at <= GONE_SECONDS}
        _log.info("cloud %s: instance %s is gone", self.name, name)

    # -- virtual nodes ------------------------------------------------------------------------------
    def _register(self, instance: Instance, vnode: dict[str, Any] | None, node: dict[str, Any], now: float) -> None:
        """Create or update the instance's virtual node, and heartbeat its Ready condition."""
        pool = self.pools[instance.pool]
        want = virtual_node(pool, instance.name, node, instance.noticed_at, VERSION)
        ready = node_ready(node)
        if vnode is None:
            doc = {
                **want,
                "spec": {**want["spec"], "unschedulable": instance.releasing},
                "status": {**want["status"], "conditions": [ready_condition(*ready, now, stamp(now))]},
            }
            with self._write(f"registering virtual node {instance.name}", cloud=False):
                self.idc.create_node(doc)
                # the API server taints a new node not-ready; a node lifecycle controller lifts that once the node
                # is Ready, which the member's nodes are from the start
                self.idc.patch_node(instance.name, {"spec": {"taints": want["spec"]["taints"]}})
                _log.info("cloud %s: instance %s registered as a virtual node", self.name, instance.name)
            return
        meta, taints = _meta(vnode), list((vnode.get("spec") or {}).get("taints") or ())
        patch: dict[str, Any] = {}
        have_labels, have_annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        labels = {k: v for k, v in want["metadata"]["labels"].items() if have_labels.get(k) != v}
        annotations: dict[str, Any] = {
            k: v for k, v in want["metadata"]["annotations"].items() if have_annotations.get(k) != v
        }
        if instance.noticed_at is None and NOTICED_ANNOTATION in have_annotations:
            annotations[NOTICED_ANNOTATION] = None  # the notice was withdrawn
        if labels or annotations:
            patch["metadata"] = {"labels": labels, "annotations": annotations}
        wanted_taints = merged_taints(taints, want["spec"]["taints"], ready[0] == "True")
        if not same_taints(taints, wanted_taints):
            # replaced whole, at the version read: a rival's change in between makes it fail (409), and the next
            # sync merges again
            patch.setdefault("metadata", {})["resourceVersion"] = meta.get("resourceVersion")
            patch["spec"] = {"taints": wanted_taints}
        if patch:
            with self._write(f"updating virtual node {instance.name}", cloud=False):
                self.idc.patch_node(instance.name, patch)
        self._write_status(instance.name, vnode, want["status"], ready, now)

    def _write_status(
        self,
        name: str,
        vnode: dict[str, Any],
        resources: dict[str, Any] | None,
        ready: tuple[str, str, str],
        now: float,
    ) -> None:
        """The virtual node's resources (when they changed) and Ready condition (when it changed, or a
        heartbeat is due)."""
        current = vnode.get("status") or {}
        patch: dict[str, Any] = {
            field: value for field, value in (resources or {}).items() if current.get(field) != value
        }
        condition = _ready_of(vnode)
        said = (str(condition.get("status", "")), str(condition.get("reason", "")), str(condition.get("message", "")))
        beat = seconds(str(condition.get("lastHeartbeatTime", "")))
        if said != ready or beat is None or now - beat >= self.heartbeat_seconds or patch:
            since = str(condition.get("lastTransitionTime") or "") if said[0] == ready[0] else ""
            patch["conditions"] = [ready_condition(*ready, now, since or stamp(now))]
        if patch:
            with self._write(f"heartbeat of virtual node {name}", cloud=False):
                self.idc.patch_node_status(name, {"status": patch})

    def _known_from(self, vnodes: dict[str, dict[str, Any]]) -> None:
        """While the cloud cannot be reached, instances it has not told of yet (a member started during an
        outage) are known by their virtual nodes: ready, as they were when last registered."""
        for name, vnode in vnodes.items():
            pool = _labels(vnode).get(POOL_LABEL, "")
            if name in self._instances or pool not in self.pools:
                continue
            annotations = _meta(vnode).get("annotations") or {}
            noticed = seconds(str(annotations.get(NOTICED_ANNOTATION, "")))
            cordoned = bool((vnode.get("spec") or {}).get("unschedulable"))
            releasing = name in self._releasing
            self._instances[name] = Instance(name, pool, InstanceState.READY, "", noticed, cordoned, releasing)
            if noticed is not None:
                self._noticed.setdefault(name, noticed)

    def _heartbeat_unreachable(self, vnodes: dict[str, dict[str, Any]], now: float) -> None:
        """The cloud cannot be reached: every virtual node Ready Unknown, saying why."""
        message = f"the API server of cloud {self.name} cannot be reached: {self.link_error}"
        for name, vnode in vnodes.items():
            self._write_status(name, vnode, None, ("Unknown", CLOUD_UNREACHABLE, message), now)

    def _unregister(
        self,
        name: str,
        pods: list[dict[str, Any]],
        by_uid: dict[str, dict[str, Any]],
        cloud_nodes: dict[str, dict[str, Any]],
    ) -> None:
        """The instance went: its pods fail (or, marked for deletion, are deleted), their cloud pods go, then
        the virtual node. A write that fails leaves the node for the next sync."""
        done = True
        message = f"the instance behind node {name} (cloud {self.name}) is gone"
        for pod in pods:
            namespace, _, pod_name = key(pod).partition("/")
            cloud = by_uid.pop(uid(pod), None)
            if cloud is not None:
                node = str((cloud.get("spec") or {}).get("nodeName") or "")
                with self._write(f"deleting cloud pod {key(cloud)}", cloud=True) as outcome:
                    self.cloud.delete_pod(namespace, pod_name, uid(cloud), None if node in cloud_nodes else 0)
                done = done and outcome.succeeded
            with self._write(f"failing pod {key(pod)} of lost node {name}", cloud=False) as outcome:
                if deleting(pod):
                    self.idc.delete_pod(namespace, pod_name, uid(pod), 0)
                elif phase(pod) not in FINISHED:
                    status = lost_status(NODE_LOST, message, pod.get("status") or {})
                    self.idc.patch_pod_status(namespace, pod_name, {"status": status})
            done = done and outcome.succeeded
        if done:
            with self._write(f"removing virtual node {name}", cloud=False):
                self.idc.delete_node(name)
                _log.info("cloud %s: virtual node %s removed", self.name, name)

    # -- pods ---------------------------------------------------------------------------------------
    def _pod(self, pod: dict[str, Any], cloud: dict[str, Any] | None, instance: Instance) -> None:
        namespace, _, name = key(pod).partition("/")
        if deleting(pod):
            if cloud is not None:
                if not deleting(cloud):
                    with self._write(f"deleting cloud pod {key(pod)}", cloud=True):
                        self.cloud.delete_pod(namespace, name, uid(cloud), grace_seconds(pod))
                self._mirror(pod, cloud)
            elif self._cloud_pod_gone(pod):  # its containers stopped: the deletion completes, as a kubelet's
                with self._write(f"deleting pod {key(pod)}", cloud=False):
                    self.idc.delete_pod(namespace, name, uid(pod), 0)
            return
        if phase(pod) in FINISHED:
            if cloud is not None and not deleting(cloud) and phase(cloud) not in FINISHED:
                with self._write(f"deleting cloud pod {key(pod)} of a finished pod", cloud=True):
                    self.cloud.delete_pod(namespace, name, uid(cloud), None)
            return
        if cloud is None:
            if annotation(pod, CLOUD_POD_ANNOTATION):
                if self._cloud_pod_gone(pod):
                    message = f"its pod in cloud {self.name} was deleted while it ran"
                    with self._write(f"failing pod {key(pod)}", cloud=False):
                        status = lost_status(CLOUD_POD_LOST, message, pod.get("status") or {})
                        self.idc.patch_pod_status(namespace, name, {"status": status})
                return
            self._create(pod, instance)
            return
        if annotation(pod, CLOUD_POD_ANNOTATION) != uid(cloud):
            with self._write(f"annotating pod {key(pod)}", cloud=False):
                self.idc.patch_pod(namespace, name, {"metadata": {"annotations": {CLOUD_POD_ANNOTATION: uid(cloud)}}})
        self._mirror(pod, cloud)

    def _mirror(self, pod: dict[str, Any], cloud: dict[str, Any]) -> None:
        if phase(pod) in FINISHED:
            return  # a finished pod stays finished
        patch = status_patch(pod.get("status") or {}, cloud.get("status") or {})
        if patch is not None:
            namespace, _, name = key(pod).partition("/")
            with self._write(f"writing the status of pod {key(pod)}", cloud=False):
                self.idc.patch_pod_status(namespace, name, {"status": patch})

    def _create(self, pod: dict[str, Any], instance: Instance) -> None:
        namespace, _, name = key(pod).partition("/")
        made: dict[str, Any] | None = None
        with self._write(f"creating cloud pod {key(pod)}", cloud=True):
            if namespace not in self._namespaces:
                self.cloud.ensure_namespace(namespace)
                self._namespaces.add(namespace)
            made = self.cloud.create_pod(cloud_pod(pod, instance.cloud_node))
            if made is None:  # its name is taken: by this pod's (made by an earlier attempt), or an older one's
                made = self.cloud.get_pod(namespace, name)
                if made is None or _labels(made).get(IDC_UID_LABEL) != uid(pod):
                    if made is not None and IDC_UID_LABEL in _labels(made) and not deleting(made):
                        self.cloud.delete_pod(namespace, name, uid(made), None)  # an older pod's, gone in the IDC
                    return  # tried again once the name is free
            _log.info("cloud %s: pod %s runs on instance %s", self.name, key(pod), instance.name)
        if made is not None:
            with self._write(f"annotating pod {key(pod)}", cloud=False):
                self.idc.patch_pod(namespace, name, {"metadata": {"annotations": {CLOUD_POD_ANNOTATION: uid(made)}}})

    def _cloud_pod_gone(self, pod: dict[str, Any]) -> bool:
        """Whether the IDC pod's cloud pod does not exist (a fresh read: the watch may lag)."""
        namespace, _, name = key(pod).partition("/")
        try:
            found = self.cloud.get_pod(namespace, name)
        except ApiException:
            return False
        except Exception as exc:
            if expected(exc):
                raise _LinkDown(describe(exc)) from exc
            raise
        return found is None or _labels(found).get(IDC_UID_LABEL) != uid(pod)

    def _orphan(self, cloud: dict[str, Any], cloud_nodes: dict[str, dict[str, Any]]) -> None:
        """A cloud pod no IDC pod on a ready virtual node claims: deleted once a fresh read says its IDC pod is
        gone (or is another pod of that name)."""
        namespace, _, name = key(cloud).partition("/")
        idc_pod = self.idc.get_pod(namespace, name)
        if idc_pod is not None and uid(idc_pod) == _labels(cloud).get(IDC_UID_LABEL):
            return  # it exists: the watch lags, or its node is being removed
        node = str((cloud.get("spec") or {}).get("nodeName") or "")
        if deleting(cloud) and node in cloud_nodes:
            return  # going already
        grace = None if node in cloud_nodes else 0  # no kubelet left to finish a graceful deletion
        with self._write(f"deleting orphaned cloud pod {key(cloud)}", cloud=True):
            if self.cloud.delete_pod(namespace, name, uid(cloud), grace):
                _log.info("cloud %s: deleted cloud pod %s, whose IDC pod is gone", self.name, key(cloud))

    # -- failures -----------------------------------------------------------------------------------
    def _lost_link(self, why: str) -> None:
        if self.reachable or self.link_error != why:
            _log.warning("cloud %s: its API server cannot be reached: %s", self.name, why)
        self.reachable, self.link_error = False, why

    @contextmanager
    def _write(self, what: str, cloud: bool, quiet: bool = False) -> Iterator[_Outcome]:
        """A write (or several): one the API server refuses is logged and counted, and the sync goes on; on the
        cloud's side, one that cannot reach it ends the sync's cloud work (`_LinkDown`)."""
        outcome = _Outcome()
        try:
            yield outcome
        except ApiException as exc:
            self.failed_writes += 1
            outcome.succeeded, outcome.error = False, describe(exc)
            if not quiet:
                _log.warning("cloud %s: %s failed: %s", self.name, what, outcome.error)
        except _LinkDown:
            raise
        except Exception as exc:
            if cloud and expected(exc):
                raise _LinkDown(describe(exc)) from exc
            raise


class _Outcome:
    """Whether the writes of a `_write` block all went through, and if not, why."""

    def __init__(self) -> None:
        self.succeeded = True
        self.error = ""
