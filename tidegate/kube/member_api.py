"""The two API servers a cloud member talks to, each as the few reads and writes the member makes of it.

Reads are of the member's own objects only, as plain JSON documents: in the IDC cluster its virtual nodes
(by label) and the pods bound to some node (a field selector; the member keeps those on its nodes); in the
cloud cluster its NodeClaims (by label), the Nodes, and the pods it made (by label). By default each is
listed once and then followed by a watch (`tidegate.kube.informer.Informer`), so a sync costs no list; a
read while the last list or watch failed tries again at once and raises `Unreachable` if that fails too.
Every request times out (`tidegate.kube.api.timed`), so an API server that stopped answering fails a
sync instead of hanging it. Writes that find their object gone (404), or changed under a precondition
(409), say so by returning False: the next sync reads how things are.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tidegate.kube.api import REQUEST_TIMEOUT_SECONDS, SYNC_SECONDS, timed
from tidegate.kube.informer import Informer, documents
from tidegate.kube.kubeconfig import api_client
from tidegate.kube.nodeclaims import NODECLAIM_GROUP, NODECLAIM_PLURAL, NODECLAIM_VERSION
from tidegate.kube.pod_mirror import IDC_UID_LABEL

NOT_FOUND, CONFLICT = 404, 409


class Listing:
    """One kind's objects of a selection: followed by a watch, or listed at every read."""

    def __init__(
        self, call: Callable[..., Any], api_version: str, kind: str, watch: bool, request_timeout: float
    ) -> None:
        self.call, self.api_version, self.kind = call, api_version, kind
        self.watch, self.request_timeout = watch, request_timeout
        self.informer: Informer | None = None

    def read(self) -> list[dict[str, Any]]:
        """The objects now (the watch's, or a fresh list); raises when they cannot be read."""
        if not self.watch:
            return documents(json.loads(self.call(_preload_content=False).data), self.api_version, self.kind)
        if self.informer is None:
            self.informer = Informer(self.call, self.api_version, self.kind, self.request_timeout)
            self.informer.start()
        self.informer.ready(SYNC_SECONDS)
        return self.informer.items()

    def stop(self) -> None:
        if self.informer is not None:
            self.informer.stop()

    def join(self, seconds: float) -> None:
        if self.informer is not None:
            self.informer.join(seconds)


def _finish(response: Any) -> None:
    """Read a write's answer, so its connection goes back to the pool."""
    _ = response.data


def _json(response: Any) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(response.data)
    return data


def _read(call: Callable[[], Any], *absent: int) -> dict[str, Any] | None:
    """The object a read or a create answers with; None when the API server answers one of the `absent` codes
    (404: no such object; 409: one of that name exists already)."""
    try:
        return _json(call())
    except ApiException as exc:
        if exc.status in absent:
            return None
        raise


def _written(call: Callable[[], Any], *absent: int) -> bool:
    """Whether a write was done; False when the API server answers one of the `absent` codes (the object gone,
    one of that name there already, or changed under a precondition)."""
    try:
        _finish(call())
    except ApiException as exc:
        if exc.status in absent:
            return False
        raise
    return True


class Side:
    """One API server: its client, and the writes both sides make (pods)."""

    def __init__(self, api: client.ApiClient, watch: bool = True, request_timeout: float = REQUEST_TIMEOUT_SECONDS):
        """`api` should time its requests out (`timed`); `from_kubeconfig` makes one that does."""
        self.client = api
        self.host = str(api.configuration.host)
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.watch, self.request_timeout = watch, request_timeout
        self.listings: list[Listing] = []

    def _listing(self, call: Callable[..., Any], api_version: str, kind: str) -> Listing:
        listing = Listing(call, api_version, kind, self.watch, self.request_timeout)
        self.listings.append(listing)
        return listing

    def close(self, seconds: float = 5.0) -> None:
        """Stop the watches and wait for their threads."""
        for listing in self.listings:
            listing.stop()
        for listing in self.listings:
            listing.join(seconds)

    def get_pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return _read(partial(self.core.read_namespaced_pod, name, namespace, _preload_content=False), NOT_FOUND)

    def delete_pod(self, namespace: str, name: str, uid: str, grace_seconds: int | None) -> bool:
        """Delete the pod if it is still the one of that uid (None: its own grace period). Whether it was."""
        options = client.V1DeleteOptions(
            grace_period_seconds=grace_seconds, preconditions=client.V1Preconditions(uid=uid)
        )
        call = partial(self.core.delete_namespaced_pod, name, namespace, body=options, _preload_content=False)
        return _written(call, NOT_FOUND, CONFLICT)


