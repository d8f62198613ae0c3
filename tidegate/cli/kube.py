"""`tidegate kube`: schedule a real Kubernetes cluster's Volcano PodGroups, in the place of vc-scheduler."""

from __future__ import annotations

import logging
import signal
import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from tidegate.cli.fleet_folder import served_fleet
from tidegate.cli.output import fail, warn
from tidegate.fleet.burst import Burst
from tidegate.model.errors import FieldError, ManifestErrors
from tidegate.model.manifests import go_duration, load_manifests
from tidegate.model.objects import SchedulerConfiguration
from tidegate.scheduler.admission import admission_errors

if TYPE_CHECKING:
    from tidegate.kube.scheduler import Fleet


def request_timeout_seconds(value: str | float) -> float:
    """kubectl's `--request-timeout`: a whole number of seconds, or a Go duration (30s, 1m, 500ms); 0 for no
    limit. Raises BadParameter."""
    if isinstance(value, float):  # the default
        return value
    text = value.strip()
    if text.isdigit():
        return float(int(text))
    try:
        seconds = go_duration(text, "--request-timeout")
    except FieldError:
        seconds = -1.0
    if seconds < 0:
        raise typer.BadParameter(
            f"{value!r}: a whole number of seconds, or a number with its unit (e.g. 30s, 2m, 500ms); 0 for no limit"
        )
    return seconds


def cloud_option(value: str) -> tuple[str, str, str | None]:
    """`--cloud NAME=KUBECONFIG[,context=CONTEXT]`: the cloud cluster's name in the --fleet folder, the kubeconfig
    that reaches its API server, and the context to use (default: the kubeconfig's current-context). Raises
    BadParameter."""
    name, sep, rest = value.partition("=")
    path, _, option = rest.partition(",context=")
    if not sep or not name.strip() or not path.strip() or ("," in rest and not option):
        raise typer.BadParameter(f"{value!r}: NAME=KUBECONFIG or NAME=KUBECONFIG,context=CONTEXT")
    return name.strip(), path.strip(), option.strip() or None


