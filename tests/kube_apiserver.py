"""A real kube-apiserver and etcd on loopback for tests (built by tools/build-kube-apiserver), with Volcano's
Queue and PodGroup CRDs installed. No kubelet, controller-manager or kube-scheduler: pods stay Pending
until bound, and the test plays the kubelet."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kubernetes import client, config

HOME = Path(os.environ.get("KAS_HOME", Path.home() / ".cache" / "kube-apiserver-1.20.2"))
BIN = HOME / "bin"
TOKEN = "test-token"
#: Under `rbac`, the token of the service account tidegate's deploy/kube/rbac.yaml grants its rules to.
SCHEDULER_TOKEN = "scheduler-token"
SCHEDULER_ACCOUNT = "system:serviceaccount:kube-system:tidegate-scheduler"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def binaries_or_skip() -> None:
    """Skip when the binaries are missing, unless TIDEGATE_REQUIRE_KUBE is set (`make test` sets it after
    building them): there a missing binary is a failure."""
    missing = [name for name in ("kube-apiserver", "etcd") if not (BIN / name).is_file()]
    if missing:
        message = f"{', '.join(missing)} not in {BIN}: run tools/build-kube-apiserver (or make kube-apiserver)"
        if os.environ.get("TIDEGATE_REQUIRE_KUBE"):
            pytest.fail(message)
        pytest.skip(message)


@contextmanager
def kube_apiserver(tmp: Path, rbac: bool = False) -> Iterator[Path]:
    """Start etcd and kube-apiserver under `tmp`; yield an administrator's kubeconfig's path; stop both.

    With `rbac` the API server authorizes by RBAC (else it allows everything), and `SCHEDULER_TOKEN`
    authenticates as the service account `SCHEDULER_ACCOUNT` (see `user_kubeconfig`)."""
    with restartable_kube_apiserver(tmp, rbac) as (kubeconfig, _):
        yield kubeconfig


class ApiServer:
    """The kube-apiserver process of `restartable_kube_apiserver`: `stop` it (etcd keeps the cluster) and
    `start` it again on the same address, certificates and tokens."""

    def __init__(self, command: list[str], tmp: Path) -> None:
        self.command, self.tmp = command, tmp
        self.log = (tmp / "apiserver.log").open("a")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self) -> None:
        if self.process is not None:
            _end(self.process)
            self.process = None

    def wait_ready(self, kubeconfig: Path) -> None:
        """Until it answers (its certificate, written at its first start, is reused)."""
        assert self.process is not None
        api = config.new_client_from_config(config_file=str(kubeconfig))
        _wait_ready(client.CoreV1Api(api), self.process, self.tmp)


@contextmanager
def restartable_kube_apiserver(tmp: Path, rbac: bool = False) -> Iterator[tuple[Path, ApiServer]]:
    """`kube_apiserver`, also yielding its API server's process to stop and start again."""
    binaries_or_skip()
    etcd_client, etcd_peer, api_port = _free_port(), _free_port(), _free_port()
    accounts = f'{SCHEDULER_TOKEN},{SCHEDULER_ACCOUNT},scheduler,"system:serviceaccounts,system:authenticated"\n'
    (tmp / "tokens.csv").write_text(f"{TOKEN},admin,admin,system:masters\n" + (accounts if rbac else ""))
    subprocess.run(["openssl", "genrsa", "-out", str(tmp / "sa.key"), "2048"], check=True, capture_output=True)
    etcd_url, peer_url = f"http://127.0.0.1:{etcd_client}", f"http://127.0.0.1:{etcd_peer}"
    etcd_log = (tmp / "etcd.log").open("w")
    etcd = subprocess.Popen(
        [
            str(BIN / "etcd"),
            *("--name", "t", "--data-dir", str(tmp / "etcd")),
            *("--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url),
            *("--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url),
            *("--initial-cluster", f"t={peer_url}"),
        ],
        stdout=etcd_log,
        stderr=subprocess.STDOUT,
    )
    apiserver = ApiServer(
        [
            str(BIN / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--cert-dir={tmp / 'certs'}",
            f"--token-auth-file={tmp / 'tokens.csv'}",
            f"--authorization-mode={'RBAC' if rbac else 'AlwaysAllow'}",
            "--disable-admission-plugins=ServiceAccount",
            "--service-cluster-ip-range=10.96.0.0/24",
            f"--service-account-key-file={tmp / 'sa.key'}",
            f"--service-account-signing-key-file={tmp / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc",
        ],
        tmp,
    )
    apiserver.start()
    kubeconfig = tmp / "kubeconfig"
    try:
        assert apiserver.process is not None
        # the server's own self-signed certificate (and its CA), written at start: TLS is verified
        ca = _wait_for(tmp / "certs" / "apiserver.crt", apiserver.process, tmp)
        kubeconfig.write_text(
            f"""apiVersion: v1
kind: Config
clusters: [{{name: t, cluster: {{server: "https://127.0.0.1:{api_port}", certificate-authority: "{ca}"}}}}]
users: [{{name: t, user: {{token: {TOKEN}}}}}]
contexts: [{{name: t, context: {{cluster: t, user: t}}}}]
current-context: t
"""
        )
        apiserver.wait_ready(kubeconfig)
        api = config.new_client_from_config(config_file=str(kubeconfig))
        _install_volcano_crds(client.ApiextensionsV1Api(api))
        yield kubeconfig, apiserver
    finally:
        apiserver.stop()
        _end(etcd)
        apiserver.log.close()
        etcd_log.close()


def _end(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def eventually(check: Callable[[], bool], seconds: float = 20.0) -> bool:
    """Whether `check` comes true within `seconds` (the API server's watches and writes take a moment)."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def user_kubeconfig(kubeconfig: Path, token: str, path: Path) -> Path:
    """A copy of the kubeconfig that authenticates with `token` instead."""
    path.write_text(kubeconfig.read_text().replace(f"token: {TOKEN}", f"token: {token}"))
    return path


def _wait_for(path: Path, apiserver: subprocess.Popen[bytes], tmp: Path) -> Path:
    deadline = time.monotonic() + 60
    while not path.is_file():
        if apiserver.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"kube-apiserver wrote no {path.name}: {(tmp / 'apiserver.log').read_text()[-2000:]}")
        time.sleep(0.2)
    return path


def _wait_ready(core: client.CoreV1Api, apiserver: subprocess.Popen[bytes], tmp: Path) -> None:
    deadline = time.monotonic() + 60
    last: Exception | None = None
    while time.monotonic() < deadline:
        if apiserver.poll() is not None:
            raise RuntimeError(f"kube-apiserver exited: {(tmp / 'apiserver.log').read_text()[-2000:]}")
        try:
            core.read_namespace("default")
            return
        except Exception as exc:  # not serving yet, or the default namespace not made yet
            last = exc
            time.sleep(0.5)
    raise RuntimeError(f"kube-apiserver was not ready within 60 s: {last!r}")


def _crd(
    plural: str, kind: str, scope: str, group: str = "scheduling.volcano.sh", version: str = "v1beta1"
) -> dict[str, object]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


def _install_crds(ext: client.ApiextensionsV1Api, crds: list[dict[str, object]]) -> None:
    """Create the CRDs and wait until each is established."""
    for crd in crds:
        ext.create_custom_resource_definition(crd)
    deadline = time.monotonic() + 30
    for crd in crds:
        name = crd["metadata"]["name"]  # type: ignore[index]
        while True:
            read = ext.read_custom_resource_definition(name)
            conditions = read.status.conditions or []
            if any(c.type == "Established" and c.status == "True" for c in conditions):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"CRD {name} not established")
            time.sleep(0.2)


def _install_volcano_crds(ext: client.ApiextensionsV1Api) -> None:
    _install_crds(ext, [_crd("queues", "Queue", "Cluster"), _crd("podgroups", "PodGroup", "Namespaced")])


def install_nodeclaim_crd(kubeconfig: Path) -> None:
    """Karpenter's NodeClaim (karpenter.sh/v1, cluster-scoped; a minimal schema keeping every field), as a cloud
    cluster provisioning by NodeClaims has it."""
    api = config.new_client_from_config(config_file=str(kubeconfig))
    _install_crds(client.ApiextensionsV1Api(api), [_crd("nodeclaims", "NodeClaim", "Cluster", "karpenter.sh", "v1")])
