"""How `tidegate kube` finds its cluster (kubectl's rules: --kubeconfig, $KUBECONFIG merged, ~/.kube/config,
the pod's service account), what it says when it cannot, and an API server that does not answer: one line an
attempt, a backoff that doubles, and `--cycles` still ending. No API server is needed here (see
test_kube_apiserver.py for the real one)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from tidegate.cli.kube import request_timeout_seconds
from tidegate.cli.main import app
from tidegate.kube.failures import backoff
from tidegate.kube.kubeconfig import KubeconfigError, api_client, merge, read_kubeconfig

runner = CliRunner()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kubeconfig(server: str, context: str = "t", **more: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "x"}}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
        "current-context": context,
        **more,
    }


def _write(path: Path, document: Any) -> Path:
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return path


def _kube(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, ["kube", *args], env=env)
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "--kubeconfig {path}: no such file"),
        ("clusters: [\n  {name: a\n", "kubeconfig {path}: not YAML at line 3, column 1: expected ',' or '}}'"),
        ("just words\n", "kubeconfig {path}: not a kubeconfig (a mapping of clusters, users and contexts)"),
        ("clusters: 5\n", "kubeconfig {path}: clusters is not a list"),
        ("users: [{user: {token: x}}]\n", "kubeconfig {path}: users[0] has no name"),
        (
            "contexts: [{name: a, context: {cluster: c}}]\n",
            "no current-context; choose one with --context (contexts: a)",
        ),
    ],
)
def test_a_kubeconfig_that_cannot_be_used_is_one_line_and_exit_1(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    code, output = _kube("--kubeconfig", str(path), "--cycles", "1")
    assert code == 1 and output.count("\n") == 1, output
    assert output.startswith("error: ") and message.format(path=path) in output and "Traceback" not in output


def test_an_unknown_context_or_a_context_naming_nothing_is_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "kubeconfig", _kubeconfig("https://127.0.0.1:1", context="t"))
    code, output = _kube("--kubeconfig", str(path), "--context", "ghost", "--cycles", "1")
    assert code == 1 and output == f"error: --kubeconfig {path}: --context ghost: no such context (contexts: t)\n"
    broken = _kubeconfig("https://127.0.0.1:1")
    broken["contexts"][0]["context"]["cluster"] = "gone"
    _write(path, broken)
    code, output = _kube("--kubeconfig", str(path), "--cycles", "1")
    assert code == 1 and f"context t ({path}): cluster gone is not defined" in output and output.count("\n") == 1


def test_kubeconfig_comes_from_the_environment_then_home_then_the_pod(tmp_path: Path) -> None:
    port = _free_port()
    first = _write(tmp_path / "first", _kubeconfig(f"https://127.0.0.1:{port}"))
    env = {"KUBECONFIG": f"{tmp_path / 'missing'}:{first}", "HOME": str(tmp_path)}
    assert api_client(environ=env).configuration.host == f"https://127.0.0.1:{port}"
    with pytest.raises(KubeconfigError, match=r"^\$KUBECONFIG .*missing: none of its files exists$"):
        api_client(environ={"KUBECONFIG": str(tmp_path / "missing"), "HOME": str(tmp_path)})
    (tmp_path / ".kube").mkdir()
    _write(tmp_path / ".kube" / "config", _kubeconfig("https://127.0.0.1:2"))
    assert api_client(environ={"HOME": str(tmp_path)}).configuration.host == "https://127.0.0.1:2"
    nowhere = {"HOME": str(tmp_path / "nobody")}
    with pytest.raises(KubeconfigError, match=r"no cluster to schedule: give --kubeconfig, set \$KUBECONFIG"):
        api_client(environ=nowhere)
    with pytest.raises(KubeconfigError, match=r"inside a pod without a kubeconfig, there are no contexts"):
        api_client(context="t", environ={**nowhere, "KUBERNETES_SERVICE_HOST": "10.0.0.1"})
    with pytest.raises(KubeconfigError, match=r"^the pod's service account: "):  # no token file outside a pod
        api_client(environ={**nowhere, "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"})


def test_kubeconfig_files_are_merged_as_kubectl_merges_them(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "ca.crt").write_text("not read here")
    a = {"contexts": [{"name": "t", "context": {"cluster": "c", "user": "u"}}], "current-context": "t"}
    b = {
        "clusters": [{"name": "c", "cluster": {"server": "https://b:6443", "certificate-authority": "ca.crt"}}],
        "users": [{"name": "u", "user": {"token": "b"}}],
        "contexts": [
            {"name": "t", "context": {"cluster": "elsewhere"}},
            {"name": "other", "context": {"cluster": "c"}},
        ],
        "current-context": "other",
    }
    c = {"clusters": [{"name": "c", "cluster": {"server": "https://c:6443"}}], "users": [{"name": "u2", "user": {}}]}
    files = [
        (tmp_path / name, read_kubeconfig(_write(tmp_path / name, doc)))
        for name, doc in (("a", a), ("b/config", b), ("c", c))
    ]
    merged = merge(files)
    assert merged["current-context"] == "t"  # the first file to set it
    assert [e["context"] for e in merged["contexts"]] == [{"cluster": "c", "user": "u"}, {"cluster": "c"}]  # first wins
    (cluster,) = merged["clusters"]
    assert cluster["cluster"] == {"server": "https://b:6443", "certificate-authority": str(tmp_path / "b" / "ca.crt")}
    assert [u["name"] for u in merged["users"]] == ["u", "u2"]


def test_an_api_server_that_never_answers_is_one_line_an_attempt_and_cycles_still_end(tmp_path: Path) -> None:
    port = _free_port()  # nothing listens there
    path = _write(tmp_path / "kubeconfig", _kubeconfig(f"https://127.0.0.1:{port}"))
    for mode in ("--watch", "--list"):
        started = time.monotonic()
        code, output = _kube("--kubeconfig", str(path), "--cycles", "3", mode)
        lines = [line for line in output.splitlines() if line.startswith("cycle failed")]
        assert code == 1 and len(lines) == 3 and "Traceback" not in output, output
        assert [line.split(" (")[1].split(")")[0] for line in lines] == ["1 in a row", "2 in a row", "3 in a row"]
        assert lines[0].endswith("trying again in 1 s") and lines[1].endswith("trying again in 2 s")
        assert f"API server https://127.0.0.1:{port} unreachable: " in lines[2] and "Connection refused" in lines[2]
        assert "no answer" not in output, output  # refused is not timed out (urllib3's refusal is a timeout class)
        assert time.monotonic() - started >= backoff(1) + backoff(2)  # it waited between attempts
    assert [backoff(n) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]


@contextmanager
def _silent_server() -> Iterator[tuple[int, list[socket.socket]]]:
    """A loopback socket that accepts connections and never answers (a hung API server): its port, and the
    connections it accepted."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # closed at the end
            while True:
                accepted.append(listener.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1]), accepted
    finally:
        listener.close()
        for connection in accepted:
            connection.close()


