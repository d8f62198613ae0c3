"""`tidegate get|describe|apply|delete|patch` against a real `tidegate serve`, in kubectl's habits: tables with
NAME first and AGE, -o json|yaml|name|wide, namespaces, lists read page by page, Status errors printed as
kubectl prints them, exit codes, and the kubeconfig-like config file with contexts."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from test_live import vcjob
from typer.testing import CliRunner

from tidegate.cli.client import ClientError, connection, status_text
from tidegate.cli.kubectl import human_duration, table
from tidegate.cli.main import app

SEED = Path(__file__).resolve().parents[1] / "examples" / "seed"
TOKENS = 'admin-token,ops,1,"tidegate:admin"\nview-token,grafana,2,"tidegate:view"\n'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_until_up(base: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=5) as answer:
                if json.loads(answer.read())["ok"]:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        assert server.poll() is None, log.read_text()
        assert time.monotonic() < deadline, "tidegate serve did not answer in 60 s"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`tidegate serve` on the seed behind tokens, and a config file with an admin's and a viewer's context."""
    tmp = tmp_path_factory.mktemp("serve")
    (tmp / "tokens").write_text(TOKENS)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = tmp / "serve.log"
    command = [sys.executable, "-m", "tidegate.cli.main", "serve", str(SEED), "--port", str(port)]
    command += ["--store", "memory", "--period", "0.1", "--token-file", str(tmp / "tokens"), "--audit-log", "-"]
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, cwd=tmp)
    try:
        wait_until_up(base, process, log)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "admin",
            "clusters": [{"name": "seed", "cluster": {"server": base}}],
            "users": [
                {"name": "ops", "user": {"token": "admin-token"}},
                {"name": "viewer", "user": {"tokenFile": "v"}},
            ],
            "contexts": [
                {"name": "admin", "context": {"cluster": "seed", "user": "ops"}},
                {"name": "view", "context": {"cluster": "seed", "user": "viewer", "namespace": "team-a"}},
            ],
        }
        (tmp / "v").write_text("view-token\n")  # tokenFile, relative to the config's folder
        (tmp / "config").write_text(yaml.safe_dump(config))
        yield base, tmp / "config"
    finally:
        process.terminate()
        process.wait(timeout=10)


def run(config: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), input=stdin, env={"TIDEGATE_CONFIG": str(config)})
    return result.exit_code, result.stdout, result.stderr


