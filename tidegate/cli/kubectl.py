"""`tidegate get|describe|apply|delete|patch`: a client of `tidegate serve` in kubectl's and vcctl's habits.

    tidegate get queues                       # NAME first, then the figures; -o wide adds more
    tidegate get jobs -A -o wide              # every namespace; -n NS one (the context's, else default)
    tidegate get nodes -l volcano.sh/node-type=idc
    tidegate get pools -o yaml
    tidegate describe job team-a/llm-pretrain # or: describe job llm-pretrain -n team-a; queue NAME; node NAME
    tidegate apply -f jobs.yaml               # files, folders, - for standard input
    tidegate delete job team-a/llm-pretrain
    tidegate patch queue dev --weight 10      # or --type merge -p '{"spec":{"weight":10}}'

Lists are read page by page (`--chunk-size`, kubectl's 500). Errors are printed as kubectl prints a Status
(`Error from server (NotFound): ...`) and the command exits 1. Which server and token: `tidegate.cli.client`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.markup import escape

from tidegate.cli.client import CHUNK, Client, ClientError, connection
from tidegate.model.manifests import MANIFEST_SUFFIXES

ServerOption = Annotated[
    str | None,
    typer.Option("--server", "-s", help="The server's address (default: the config's, else 127.0.0.1:8080)."),
]
TokenOption = Annotated[str | None, typer.Option("--token", help="Bearer token (default: the config's user's).")]
ContextOption = Annotated[str | None, typer.Option("--context", help="The context of the config file to use.")]
ConfigOption = Annotated[
    str | None,
    typer.Option(
        "--tidegateconfig",
        help="A kubeconfig-like file of servers, users and contexts (default: $TIDEGATE_CONFIG, ~/.tidegate/config).",
    ),
]
CaOption = Annotated[
    str | None, typer.Option("--certificate-authority", help="A CA bundle to verify the server's certificate with.")
]
InsecureOption = Annotated[
    bool, typer.Option("--insecure-skip-tls-verify", help="Do not verify the server's certificate (insecure).")
]
NamespaceOption = Annotated[
    str | None, typer.Option("--namespace", "-n", help="The namespace (default: the context's, else default).")
]


class Output(StrEnum):
    wide = "wide"
    json = "json"
    yaml = "yaml"
    name = "name"


#: What each resource is called on the command line (kubectl's plural, singular and short names).
RESOURCES = {
    "queues": ("queue", "queues", "q", "queue.scheduling.volcano.sh"),
    "jobs": ("job", "jobs", "vcjob", "vcjobs", "vj", "job.batch.volcano.sh"),
    "nodes": ("node", "nodes", "no"),
    "pools": ("pool", "pools", "nodepool", "nodepools", "np"),
}
#: How a resource names its objects in messages (kubectl's `kind.group/name`).
QUALIFIED = {
    "queues": "queue.scheduling.volcano.sh",
    "jobs": "job.batch.volcano.sh",
    "nodes": "node",
    "pools": "nodepool.tidegate.io",
}


def _resource(word: str, allowed: Sequence[str] = tuple(RESOURCES)) -> str:
    for name, words in RESOURCES.items():
        if word.lower() in words and name in allowed:
            return name
    raise ClientError(f'error: the server doesn\'t have a resource type "{word}" (here: {", ".join(allowed)})')


class Session:
    """One command's console, error console and client."""

    def __init__(
        self,
        server: str | None,
        token: str | None,
        context: str | None,
        config: str | None,
        ca: str | None,
        insecure: bool,
    ) -> None:
        self.out = Console(soft_wrap=True, highlight=False)
        self.err = Console(stderr=True, soft_wrap=True, highlight=False)
        self.conn = connection(server, token, context, config, ca, insecure)
        self.client = Client(self.conn)

    def now(self) -> float:
        return self.client.server_time if self.client.server_time is not None else time.time()


def _run(make: Callable[[], Session], body: Callable[[Session], None]) -> None:
    """Run a command's body; a ClientError is printed (kubectl's words) and exits 1."""
    err = Console(stderr=True, soft_wrap=True, highlight=False)
    try:
        session = make()
    except ClientError as exc:
        err.print(escape(str(exc)))
        raise typer.Exit(1) from exc
    try:
        body(session)
    except ClientError as exc:
        session.err.print(escape(str(exc)))
        raise typer.Exit(1) from exc
    finally:
        session.client.close()