def test_an_api_server_that_accepts_and_never_answers_times_out_one_line_an_attempt(tmp_path: Path) -> None:
    """Without a request timeout a server that accepts connections but never answers blocked a cycle for
    good (a list) or a minute (the first watch): every request now times out (--request-timeout), is not
    retried behind the loop's back, and the loop's backoff says so once an attempt."""
    with _silent_server() as (port, accepted):
        path = _write(tmp_path / "kubeconfig", _kubeconfig(f"https://127.0.0.1:{port}"))
        for mode in ("--list", "--watch"):
            before = len(accepted)
            code, output = _kube("--kubeconfig", str(path), "--cycles", "2", "--request-timeout", "1s", mode)
            lines = [line for line in output.splitlines() if line.startswith("cycle failed")]
            assert code == 1 and len(lines) == 2 and "Traceback" not in output, output
            said = f"API server https://127.0.0.1:{port} unreachable: no answer within 1 s"
            assert all(said in line for line in lines), lines
            if mode == "--list":  # one request an attempt (urllib3 retried a timed-out read three more times)
                assert len(accepted) - before == 2
        code, output = _kube("--kubeconfig", str(path), "--cycles", "1", "--request-timeout", "1", "--leader-elect")
        assert code == 1 and "leader election: API server https://127.0.0.1:" in output and "within 1 s" in output