def wait_for_phase(config: Path, key: str, phase: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        code, out, _ = run(config, "get", "jobs", key, "-o", "json")
        if code == 0 and json.loads(out)["phase"] == phase:
            return
        assert time.monotonic() < deadline, out
        time.sleep(0.1)


def test_apply_get_describe_delete_a_job_as_kubectl_would(server: tuple[str, Path], tmp_path: Path) -> None:
    _, config = server
    (tmp_path / "a.yaml").write_text(vcjob("cli-one", "dev") + "---\n" + vcjob("cli-two", "dev"))
    code, out, err = run(config, "apply", "-f", str(tmp_path))
    assert (code, err) == (0, "") and out.splitlines() == [
        "job.batch.volcano.sh/cli-one created",
        "job.batch.volcano.sh/cli-two created",
    ]
    wait_for_phase(config, "default/cli-one", "Running")
    code, out, _ = run(config, "get", "jobs")
    header, *rows = out.splitlines()
    assert re.split(r"\s{3,}", header) == ["NAME", "QUEUE", "STATUS", "PODS", "RETRIES", "WAITED", "AGE"]
    assert [re.split(r"\s{3,}", row)[:4] for row in rows if "cli-one" in row] == [["cli-one", "dev", "Running", "1/1"]]
    assert re.fullmatch(r"\d+s", re.split(r"\s{3,}", rows[0])[-1])  # AGE as kubectl writes it
    code, out, _ = run(config, "get", "vcjob", "-A", "-o", "wide")
    assert out.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"] and "NODES" in out and "REASON" in out
    code, out, _ = run(config, "get", "jobs", "-o", "yaml")
    listed = yaml.safe_load(out)
    assert listed["kind"] == "List" and {"default/cli-one", "default/cli-two"} <= {j["key"] for j in listed["items"]}
    assert run(config, "get", "jobs", "-o", "name")[1].splitlines()[:1] == ["job.batch.volcano.sh/cli-one"]
    code, out, _ = run(config, "describe", "job", "default/cli-one")
    assert code == 0 and "Name:" in out and "Status:    Running" in out and "Events:" in out
    assert "submitted by ops" in out and "started on" in out
    code, out, _ = run(config, "delete", "job", "cli-one")
    assert (code, out.strip()) == (0, 'job.batch.volcano.sh "cli-one" deleted from default namespace')
    code, out, err = run(config, "delete", "job", "default/cli-one")
    assert (code, out, err.strip()) == (1, "", "Error from server (NotFound): job default/cli-one does not exist")
    code, _, err = run(config, "get", "job", "cli-one")
    assert code == 1 and err.startswith('Error from server (NotFound): job.batch.volcano.sh "cli-one" not found')


def test_apply_is_all_or_nothing_and_prints_every_problem(server: tuple[str, Path]) -> None:
    _, config = server
    bad = vcjob("cli-bad", "nope") + "---\n" + vcjob("cli-bad-two", "nope")
    code, out, err = run(config, "apply", "-f", "-", stdin=bad)
    assert code == 1 and out == ""
    assert (
        err.startswith("Error from server (Invalid): 2 problems:") and err.count("queue 'nope' does not exist") == 4
    )  # in the line, then a cause a line
    assert run(config, "get", "jobs", "cli-bad")[0] == 1  # nothing of it was accepted
    code, _, err = run(config, "apply", "-f", "-", stdin="apiVersion: v1\nkind: Node\nmetadata: {name: x}\n")
    assert code == 1 and "kind Node: tidegate apply takes Jobs, PodGroups, Pods and Queues" in err


def test_patch_a_queue_as_admin_and_be_refused_as_viewer(server: tuple[str, Path]) -> None:
    _, config = server
    code, out, _ = run(config, "patch", "queue", "dev", "--weight", "7")
    assert (code, out.strip()) == (0, "queue.scheduling.volcano.sh/dev patched")
    code, out, _ = run(config, "patch", "queue", "dev", "--type", "merge", "-p", '{"spec":{"weight":9}}')
    assert code == 0
    code, out, _ = run(config, "get", "queue", "dev")
    assert re.split(r"\s{3,}", out.splitlines()[1])[:2] == ["dev", "9"]
    code, out, err = run(config, "patch", "queue", "dev", "--weight", "3", "--context", "view")
    assert code == 1 and out == ""
    assert err.strip() == (
        "Error from server (Forbidden): user grafana may not edit queues (needs group tidegate:admin) "
        "(its token's groups do not allow it)"
    )
    code, _, err = run(config, "patch", "queue", "dev", "--weight", "0")
    assert code == 1 and "Error from server (Invalid)" in err and "spec.weight" in err
    assert run(config, "patch", "queue", "dev", "--type", "json", "-p", "[]")[0] == 1


def test_lists_are_read_page_by_page(server: tuple[str, Path]) -> None:
    base, config = server
    jobs = "---\n".join(vcjob(f"paged-{i}", "prod") for i in range(5))
    assert run(config, "apply", "-f", "-", stdin=jobs)[0] == 0

    def list_calls() -> float:
        request = urllib.request.Request(f"{base}/metrics")
        with urllib.request.urlopen(request, timeout=5) as answer:
            text = answer.read().decode()
        found = re.findall(r'^tidegate_http_requests_total\{code="200",method="GET",route="/jobs"\} (\S+)$', text, re.M)
        return float(found[0]) if found else 0.0

    before = list_calls()
    code, out, _ = run(config, "get", "jobs", "--chunk-size", "2", "-o", "name")
    names = [line for line in out.splitlines() if "paged-" in line]
    assert code == 0 and names == [f"job.batch.volcano.sh/paged-{i}" for i in range(5)]
    total = len(out.splitlines())
    assert list_calls() - before == -(-total // 2)  # one call a page of two


def test_the_viewer_context_reads_with_its_namespace_and_token_file(server: tuple[str, Path]) -> None:
    _, config = server
    code, out, err = run(config, "get", "jobs", "--context", "view")
    assert (code, out, err.strip()) == (0, "", "No resources found in team-a namespace.")
    code, out, _ = run(config, "get", "nodes", "--context", "view", "-l", "volcano.sh/node-type=idc")
    assert code == 0 and out.splitlines()[0].split()[:3] == ["NAME", "STATUS", "TYPE"]
    assert all(" idc " in f" {line} " for line in out.splitlines()[1:])
    code, out, _ = run(config, "describe", "queue", "dev", "--context", "view")
    assert code == 0 and "Parent:" in out and "Waiting for:" in out


def test_connection_errors_and_config_errors_read_as_kubectl_s(server: tuple[str, Path], tmp_path: Path) -> None:
    _, config = server
    port = free_port()
    code, _, err = run(config, "get", "queues", "-s", f"http://127.0.0.1:{port}")
    assert code == 1
    assert (
        err.strip()
        == f"The connection to the server 127.0.0.1:{port} was refused - did you specify the right host or port?"
    )
    code, _, err = run(config, "get", "queues", "--context", "nope")
    assert code == 1 and err.strip() == f'error: {config}: context "nope" does not exist'
    code, _, err = run(config, "get", "queues", "--token", "wrong")
    assert code == 1 and err.startswith("Error from server (Unauthorized): a valid bearer token is required")
    code, _, err = run(config, "get", "widgets")
    assert code == 1 and 'the server doesn\'t have a resource type "widgets"' in err
    (tmp_path / "broken").write_text("contexts: 3\ncurrent-context: x\n")
    with pytest.raises(ClientError, match="contexts is a list"):
        connection(None, None, None, str(tmp_path / "broken"))
    assert connection("http://h:1/", "t", None, str(config)).server == "http://h:1"  # flags win over the file


def test_status_text_is_kubectl_s_line() -> None:
    body = {"kind": "Status", "reason": "Conflict", "message": "pod x is Pending", "details": {"causes": []}}
    assert status_text(409, body) == "Error from server (Conflict): pod x is Pending"
    assert status_text(502, "bad gateway") == "Error from server (502): bad gateway"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(-5, "<invalid>"), (0, "0s"), (119, "119s"), (120, "2m"), (125, "2m5s"), (600, "10m"), (3 * 3600, "3h"),
     (3 * 3600 + 60, "3h1m"), (9 * 3600, "9h"), (50 * 3600, "2d2h"), (48 * 3600, "2d"), (10 * 86400, "10d"),
     (800 * 86400, "2y70d")],
)  # fmt: skip
def test_ages_are_written_as_kubectl_writes_them(seconds: float, shown: str) -> None:
    assert human_duration(seconds) == shown


def test_tables_put_three_spaces_between_columns() -> None:
    assert table([["a", 1], ["bbbb", 22]], ["NAME", "N"]).splitlines() == ["NAME   N", "a      1", "bbbb   22"]