def kube(
    kubeconfig: Annotated[
        str | None,
        typer.Option("--kubeconfig", help="Kubeconfig of the cluster; without it, the pod's service account."),
    ] = None,
    context: Annotated[str | None, typer.Option("--context", help="Context of the kubeconfig to use.")] = None,
    config: Annotated[
        str | None, typer.Option("--config", help="A file holding a SchedulerConfiguration (actions, tiers).")
    ] = None,
    scheduler_name: Annotated[
        str, typer.Option("--scheduler-name", help="Schedule the pods whose spec.schedulerName is this.")
    ] = "volcano",
    period: Annotated[
        float, typer.Option("--period", min=0.001, help="Seconds between cycles (Volcano's schedulePeriod).")
    ] = 1.0,
    cycles: Annotated[int, typer.Option("--cycles", min=0, help="Stop after this many cycles (0: never).")] = 0,
    watch: Annotated[
        bool, typer.Option("--watch/--list", help="Follow the cluster by watches (default), or list it every cycle.")
    ] = True,
    burst_queue: Annotated[
        str | None,
        typer.Option("--burst-queue", help="Move waiting PodGroups not pinned to the IDC to this queue (cloud burst)."),
    ] = None,
    burst_after: Annotated[
        float, typer.Option("--burst-after", min=0, help="Seconds a PodGroup waits before it bursts.")
    ] = 600.0,
    fleet_folder: Annotated[
        str | None,
        typer.Option(
            "--fleet",
            metavar="FOLDER",
            help="A simulation folder whose cloud pools, HPAs, burst and budget (of --scenario) tidegate runs: "
            "it registers the pools' virtual nodes, or asks a --cloud member for them (see docs/kube.md).",
        ),
    ] = None,
    scenario: Annotated[
        str | None, typer.Option("--scenario", help="With --fleet: the Scenario whose burst and budget apply.")
    ] = None,
    leader_elect: Annotated[
        bool, typer.Option("--leader-elect", help="Schedule only while holding a Lease (run several replicas).")
    ] = False,
    lock_namespace: Annotated[str, typer.Option("--lock-namespace", help="The Lease's namespace.")] = "kube-system",
    lock_name: Annotated[str, typer.Option("--lock-name", help="The Lease's name.")] = "tidegate-scheduler",
    request_timeout: Annotated[
        float,
        typer.Option(
            "--request-timeout",
            parser=request_timeout_seconds,
            metavar="DURATION",
            show_default="30s",
            help="How long a request to the API server may take to connect, and then for each part of its "
            "answer, as kubectl's (30s, 1m; 0: no limit). A watch waits its own 60 s longer.",
        ),
    ] = 30.0,
    clouds: Annotated[
        list[str] | None,
        typer.Option(
            "--cloud",
            metavar="NAME=KUBECONFIG[,context=CONTEXT]",
            help="Run the cloud cluster NAME (a cloud Cluster of --fleet) as a member of this one: its pools' "
            "instances as virtual nodes, their pods run there (repeatable; docs/kube.md).",
        ),
    ] = None,
    metrics_port: Annotated[
        int,
        typer.Option(
            "--metrics-port",
            min=0,
            max=65535,
            help="Serve Prometheus /metrics and the liveness probe /healthz on this port (0: off).",
        ),
    ] = 0,
) -> None:
    """Schedule a Kubernetes cluster: bind its Volcano PodGroups' pods, write their status (see docs/kube.md)."""
    console, err = Console(soft_wrap=True), Console(stderr=True, soft_wrap=True)
    try:  # the Kubernetes client is an extra, and loads only here
        from kubernetes import client

        from tidegate.kube.api import KubeApi, timed
        from tidegate.kube.cloud_member import CloudMember
        from tidegate.kube.failures import backoff, describe, expected
        from tidegate.kube.kubeconfig import KubeconfigError, api_client
        from tidegate.kube.lease import Lease
        from tidegate.kube.metrics import CycleLatency, Heartbeat, serve_metrics
        from tidegate.kube.scheduler import ClusterScheduler
        from tidegate.kube.views import ClusterViews
        from tidegate.server.dashboard import static_page
    except ImportError as exc:
        fail(err, [f"{exc}: install the Kubernetes client with pip install 'tidegate[kube]'"])
        raise typer.Exit(1) from exc
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # urllib3 warns of each retry of a refused connection: the failed cycle says it once (below)
    logging.getLogger("urllib3.connectionpool").setLevel(logging.ERROR)
    configuration = SchedulerConfiguration()
    if config is not None:
        ms = load_manifests([config])
        errors = [*ms.errors, *admission_errors(ms)]
        if errors:
            fail(err, errors)
            raise typer.Exit(1)
        warn(err, ms.warnings)
        if not ms.configurations:
            fail(err, [f"{config}: no SchedulerConfiguration in it"])
            raise typer.Exit(1)
        configuration = ms.configurations[0]
    try:
        wanted = [cloud_option(value) for value in clouds or ()]
    except typer.BadParameter as exc:
        fail(err, [f"--cloud {exc}"])
        raise typer.Exit(1) from exc
    burst = Burst(burst_queue, burst_after) if burst_queue else None
    fleet = None
    if fleet_folder is not None:
        try:
            fleet = kube_fleet(fleet_folder, scenario, burst, [name for name, _, _ in wanted])
        except (ValueError, typer.BadParameter, ManifestErrors) as exc:
            fail(err, exc.errors if isinstance(exc, ManifestErrors) else [exc])
            raise typer.Exit(1) from exc
    elif wanted:
        fail(err, ["--cloud: give the folder declaring its Cluster and NodePools with --fleet"])
        raise typer.Exit(1)
    elif scenario is not None:
        fail(err, ["--scenario needs --fleet FOLDER"])
        raise typer.Exit(1)
    try:
        api = KubeApi(kubeconfig, context, watch, request_timeout)
    except KubeconfigError as exc:
        fail(err, [exc])
        raise typer.Exit(1) from exc
    members: list[CloudMember] = []
    for name, path, cloud_context in wanted:
        assert fleet is not None
        specs = {pool.name: pool.spec for pool in fleet.pools if pool.cluster_name == name}
        try:
            cloud_api = timed(api_client(path, cloud_context), request_timeout)
            members.append(
                CloudMember(
                    name,
                    next(pool.cluster for pool in fleet.pools if pool.cluster_name == name),
                    specs,
                    timed(api_client(kubeconfig, context), request_timeout),  # its own connections
                    cloud_api,
                    watch=watch,
                    request_timeout=request_timeout,
                )
            )
        except (KubeconfigError, ValueError) as exc:
            api.close()
            for member in members:
                member.close()
            # the kubeconfig's messages name the IDC's options: here it is the cloud's file and context
            said = str(exc).replace("--kubeconfig ", "kubeconfig ", 1).replace("--context ", "context ", 1)
            fail(err, [f"--cloud {name}: {said}"])
            raise typer.Exit(1) from exc
    if fleet is not None:
        fleet = replace(fleet, members=tuple(members))
    scheduler = ClusterScheduler(api, configuration, scheduler_name, burst, fleet, start=time.time())
    lease = None
    if leader_elect:
        identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        lease = Lease(client.CoordinationV1Api(api.client), lock_namespace, lock_name, identity)
    heartbeat = Heartbeat.for_period(period)
    latency, views = CycleLatency(), ClusterViews()
    if metrics_port:
        serve_metrics(scheduler, metrics_port, heartbeat, latency=latency, views=views, pages=static_page)
        console.print(
            f"tidegate: metrics on http://0.0.0.0:{metrics_port}/metrics, liveness at /healthz, "
            "the dashboard (read-only) at /"
        )
    console.print(
        f"tidegate: scheduling pods of schedulerName {scheduler_name} on {api.host}, a cycle every {period:g} s",
        highlight=False,
    )
    for member in members:
        pools = ", ".join(sorted(member.pools))
        console.print(
            f"tidegate: cloud {member.name} (pools {pools}) on {member.cloud.host}, its instances as virtual nodes",
            highlight=False,
        )
    done, led, failures = 0, False, 0
    signal.signal(signal.SIGTERM, _stop)  # the kubelet stops a pod with SIGTERM: release the lease first
    try:
        while True:
            started = time.monotonic()
            heartbeat.beat()
            failure = ""
            if lease is not None and not lease.hold():
                if led:
                    err.print(f"lost the lease {lock_namespace}/{lock_name}: stopping", highlight=False)
                    raise typer.Exit(1)
                if not lease.error:
                    time.sleep(period)
                    continue  # another replica schedules
                failure = f"leader election: {lease.error}"
            if lease is not None and not failure and not led:
                console.print(f"tidegate: leading as {lease.identity}", highlight=False)
                led = True
            if not failure:
                try:
                    ran = scheduler.cycles
                    decisions = scheduler.step(time.time())
                    if scheduler.cycles > ran:  # a quiet period left out is no cycle
                        latency.observe(scheduler.last_step_s)
                    views.refresh(scheduler, time.time())
                    if decisions.binds or decisions.evictions:
                        console.print(
                            f"cycle {scheduler.cycles}: {len(decisions.binds)} bound, "
                            f"{len(decisions.evictions)} evicted",
                            highlight=False,
                        )
                except Exception as exc:  # the loop outlives a bad cycle (the API server away, say)
                    scheduler.failed_cycles += 1
                    failure = describe(exc)
                    if not expected(exc):  # tidegate's own failure: its traceback, once an attempt
                        logging.getLogger("tidegate.kube").exception("cycle failed")
            done += 1
            failures = failures + 1 if failure else 0
            if failure:  # one line an attempt, and a wait that doubles while they fail
                wait = backoff(failures)
                again = "" if cycles and done >= cycles else f"; trying again in {wait:g} s"
                err.print(f"cycle failed ({failures} in a row): {failure}{again}", highlight=False)
            if cycles and done >= cycles:
                if failure:
                    raise typer.Exit(1)
                return
            rest = max(period - (time.monotonic() - started), 0.0)
            time.sleep(max(backoff(failures), rest) if failure else rest)
    finally:
        if lease is not None:
            lease.release()
        for member in members:
            member.close()
        api.close()