@pytest.mark.parametrize(
    ("given", "seconds"), [("30s", 30.0), ("1m", 60.0), ("500ms", 0.5), ("1m30s", 90.0), ("45", 45.0), ("0", 0.0)]
)
def test_request_timeout_is_read_as_kubectl_reads_it(given: str, seconds: float) -> None:
    assert request_timeout_seconds(given) == seconds


@pytest.mark.parametrize("given", ["5x", "-1s", "", "1.5"])
def test_a_request_timeout_kubectl_refuses_is_refused(given: str) -> None:
    code, output = _kube("--request-timeout", given)
    assert code == 2 and "Invalid value for '--request-timeout'" in output, output


def test_leader_election_against_an_api_server_that_never_answers_says_so(tmp_path: Path) -> None:
    path = _write(tmp_path / "kubeconfig", _kubeconfig(f"https://127.0.0.1:{_free_port()}"))
    code, output = _kube("--kubeconfig", str(path), "--cycles", "2", "--leader-elect")
    lines = [line for line in output.splitlines() if line.startswith("cycle failed")]
    assert code == 1 and len(lines) == 2 and "Traceback" not in output, output
    assert "leader election: API server https://127.0.0.1:" in lines[0]


FLEET = """apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: idc}
spec: {type: idc}
---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: aws}
spec: {type: cloud, provider: aws}
---
apiVersion: tidegate.io/v1alpha1
kind: Cluster
metadata: {name: gcp}
spec: {type: cloud, provider: gcp}
---
apiVersion: tidegate.io/v1alpha1
kind: NodePool
metadata: {name: p4d}
spec: {cluster: aws, gpu: {product: A100, count: 8}}
"""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cloud", "aws={cloud}"], "--cloud: give the folder declaring its Cluster and NodePools with --fleet"),
        (["--scenario", "burst"], "--scenario needs --fleet FOLDER"),
        (["--fleet", "{fleet}", "--scenario", "ghost"], "no Scenario 'ghost'; the folder has none"),
        (["--fleet", "{fleet}", "--cloud", "aws"], "--cloud 'aws': NAME=KUBECONFIG or NAME=KUBECONFIG,context=CONTEXT"),
        (
            ["--fleet", "{fleet}", "--cloud", "azure={cloud}"],
            "--cloud azure: no Cluster azure in {fleet} (its clouds: aws, gcp)",
        ),
        (["--fleet", "{fleet}", "--cloud", "idc={cloud}"], "--cloud idc: Cluster idc is of type idc, not cloud"),
        (["--fleet", "{fleet}", "--cloud", "gcp={cloud}"], "--cloud gcp: no NodePool of cluster gcp in {fleet}"),
        (["--fleet", "{fleet}", "--cloud", "aws={cloud}", "--cloud", "aws={cloud}"], "--cloud aws: given twice"),
        (
            ["--fleet", "{fleet}", "--cloud", "aws={cloud},context=nope"],
            "--cloud aws: kubeconfig {cloud}: context nope: no such context (contexts: t)",
        ),
        (["--fleet", "{fleet}", "--cloud", "aws={fleet}/none"], "--cloud aws: kubeconfig {fleet}/none: no such file"),
    ],
)
def test_the_clouds_of_tidegate_kube_are_checked_before_anything_runs(
    tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "fleet").mkdir()
    _write(tmp_path / "fleet" / "fleet.yaml", FLEET)
    idc = _write(tmp_path / "idc", _kubeconfig(f"https://127.0.0.1:{_free_port()}"))
    cloud = _write(tmp_path / "cloud", _kubeconfig(f"https://127.0.0.1:{_free_port()}"))
    names = {"fleet": str(tmp_path / "fleet"), "cloud": str(cloud)}
    code, output = _kube("--kubeconfig", str(idc), "--cycles", "1", *(arg.format(**names) for arg in args))
    assert code == 1 and message.format(**names) in " ".join(output.split()), output
    assert "cycle" not in output  # refused before a cycle ran