class IdcSide(Side):
    """The IDC cluster: the member's virtual nodes, and the pods bound to nodes."""

    def __init__(
        self,
        api: client.ApiClient,
        node_selector: str,
        watch: bool = True,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        super().__init__(api, watch, request_timeout)
        self.nodes = self._listing(partial(self.core.list_node, label_selector=node_selector), "v1", "Node")
        bound = partial(self.core.list_pod_for_all_namespaces, field_selector="spec.nodeName!=")
        self.pods = self._listing(bound, "v1", "Pod")

    def create_node(self, doc: Any) -> bool:
        """Create the node; False when one of that name exists already."""
        return _written(partial(self.core.create_node, doc, _preload_content=False), CONFLICT)

    def patch_node(self, name: str, patch: dict[str, Any]) -> bool:
        return _written(partial(self.core.patch_node, name, patch, _preload_content=False), NOT_FOUND, CONFLICT)

    def patch_node_status(self, name: str, patch: dict[str, Any]) -> bool:
        call = partial(self.core.patch_node_status, name, patch, _preload_content=False)
        return _written(call, NOT_FOUND, CONFLICT)

    def delete_node(self, name: str) -> bool:
        return _written(partial(self.core.delete_node, name, _preload_content=False), NOT_FOUND, CONFLICT)

    def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        call = partial(self.core.patch_namespaced_pod, name, namespace, patch, _preload_content=False)
        return _written(call, NOT_FOUND, CONFLICT)

    def patch_pod_status(self, namespace: str, name: str, patch: dict[str, Any]) -> bool:
        call = partial(self.core.patch_namespaced_pod_status, name, namespace, patch, _preload_content=False)
        return _written(call, NOT_FOUND, CONFLICT)

    def pods_on(self, node: str) -> list[dict[str, Any]]:
        """The pods bound to the node now (a fresh list)."""
        listing = self.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}", _preload_content=False)
        return documents(_json(listing), "v1", "Pod")


class CloudSide(Side):
    """The cloud cluster: the member's NodeClaims, the Nodes, and the pods the member made."""

    def __init__(
        self,
        api: client.ApiClient,
        claim_selector: str,
        watch: bool = True,
        request_timeout: float = REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        super().__init__(api, watch, request_timeout)
        claims = partial(
            self.custom.list_cluster_custom_object,
            NODECLAIM_GROUP,
            NODECLAIM_VERSION,
            NODECLAIM_PLURAL,
            label_selector=claim_selector,
        )
        self.claims = self._listing(claims, f"{NODECLAIM_GROUP}/{NODECLAIM_VERSION}", "NodeClaim")
        self.nodes = self._listing(self.core.list_node, "v1", "Node")
        made = partial(self.core.list_pod_for_all_namespaces, label_selector=IDC_UID_LABEL)
        self.pods = self._listing(made, "v1", "Pod")

    def get_claim(self, name: str) -> dict[str, Any] | None:
        call = partial(
            self.custom.get_cluster_custom_object,
            NODECLAIM_GROUP,
            NODECLAIM_VERSION,
            NODECLAIM_PLURAL,
            name,
            _preload_content=False,
        )
        return _read(call, NOT_FOUND)

    def create_claim(self, doc: dict[str, Any]) -> bool:
        """Create the NodeClaim; False when one of that name exists already (made by an earlier attempt)."""
        call = partial(
            self.custom.create_cluster_custom_object,
            NODECLAIM_GROUP,
            NODECLAIM_VERSION,
            NODECLAIM_PLURAL,
            doc,
            _preload_content=False,
        )
        return _written(call, CONFLICT)

    def delete_claim(self, name: str) -> bool:
        call = partial(
            self.custom.delete_cluster_custom_object,
            NODECLAIM_GROUP,
            NODECLAIM_VERSION,
            NODECLAIM_PLURAL,
            name,
            _preload_content=False,
        )
        return _written(call, NOT_FOUND)

    def get_node(self, name: str) -> dict[str, Any] | None:
        return _read(partial(self.core.read_node, name, _preload_content=False), NOT_FOUND)

    def ensure_namespace(self, name: str) -> None:
        body: Any = {"metadata": {"name": name}}  # a plain document: the client sends it as it is
        _written(partial(self.core.create_namespace, body, _preload_content=False), CONFLICT)  # or it exists

    def create_pod(self, doc: Any) -> dict[str, Any] | None:
        """Create the pod; None when a pod of that name exists already."""
        namespace = doc["metadata"]["namespace"]
        return _read(partial(self.core.create_namespaced_pod, namespace, doc, _preload_content=False), CONFLICT)


def side_client(kubeconfig: str | None, context: str | None, request_timeout: float) -> client.ApiClient:
    """An API client for a kubeconfig's cluster whose requests time out (raises KubeconfigError)."""
    return timed(api_client(kubeconfig, context), request_timeout)