# -- formatting --------------------------------------------------------------------------------------------
def human_duration(seconds: float) -> str:
    """kubectl's AGE (k8s.io/apimachinery's duration.HumanDuration)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def table(rows: Iterable[Sequence[object]], headers: Sequence[str]) -> str:
    """kubectl's table: upper-case headers, columns left-aligned and three spaces apart."""
    cells = [[str(h) for h in headers], *([str(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells)


def _print(session: Session, text: str) -> None:
    session.out.out(text, highlight=False)


def _gpus(resources: dict[str, str] | None) -> str:
    if resources is None:
        return "<none>"
    return resources.get("nvidia.com/gpu", "0")


def _resources(resources: dict[str, str] | None) -> str:
    if resources is None:
        return "<none>"
    shown = {k: v for k, v in resources.items() if k != "pods"}
    return ",".join(f"{k}={v}" for k, v in shown.items()) or "<none>"


# -- get -----------------------------------------------------------------------------------------------------
def _queue_rows(items: list[dict[str, Any]], wide: bool, now: float) -> tuple[list[list[object]], list[str]]:
    headers = ["NAME", "WEIGHT", "STATE", "PARENT", "INQUEUE", "PENDING", "RUNNING", "COMPLETED", "FAILED"]
    if wide:
        headers += ["ALLOCATED", "DESERVED", "CAPABILITY", "SHARE", "WAITING FOR"]
    rows = []
    for q in items:
        spec, jobs = q["spec"], q["jobs"]
        row: list[object] = [q["name"], spec.get("weight", 1), spec.get("state", "Open"), spec.get("parent", "<none>")]
        row += [jobs["Inqueue"], jobs["Pending"], jobs["Running"], jobs["Completed"], jobs["Failed"]]
        if wide:
            why = next(iter(q.get("waiting") or {}), "<none>")
            capability = spec.get("capability")
            row += [_resources(q.get("allocated_with_children", q["allocated"])), _resources(q.get("deserved"))]
            row += [_resources(capability) if capability else "<unlimited>", f"{q.get('share', 0):.2f}", why]
        rows.append(row)
    return rows, headers


def _job_rows(
    items: list[dict[str, Any]], wide: bool, now: float, all_ns: bool
) -> tuple[list[list[object]], list[str]]:
    headers = (["NAMESPACE"] if all_ns else []) + ["NAME", "QUEUE", "STATUS", "PODS", "RETRIES", "WAITED", "AGE"]
    if wide:
        headers += ["NODES", "REASON"]
    rows = []
    for job in items:
        running = sum(1 for pod in job["pods"] if pod["phase"] == "Running")
        row: list[object] = [job["namespace"]] if all_ns else []
        row += [job["name"], job["queue"], job["phase"], f"{running}/{len(job['pods'])}", job["retries"]]
        row += [human_duration(job.get("wait_seconds", 0)), human_duration(now - job["submitted"])]
        if wide:
            nodes = sorted({pod["node"] for pod in job["pods"] if pod["node"]})
            row += [",".join(nodes) or "<none>", job["reason"] or "<none>"]
        rows.append(row)
    return rows, headers


def _node_status(node: dict[str, Any]) -> str:
    status = "Ready" if node["schedulable"] else "Ready,SchedulingDisabled"
    return status + (",Interrupted" if node.get("interrupted_at") else "")


def _node_rows(items: list[dict[str, Any]], wide: bool, now: float) -> tuple[list[list[object]], list[str]]:
    headers = ["NAME", "STATUS", "TYPE", "POOL", "GPUS", "PODS"]
    if wide:
        headers += ["CPU", "MEMORY", "REGION", "GPU PRODUCT"]
    rows = []
    for node in items:
        cards = node.get("gpu_cards", [])
        used = sum(1 for card in cards if card["pods"])
        row: list[object] = [
            node["name"],
            _node_status(node),
            node.get("type") or "<none>",
            node.get("pool") or "<none>",
        ]
        row += [f"{used}/{len(cards)}", node["pods"]]
        if wide:
            labels, allocatable, requested = node["labels"], node["allocatable"], node["requested"]
            row += [f"{requested.get('cpu', '0')}/{allocatable.get('cpu', '0')}"]
            row += [f"{requested.get('memory', '0')}/{allocatable.get('memory', '0')}"]
            row += [
                labels.get("topology.kubernetes.io/region", "<none>"),
                labels.get("nvidia.com/gpu.product", "<none>"),
            ]
        rows.append(row)
    return rows, headers


def _pool_rows(items: list[dict[str, Any]], wide: bool, now: float) -> tuple[list[list[object]], list[str]]:
    headers = ["NAME", "TYPE", "NODES", "PROVISIONING", "DRAINING", "BILLED", "HPA", "DESIRED", "SPENT"]
    if wide:
        headers += ["CONDITIONS"]
    rows = []
    for pool in items:
        status = pool.get("hpa_status") or {}
        row: list[object] = [
            pool["name"],
            "cloud" if pool["cloud"] else "idc",
            len(pool["nodes"]),
            pool["provisioning"],
        ]
        row += [len(pool["draining"]), pool["billed_nodes"], pool.get("hpa") or "<none>"]
        row += [status.get("desiredReplicas", "<none>"), f"{pool['spent']:,.2f}"]
        if wide:
            conditions = status.get("conditions") or []
            row += [",".join(f"{c['type']}={c['status']}" for c in conditions) or "<none>"]
        rows.append(row)
    return rows, headers


def get(
    resource: Annotated[str, typer.Argument(help="queues, jobs, nodes or pools (or a singular or short name).")],
    name: Annotated[str | None, typer.Argument(help="One object's name (a job's NAME or NAMESPACE/NAME).")] = None,
    output: Annotated[Output | None, typer.Option("--output", "-o", help="wide, json, yaml or name.")] = None,
    namespace: NamespaceOption = None,
    all_namespaces: Annotated[bool, typer.Option("--all-namespaces", "-A", help="Jobs of every namespace.")] = False,
    selector: Annotated[
        str | None, typer.Option("--selector", "-l", help="A label selector (team=a,env!=dev).")
    ] = None,
    field_selector: Annotated[str | None, typer.Option("--field-selector", help="A field selector.")] = None,
    no_headers: Annotated[bool, typer.Option("--no-headers", help="Print no header line.")] = False,
    chunk_size: Annotated[int, typer.Option("--chunk-size", min=1, help="Items asked per call.")] = CHUNK,
    server: ServerOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
    config: ConfigOption = None,
    certificate_authority: CaOption = None,
    insecure: InsecureOption = False,
) -> None:
    """List queues, jobs, nodes or node pools of a `tidegate serve` (kubectl get)."""

    def body(session: Session) -> None:
        kind = _resource(resource)
        ns = namespace or session.conn.namespace
        all_ns = all_namespaces and not namespace
        params: dict[str, str] = {"labelSelector": selector or "", "fieldSelector": field_selector or ""}
        wanted = name
        if kind == "jobs":
            if name and "/" in name:
                ns, wanted = name.split("/", 1)
                all_ns = False
            if not all_ns:
                params["namespace"] = ns
        items = list(session.client.items(f"/{kind}", params, chunk_size))
        if wanted:
            items = [item for item in items if item.get("name") == wanted]
            if not items:
                where = f' in namespace "{ns}"' if kind == "jobs" else ""
                raise ClientError(f'Error from server (NotFound): {QUALIFIED[kind]} "{wanted}" not found{where}')
        _show(session, kind, items, output, wanted is not None, "" if all_ns or kind != "jobs" else ns, no_headers)

    _run(lambda: Session(server, token, context, config, certificate_authority, insecure), body)


def _show(
    session: Session, kind: str, items: list[dict[str, Any]], output: Output | None, one: bool, ns: str, bare: bool
) -> None:
    """The items as asked; `ns` is the one namespace jobs were listed in ("" for every one)."""
    if output in (Output.json, Output.yaml):
        document: Any = items[0] if one else {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}
        text = json.dumps(document, indent=4) if output is Output.json else yaml.safe_dump(document, sort_keys=False)
        _print(session, text.rstrip("\n"))
        return
    if output is Output.name:
        for item in items:
            _print(session, f"{QUALIFIED[kind]}/{item.get('name', item.get('key'))}")
        return
    if not items:
        where = f" in {ns} namespace" if ns else ""
        session.err.print(escape(f"No resources found{where}."))
        return
    wide, now = output is Output.wide, session.now()
    if kind == "queues":
        rows, headers = _queue_rows(items, wide, now)
    elif kind == "jobs":
        rows, headers = _job_rows(items, wide, now, not ns)
    elif kind == "nodes":
        rows, headers = _node_rows(items, wide, now)
    else:
        rows, headers = _pool_rows(items, wide, now)
    text = table(rows, headers)
    _print(session, "\n".join(text.splitlines()[1:]) if bare else text)


# -- describe -----------------------------------------------------------------------------------------------
def describe(
    resource: Annotated[str, typer.Argument(help="job, queue or node.")],
    name: Annotated[str, typer.Argument(help="Its name (a job's NAME or NAMESPACE/NAME).")],
    namespace: NamespaceOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
    config: ConfigOption = None,
    certificate_authority: CaOption = None,
    insecure: InsecureOption = False,
) -> None:
    """Show one job, queue or node in detail, with its events (kubectl describe)."""

    def body(session: Session) -> None:
        kind = _resource(resource, ("jobs", "queues", "nodes"))
        now = session.now()
        if kind == "jobs":
            ns, job_name = name.split("/", 1) if "/" in name else (namespace or session.conn.namespace, name)
            job = session.client.call("GET", f"/jobs/{ns}/{job_name}")
            _print(session, describe_job(job, session.now()))
        elif kind == "queues":
            queue = session.client.call("GET", f"/queues/{name}")
            _print(session, describe_queue(queue))
        else:
            found = list(session.client.items("/nodes", {"fieldSelector": f"metadata.name={name}"}))
            if not found:
                raise ClientError(f'Error from server (NotFound): nodes "{name}" not found')
            pods = session.client.call("GET", f"/nodes/{name}/pods")
            _print(session, describe_node(found[0], pods, now))

    _run(lambda: Session(server, token, context, config, certificate_authority, insecure), body)


def _lines(pairs: Iterable[tuple[str, object]]) -> list[str]:
    pairs = list(pairs)
    width = max(len(key) for key, _ in pairs) + 2
    return [f"{key + ':':<{width}}{value}" for key, value in pairs]


def _when(t: float | None, now: float) -> str:
    if t is None:
        return "<none>"
    return f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(t))} ({human_duration(now - t)} ago)"


def describe_job(job: dict[str, Any], now: float) -> str:
    lines = _lines(
        [
            ("Name", job["name"]),
            ("Namespace", job["namespace"]),
            ("Labels", ",".join(f"{k}={v}" for k, v in sorted(job["labels"].items())) or "<none>"),
            ("Queue", job["queue"]),
            ("Status", job["phase"]),
            ("Reason", job["reason"] or "<none>"),
            ("Submitted", _when(job["submitted"], now)),
            ("Started", _when(job["started"], now)),
            ("Finished", _when(job["finished"], now)),
            ("Waited", human_duration(job.get("wait_seconds", 0))),
            ("Retries", job["retries"]),
        ]
    )
    pods = [
        [
            p["name"].split("/", 1)[-1],
            p["phase"],
            p["node"] or p["nominated_node"] or "<none>",
            p["gpu_index"] or "<none>",
        ]
        for p in job["pods"]
    ]
    lines += ["Pods:", _indent(table(pods, ["NAME", "PHASE", "NODE", "GPU INDEX"]))]
    lines += _events(job["events"], now)
    return "\n".join(lines)


def describe_queue(queue: dict[str, Any]) -> str:
    spec = queue["spec"]
    lines = _lines(
        [
            ("Name", queue["name"]),
            ("Labels", ",".join(f"{k}={v}" for k, v in sorted(queue.get("labels", {}).items())) or "<none>"),
            ("Parent", spec.get("parent", "<none>")),
            ("Weight", spec.get("weight", 1)),
            ("State", spec.get("state", "Open")),
            ("Reclaimable", spec.get("reclaimable", True)),
            ("Namespaces", ",".join(queue["namespaces"]) or "<all>"),
            ("Capability", _resources(spec["capability"]) if spec.get("capability") else "<unlimited>"),
            (
                "Guarantee",
                _resources((spec.get("guarantee") or {}).get("resource")) if spec.get("guarantee") else "<none>",
            ),
            ("Deserved", _resources(queue.get("deserved"))),
            ("Allocated", _resources(queue.get("allocated_with_children", queue["allocated"]))),
            ("Share", f"{queue.get('share', 0):.2f}{' (overused)' if queue.get('overused') else ''}"),
            ("Pending seconds", f"{queue['pending_jobs_duration_seconds']:.0f}"),
        ]
    )
    jobs = queue["jobs"]
    lines += ["Jobs:", _indent(table([[jobs[p] for p in jobs]], [p.upper() for p in jobs]))]
    waiting = queue.get("waiting") or {}
    lines += ["Waiting for:"] + ([f"  {n} x {why}" for why, n in waiting.items()] or ["  <none>"])
    return "\n".join(lines)


def describe_node(node: dict[str, Any], pods: list[dict[str, Any]], now: float) -> str:
    cards = node.get("gpu_cards", [])
    lines = _lines(
        [
            ("Name", node["name"]),
            ("Labels", "\n".ljust(16).join(f"{k}={v}" for k, v in sorted(node["labels"].items())) or "<none>"),
            ("Type", node.get("type") or "<none>"),
            ("Pool", node.get("pool") or "<none>"),
            ("Status", _node_status(node)),
            ("Spot notice", _when(node.get("interrupted_at"), now) if node.get("interrupted_at") else "<none>"),
            ("Allocatable", _resources(node["allocatable"])),
            ("Requested", _resources(node["requested"])),
            ("GPU cards", f"{sum(1 for c in cards if c['pods'])}/{len(cards)} in use"),
        ]
    )
    rows = [[pod["name"], pod["job"], pod["gpu_index"] or "<none>", _resources(pod["requests"])] for pod in pods]
    lines += ["Pods:", _indent(table(rows, ["NAME", "JOB", "GPU INDEX", "REQUESTS"])) if rows else "  <none>"]
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())