def _stop(signum: int, frame: object) -> None:
    """SIGTERM: leave the loop (not as a failed cycle), so the lease is released and the watches stopped."""
    raise SystemExit(0)


def kube_fleet(folder: str, scenario: str | None, burst: Burst | None, clouds: Sequence[str] = ()) -> Fleet:
    """A simulation folder's cloud pools, HPAs, burst and budget as `tidegate kube` runs them (its IDC pools are
    the cluster's own nodes); the pools of the `clouds` (members) are served whether or not the Scenario
    bursts. Raises ManifestErrors, ValueError or BadParameter naming what is wrong, every --cloud problem
    at once."""
    from tidegate.kube.scheduler import Fleet

    err = Console(stderr=True, soft_wrap=True)
    ms = load_manifests([folder])
    errors = [*ms.errors, *admission_errors(ms)]
    if errors:
        raise ManifestErrors(errors)
    served = served_fleet(ms, scenario, "kube", keep_clouds=clouds)
    warn(err, [*served.warnings, *served.notes])
    problems = []
    for name in dict.fromkeys(clouds):
        cluster = served.clusters.get(name)
        if cluster is None:
            known = ", ".join(n for n, c in sorted(served.clusters.items()) if c.type == "cloud") or "none"
            problems.append(f"--cloud {name}: no Cluster {name} in {folder} (its clouds: {known})")
        elif cluster.type != "cloud":
            problems.append(f"--cloud {name}: Cluster {name} is of type {cluster.type}, not cloud")
        elif not any(pool.cluster_name == name for pool in served.pools):
            problems.append(f"--cloud {name}: no NodePool of cluster {name} in {folder}")
    problems += [f"--cloud {name}: given twice" for name in sorted({n for n in clouds if list(clouds).count(n) > 1})]
    if problems:
        raise ValueError("\n".join(problems))
    if burst is not None and served.burst is not None:
        raise ValueError(f"--burst-queue and --fleet: scenario {served.scenario} says where jobs burst already")
    cloud = tuple(pool for pool in served.pools if pool.is_cloud)
    return Fleet(
        cloud, tuple(served.hpas), served.burst or burst, served.budget, tuple(ms.queues), cloud_pods=served.cloud_pods
    )