def _events(events: list[dict[str, Any]], now: float) -> list[str]:
    if not events:
        return ["Events:  <none>"]
    rows = [[human_duration(now - e["time"]), e["message"]] for e in events]
    return ["Events:", _indent(table(rows, ["AGE", "MESSAGE"]))]


# -- apply, delete, patch -----------------------------------------------------------------------------------
#: What `apply` sends where: workloads are submitted (POST /jobs, all or nothing), queues patched.
SUBMITTED = {"Job": "job.batch.volcano.sh", "PodGroup": "podgroup.scheduling.volcano.sh", "Pod": "pod"}


def _documents(files: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """Every document of the files (folders read for *.yaml, *.yml, *.json, in sorted order; - is stdin)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for given in files:
        paths: list[Path] = []
        if given == "-":
            texts = [("-", sys.stdin.read())]
        else:
            path = Path(given)
            if path.is_dir():
                paths = sorted(p for p in path.rglob("*") if p.suffix.lower() in MANIFEST_SUFFIXES and p.is_file())
                if not paths:
                    raise ClientError(f"error: {given}: no *.yaml, *.yml or *.json files")
            elif path.exists():
                paths = [path]
            else:
                raise ClientError(f'error: the path "{given}" does not exist')
            texts = []
            for p in paths:
                try:
                    texts.append((str(p), p.read_text(encoding="utf-8")))
                except (OSError, UnicodeDecodeError) as exc:
                    raise ClientError(f"error: {p}: cannot read: {exc}") from exc
        for where, text in texts:
            try:
                documents = list(yaml.safe_load_all(text))
            except yaml.YAMLError as exc:
                raise ClientError(f"error: {where}: not YAML: {exc}") from exc
            for index, doc in enumerate(documents, 1):
                if doc is None:
                    continue
                if not isinstance(doc, dict):
                    raise ClientError(f"error: {where}: document {index}: not an object")
                out.append((f"{where}: document {index}", doc))
    if not out:
        raise ClientError("error: no objects passed to apply")
    return out


def apply(
    filename: Annotated[list[str], typer.Option("--filename", "-f", help="Files, folders, or - for standard input.")],
    server: ServerOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
    config: ConfigOption = None,
    certificate_authority: CaOption = None,
    insecure: InsecureOption = False,
) -> None:
    """Submit Jobs, PodGroups and Pods (all or nothing), and apply Queues' specs as patches (kubectl apply)."""

    def body(session: Session) -> None:
        docs = _documents(filename)
        workloads, queues = [], []
        for where, doc in docs:
            kind = doc.get("kind")
            if kind in SUBMITTED:
                workloads.append(doc)
            elif kind == "Queue":
                queues.append(doc)
            else:
                raise ClientError(
                    f"error: {where}: kind {kind}: tidegate apply takes Jobs, PodGroups, Pods and Queues "
                    "(the rest of the cluster is the served folder's)"
                )
        if workloads:
            session.client.call("POST", "/jobs", yaml.safe_dump_all(workloads, sort_keys=False))
            for doc in workloads:
                _print(session, f"{SUBMITTED[doc['kind']]}/{(doc.get('metadata') or {}).get('name', '')} created")
        for doc in queues:
            queue = (doc.get("metadata") or {}).get("name", "")
            session.client.call("PATCH", f"/queues/{queue}", doc)
            _print(session, f"queue.scheduling.volcano.sh/{queue} configured")

    _run(lambda: Session(server, token, context, config, certificate_authority, insecure), body)


def delete(
    resource: Annotated[str, typer.Argument(help="job")],
    names: Annotated[list[str], typer.Argument(help="Jobs' NAME or NAMESPACE/NAME.")],
    namespace: NamespaceOption = None,
    server: ServerOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
    config: ConfigOption = None,
    certificate_authority: CaOption = None,
    insecure: InsecureOption = False,
) -> None:
    """Delete jobs: their pods leave their nodes at once (kubectl delete)."""

    def body(session: Session) -> None:
        _resource(resource, ("jobs",))
        for name in names:
            ns, job = name.split("/", 1) if "/" in name else (namespace or session.conn.namespace, name)
            session.client.call("DELETE", f"/jobs/{ns}/{job}")
            _print(session, f'job.batch.volcano.sh "{job}" deleted from {ns} namespace')

    _run(lambda: Session(server, token, context, config, certificate_authority, insecure), body)


class PatchType(StrEnum):
    merge = "merge"
    json = "json"
    strategic = "strategic"


def patch(
    resource: Annotated[str, typer.Argument(help="queue")],
    name: Annotated[str, typer.Argument(help="The queue's name.")],
    weight: Annotated[int | None, typer.Option("--weight", help="Set spec.weight (vcctl queue operate).")] = None,
    patch_text: Annotated[
        str | None, typer.Option("--patch", "-p", help="A JSON (or YAML) merge patch of the Queue.")
    ] = None,
    patch_type: Annotated[PatchType, typer.Option("--type", help="merge (the only one a Queue takes here).")] = (
        PatchType.merge
    ),
    server: ServerOption = None,
    token: TokenOption = None,
    context: ContextOption = None,
    config: ConfigOption = None,
    certificate_authority: CaOption = None,
    insecure: InsecureOption = False,
) -> None:
    """Change a queue live: its weight, or any field by a merge patch (kubectl patch --type merge)."""

    def body(session: Session) -> None:
        _resource(resource, ("queues",))
        if patch_type is not PatchType.merge:
            raise ClientError(f"error: --type {patch_type.value}: tidegate takes merge patches (RFC 7386) only")
        if (weight is None) == (patch_text is None):
            raise ClientError("error: give --weight N or -p PATCH (one of them)")
        if patch_text is not None:
            try:
                document = yaml.safe_load(patch_text)
            except yaml.YAMLError as exc:
                raise ClientError(f"error: unable to parse the patch: {exc}") from exc
            if not isinstance(document, dict):
                raise ClientError('error: a merge patch is an object, e.g. \'{"spec":{"weight":10}}\'')
        else:
            document = {"spec": {"weight": weight}}
        session.client.call("PATCH", f"/queues/{name}", document)
        _print(session, f"queue.scheduling.volcano.sh/{name} patched")

    _run(lambda: Session(server, token, context, config, certificate_authority, insecure), body)
