"""The HPA replica calculator against Kubernetes' own cases.

Each case mirrors one of kubernetes/kubernetes release-1.34's
``pkg/controller/podautoscaler/replica_calculator_test.go`` (named in the test id), built as that file's
harness builds it: pods ``test-pod-<i>`` with two containers, ``container1`` and ``container2``, each
requesting the case's request; resource metrics per container in milli-units, sampled at Go's zero time
over a one-minute window; the PodReady condition's lastTransitionTime unset (zero) and the start time
zero unless the case says "hot" (now) or "cool" (3 minutes ago); the testing cpu initialization period
(2 min) and initial readiness delay (10 s); tolerance 0.1.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import pytest

from tidegate.autoscale.hpa_metrics import (
    GO_ZERO_TIME,
    ContainerResourceMetric,
    ExternalMetric,
    LabelSelector,
    MetricInputs,
    MetricTarget,
    ObjectMetric,
    ObjectReference,
    PodPhase,
    PodsMetric,
    PodUsage,
    ResourceMetric,
    TargetPod,
    external_metric_replicas,
    go_selector,
    metric_replicas,
    object_metric_replicas,
    pods_metric_replicas,
    resource_metric_replicas,
)

NOW = 1_000_000.0
HOT, COOL = NOW, NOW - 180.0
CONTAINERS = ("container1", "container2")


def pods(
    count: int,
    *,
    requests: Sequence[str] | None = None,
    readiness: Sequence[bool] | None = None,
    phases: Sequence[PodPhase] | None = None,
    deleting: Sequence[bool] | None = None,
    start: Sequence[float] | None = None,
    resource: str = "cpu",
) -> tuple[TargetPod, ...]:
    """The harness's pod list (prepareTestClientSet): `requests` per pod, on both containers."""
    out = []
    for i in range(count):
        request = requests[i] if requests is not None and i < len(requests) else None
        out.append(
            TargetPod(
                name=f"test-pod-{i}",
                phase=phases[i] if phases else "Running",
                ready=readiness[i] if readiness else True,
                ready_since=None,
                started=start[i] if start else GO_ZERO_TIME,
                deleting=deleting[i] if deleting else False,
                requests={c: ({resource: request} if request is not None else {}) for c in CONTAINERS},
            )
        )
    return tuple(out)


def same(*levels: int) -> list[list[int]]:
    """makePodMetricLevels: each pod's level on both containers."""
    return [[level, level] for level in levels]


def usage(levels: Sequence[Sequence[int]], names: Sequence[str] = (), resource: str = "cpu") -> dict[str, PodUsage]:
    """The resource metrics API's answer (prepareTestMetricsClient): levels in milli-units per container."""
    out = {}
    for i, per_container in enumerate(levels):
        name = names[i] if i < len(names) else f"test-pod-{i}"
        containers = {CONTAINERS[j]: {resource: Fraction(m, 1000)} for j, m in enumerate(per_container)}
        out[name] = PodUsage(containers, GO_ZERO_TIME, 60.0)
    return out


def inputs(current: int, pod_list: tuple[TargetPod, ...], **kw: object) -> MetricInputs:
    return MetricInputs(
        current,
        current,
        current,
        pod_list,
        now=NOW,
        cpu_initialization_period=120.0,
        initial_readiness_delay=10.0,
        **kw,  # type: ignore[arg-type]
    )


def utilization(target: int, container: str = "") -> ResourceMetric | ContainerResourceMetric:
    t = MetricTarget("Utilization", average_utilization=target)
    return ContainerResourceMetric("cpu", container, t) if container else ResourceMetric("cpu", t)


# (test name, current, pods, levels, target utilization, container, expected replicas, utilization %, raw milli)
RESOURCE_CASES = [
    ("TestReplicaCalcScaleUp", 3, pods(3, requests=["1.0"] * 3), same(300, 500, 700), 30, "", 5, 50, 1000),
    (
        "TestReplicaCalcContainerScaleUp",
        3,
        pods(3, requests=["1.0"] * 3),
        [[1000, 300], [1000, 500], [1000, 700]],
        30,
        "container2",
        5,
        50,
        500,
    ),
    (
        "TestReplicaCalcScaleUpUnreadyLessScale",
        3,
        pods(3, requests=["1.0"] * 3, readiness=[False, True, True]),
        same(300, 500, 700),
        30,
        "",
        4,
        60,
        1200,
    ),
    (
        "TestReplicaCalcScaleUpHotCpuLessScale",
        3,
        pods(3, requests=["1.0"] * 3, start=[HOT, COOL, COOL]),
        same(300, 500, 700),
        30,
        "",
        4,
        60,
        1200,
    ),
    (
        "TestReplicaCalcScaleUpUnreadyNoScale",
        3,
        pods(3, requests=["1.0"] * 3, readiness=[True, False, False]),
        same(400, 500, 700),
        30,
        "",
        3,
        40,
        800,
    ),
    (
        "TestReplicaCalcScaleHotCpuNoScale",
        3,
        pods(3, requests=["1.0"] * 3, readiness=[True, False, False], start=[COOL, HOT, HOT]),
        same(400, 500, 700),
        30,
        "",
        3,
        40,
        800,
    ),
    (
        "TestReplicaCalcScaleUpIgnoresFailedPods",
        2,
        pods(
            4,
            requests=["1.0"] * 4,
            readiness=[True, True, False, False],
            phases=["Running", "Running", "Failed", "Failed"],
        ),
        same(500, 700),
        30,
        "",
        4,
        60,
        1200,
    ),
    (
        "TestReplicaCalcScaleUpIgnoresDeletionPods",
        2,
        pods(4, requests=["1.0"] * 4, readiness=[True, True, False, False], deleting=[False, False, True, True]),
        same(500, 700),
        30,
        "",
        4,
        60,
        1200,
    ),
    ("TestReplicaCalcScaleDown", 5, pods(5, requests=["1.0"] * 5), same(100, 300, 500, 250, 250), 50, "", 3, 28, 560),
    (
        "TestReplicaCalcContainerScaleDown",
        5,
        pods(5, requests=["1.0"] * 5),
        [[1000, 100], [1000, 300], [1000, 500], [1000, 250], [1000, 250]],
        50,
        "container2",
        3,
        28,
        280,
    ),
    (
        "TestReplicaCalcScaleDownExcludeUnreadyPods",
        5,
        pods(5, requests=["1.0"] * 5, readiness=[True, True, True, False, False]),
        same(100, 300, 500, 250, 250),
        50,
        "",
        2,
        30,
        600,
    ),
    (
        "TestReplicaCalcScaleDownExcludeUnscheduledPods",
        5,
        pods(
            5,
            requests=["1.0"] * 5,
            readiness=[True, False, False, False, False],
            phases=["Running", "Pending", "Pending", "Pending", "Pending"],
        ),
        same(100),
        50,
        "",
        1,
        10,
        200,
    ),
    (
        "TestReplicaCalcScaleDownIgnoreHotCpuPods",
        5,
        pods(5, requests=["1.0"] * 5, start=[COOL, COOL, COOL, HOT, HOT]),
        same(100, 300, 500, 250, 250),
        50,
        "",
        2,
        30,
        600,
    ),
    (
        "TestReplicaCalcScaleDownIgnoresFailedPods",
        5,
        pods(
            7,
            requests=["1.0"] * 7,
            readiness=[True] * 5 + [False] * 2,
            phases=["Running"] * 5 + ["Failed"] * 2,
        ),
        same(100, 300, 500, 250, 250),
        50,
        "",
        3,
        28,
        560,
    ),
    (
        "TestReplicaCalcTolerance",
        3,
        pods(3, requests=["0.9", "1.0", "1.1"]),
        same(1010, 1030, 1020),
        100,
        "",
        3,
        102,
        2040,
    ),
    (
        "TestReplicaCalcSuperfluousMetrics",
        4,
        pods(4, requests=["1.0"] * 4),
        same(4000, 9500, 3000, 7000, 3200, 2000),
        100,
        "",
        24,
        587,
        11750,
    ),
    ("TestReplicaCalcMissingMetrics", 4, pods(4, requests=["1.0"] * 4), same(400, 95), 100, "", 3, 24, 495),
    ("TestReplicaCalcMissingMetricsNoChangeEq", 2, pods(2, requests=["1.0"] * 2), same(1000), 100, "", 2, 100, 2000),
    ("TestReplicaCalcMissingMetricsNoChangeGt", 2, pods(2, requests=["1.0"] * 2), same(1900), 100, "", 2, 190, 3800),
    ("TestReplicaCalcMissingMetricsNoChangeLt", 2, pods(2, requests=["1.0"] * 2), same(600), 100, "", 2, 60, 1200),
    (
        "TestReplicaCalcMissingMetricsUnreadyChange",
        3,
        pods(3, requests=["1.0"] * 3, readiness=[False, True, True]),
        same(100, 450),
        50,
        "",
        3,
        45,
        900,
    ),
    (
        "TestReplicaCalcMissingMetricsUnreadyScaleUp",
        3,
        pods(3, requests=["1.0"] * 3, readiness=[False, True, True]),
        same(100, 2000),
        50,
        "",
        4,
        200,
        4000,
    ),
    (
        "TestReplicaCalcMissingMetricsHotCpuScaleUp",
        3,
        pods(3, requests=["1.0"] * 3, readiness=[False, True, True], start=[HOT, COOL, COOL]),
        same(100, 2000),
        50,
        "",
        4,
        200,
        4000,
    ),
    (
        "TestReplicaCalcMissingMetricsUnreadyScaleDown",
        4,
        pods(4, requests=["1.0"] * 4, readiness=[False, True, True, True]),
        same(100, 100, 100),
        50,
        "",
        3,
        10,
        200,
    ),
    (
        "TestReplicaCalcMissingMetricsScaleDownTargetOver100",
        4,
        pods(4, requests=["1.0", "1.0", "2.0", "2.0"], readiness=[False, True, True, True]),
        same(200, 100, 100),
        300,
        "",
        2,
        6,
        200,
    ),
    (
        "TestReplicaCalcDuringRollingUpdateWithMaxSurge",
        2,
        pods(3, requests=["1.0"] * 3),
        same(100, 100),
        50,
        "",
        2,
        10,
        200,
    ),
]


@pytest.mark.parametrize(
    ("current", "pod_list", "levels", "target", "container", "replicas", "percent", "raw"),
    [case[1:] for case in RESOURCE_CASES],
    ids=[case[0] for case in RESOURCE_CASES],
)
def test_resource_utilization_as_kubernetes_computes_it(
    current: int,
    pod_list: tuple[TargetPod, ...],
    levels: list[list[int]],
    target: int,
    container: str,
    replicas: int,
    percent: int,
    raw: int,
) -> None:
    result = resource_metric_replicas(utilization(target, container), inputs(current, pod_list, usage=usage(levels)))
    assert (result.error, result.replicas, result.utilization, result.current_milli) == (None, replicas, percent, raw)


def test_resource_errors_as_kubernetes_words_them() -> None:
    three = pods(3, requests=["1.0"] * 3)
    # TestReplicaCalcEmptyMetrics: the resource metrics API returns nothing.
    r = resource_metric_replicas(utilization(100), inputs(4, three, usage={}))
    unavailable = "unable to get metrics for resource cpu: no metrics returned from resource metrics API"
    assert r.error == f"failed to get cpu utilization: {unavailable}"
    # TestReplicaCalcEmptyCPURequest: a pod without the request.
    r = resource_metric_replicas(utilization(100), inputs(1, pods(1), usage=usage(same(200))))
    assert r.error == "failed to get cpu utilization: missing request for cpu in container container1 of Pod test-pod-0"
    # TestReplicaCalcDisjointResourcesMetrics: the only sample is of a pod the selector does not list.
    one = pods(1, requests=["1.0"])
    r = resource_metric_replicas(utilization(100), inputs(1, one, usage=usage(same(100), ["an-older-pod-name"])))
    assert r.error == "failed to get cpu utilization: no metrics returned matched known pods"
    # Every pod unready: "did not receive metrics for targeted pods (pods might be unready)".
    pending = pods(2, requests=["1.0"] * 2, phases=["Pending", "Pending"])
    r = resource_metric_replicas(utilization(50), inputs(2, pending, usage=usage(same(100, 100))))
    assert r.error == "failed to get cpu utilization: did not receive metrics for targeted pods (pods might be unready)"
    # A container the pods' metrics do not have (getContainerMetrics).
    r = resource_metric_replicas(utilization(50, "sidecar"), inputs(3, three, usage=usage(same(1, 2, 3))))
    assert r.error is not None and r.error.endswith(
        "failed to get container metrics: container sidecar not present in metrics for pod default/test-pod-0"
    )
    # No pods at all.
    r = resource_metric_replicas(utilization(50), inputs(0, (), usage=usage(same(1))))
    assert r.error == "failed to get cpu utilization: no pods returned by selector while calculating replica count"


def test_readiness_only_matters_for_cpu() -> None:
    # TestReplicaCalcScaleUpUnreadyLessScale's pods, for memory: pod 0 is Running but not Ready, which only the
    # cpu rules look at, so its sample counts: 3000 / 6000 = 50% of a 30% target -> ceil(1.67 x 3) = 5.
    unready = pods(3, requests=["1.0"] * 3, readiness=[False, True, True], resource="memory")
    metric = ResourceMetric("memory", MetricTarget("Utilization", average_utilization=30))
    r = resource_metric_replicas(metric, inputs(3, unready, usage=usage(same(300, 500, 700), resource="memory")))
    assert (r.replicas, r.utilization) == (5, 50)


def test_raw_resource_average_value() -> None:
    # GetRawResourceReplicas: 600 + 1000 + 1400 = 3000 milli over 3 pods = 1000 per pod against 500 -> 6.
    metric = ResourceMetric("cpu", MetricTarget("AverageValue", average_value=Fraction(1, 2)))
    r = resource_metric_replicas(metric, inputs(3, pods(3, requests=["1.0"] * 3), usage=usage(same(300, 500, 700))))
    assert (r.replicas, r.current_milli, r.utilization) == (6, 1000, None)


def qps(levels: Sequence[int]) -> dict[str, dict[str, dict[str, Fraction]]]:
    return {"qps{}": {f"test-pod-{i}": Fraction(level, 1000) for i, level in enumerate(levels)}}


POD_CASES = [
    # (test name, current, pods, levels, target milli, expected replicas, expected usage)
    ("TestReplicaCalcScaleUpCM", 3, pods(3), [20000, 10000, 30000], 15000, 4, 20000),
    (
        "TestReplicaCalcScaleUpCMUnreadyHotCpuNoLessScale",
        3,
        pods(3, readiness=[True, True, False], start=[COOL, COOL, HOT]),
        [50000, 10000, 30000],
        15000,
        6,
        30000,
    ),
    (
        "TestReplicaCalcScaleUpCMUnreadyHotCpuScaleWouldScaleDown",
        3,
        pods(3, readiness=[False, True, False], start=[HOT, COOL, HOT]),
        [50000, 15000, 30000],
        15000,
        7,
        31666,
    ),
    ("TestReplicaCalcScaleDownCM", 5, pods(5), [12000] * 5, 20000, 3, 12000),
    ("TestReplicaCalcToleranceCM", 3, pods(3), [20000, 21000, 21000], 20000, 3, 20666),
    ("TestPlainMetricReplicaCalcMissingMetricsNoChangeEq", 5, pods(5), [20000, 19000, 21000], 20000, 5, 20000),
    ("TestReplicaCalcDuringRollingUpdateWithMaxSurgeCM", 2, pods(3), [10000, 10000], 17000, 2, 10000),
]


@pytest.mark.parametrize(
    ("current", "pod_list", "levels", "target", "replicas", "average"),
    [case[1:] for case in POD_CASES],
    ids=[case[0] for case in POD_CASES],
)
def test_pods_metrics_as_kubernetes_computes_them(
    current: int, pod_list: tuple[TargetPod, ...], levels: list[int], target: int, replicas: int, average: int
) -> None:
    metric = PodsMetric("qps", MetricTarget("AverageValue", average_value=Fraction(target, 1000)))
    r = pods_metric_replicas(metric, inputs(current, pod_list, pod_values=qps(levels)))
    assert (r.error, r.replicas, r.current_milli) == (None, replicas, average)


def test_pods_metric_missing_pods_are_rebalanced() -> None:
    # 4 pods, samples of 2 at 30000 against 20000 (ratio 1.5 > 1): the 2 missing pods count as 0 on a scale-up,
    # 60000 / 4 = 15000, ratio 0.75 reverses the direction -> keep 4 (calcPlainMetricReplicas).
    metric = PodsMetric("qps", MetricTarget("AverageValue", average_value=Fraction(20)))
    assert pods_metric_replicas(metric, inputs(4, pods(4), pod_values=qps([30000, 30000]))).replicas == 4
    # Samples of 2 at 60000: missing at 0 gives 120000 / 4 = 30000, ratio 1.5 -> ceil(1.5 x 4) = 6.
    assert pods_metric_replicas(metric, inputs(4, pods(4), pod_values=qps([60000, 60000]))).replicas == 6
    # A scale-down: 2 of 4 at 5000; the missing ones count as the target (20000): 50000 / 4 = 12500 -> ceil(2.5) = 3.
    assert pods_metric_replicas(metric, inputs(4, pods(4), pod_values=qps([5000, 5000]))).replicas == 3
    r = pods_metric_replicas(metric, inputs(4, pods(4), pod_values={}))
    assert r.error == "unable to get metric qps: no metrics returned from custom metrics API"


DEPLOYMENT = ObjectReference("Deployment", "some-deployment", "apps/v1")


@pytest.mark.parametrize(
    ("current", "readiness", "value", "target", "per_pod", "replicas", "shown"),
    [
        pytest.param(3, None, 20000, 15000, False, 4, 20000, id="TestReplicaCalcScaleUpCMObject"),
        pytest.param(3, None, 20000, 5000, True, 4, 6667, id="TestReplicaCalcScaleUpCMPerPodObject"),
        pytest.param(
            3,
            [False, True, False],
            50000,
            10000,
            False,
            5,
            50000,
            id="TestReplicaCalcScaleUpCMObjectIgnoresUnreadyPods",
        ),
        pytest.param(5, None, 12000, 20000, False, 3, 12000, id="TestReplicaCalcScaleDownCMObject"),
        pytest.param(5, None, 6000, 2000, True, 3, 1200, id="TestReplicaCalcScaleDownPerPodCMObject"),
        pytest.param(3, None, 20666, 20000, False, 3, 20666, id="TestReplicaCalcToleranceCMObject"),
        pytest.param(4, None, 20166, 5000, True, 4, 5042, id="TestReplicaCalcTolerancePerPodCMObject"),
    ],
)
def test_object_metrics_as_kubernetes_computes_them(
    current: int, readiness: list[bool] | None, value: int, target: int, per_pod: bool, replicas: int, shown: int
) -> None:
    amount = Fraction(target, 1000)
    goal = MetricTarget("AverageValue", average_value=amount) if per_pod else MetricTarget("Value", value=amount)
    metric = ObjectMetric(DEPLOYMENT, "qps", goal)
    r = object_metric_replicas(
        metric, inputs(current, pods(current, readiness=readiness), objects={metric.key: Fraction(value, 1000)})
    )
    assert (r.error, r.replicas, r.current_milli) == (None, replicas, shown)


def test_object_metric_errors() -> None:
    metric = ObjectMetric(DEPLOYMENT, "qps", MetricTarget("Value", value=Fraction(15)))
    r = object_metric_replicas(metric, inputs(3, pods(3)))
    # replica_calculator.go's own wording, its format arguments in that order.
    assert r.error == (
        "unable to get metric qps: Deployment on default some-deployment/unable to fetch metrics from custom "
        "metrics API: the server could not find the metric qps for Deployment some-deployment"
    )
    # type Value with only averageValue: the controller takes neither.
    odd = ObjectMetric(DEPLOYMENT, "qps", MetricTarget("Value", average_value=Fraction(15)))
    assert object_metric_replicas(odd, inputs(3, pods(3), objects={odd.key: 1})).error == (
        "invalid object metric source: neither a value target nor an average value target was set"
    )
    # A value metric outside the tolerance with no pods listed.
    r = object_metric_replicas(metric, inputs(3, (), objects={metric.key: 100}))
    assert r.error == "unable to calculate ready pods: no pods returned by selector while calculating replica count"


SELECTOR = LabelSelector.of({"label": "value"})


@pytest.mark.parametrize(
    ("current", "readiness", "level", "target", "per_pod", "replicas", "shown"),
    [
        pytest.param(
            3, [False, True, False], 8600, 4400, False, 2, 8600, id="TestReplicaCalcScaleUpCMExternalIgnoresUnreadyPods"
        ),
        pytest.param(3, None, 8600, 2150, True, 4, 2867, id="TestReplicaCalcScaleUpPerPodCMExternal"),
        pytest.param(5, None, 8600, 14334, False, 3, 8600, id="TestReplicaCalcScaleDownCMExternal"),
        pytest.param(5, None, 8600, 2867, True, 3, 1720, id="TestReplicaCalcScaleDownPerPodCMExternal"),
        pytest.param(3, None, 8600, 8888, False, 3, 8600, id="TestReplicaCalcToleranceCMExternal"),
        pytest.param(3, None, 8600, 2900, True, 3, 2867, id="TestReplicaCalcTolerancePerPodCMExternal"),
    ],
)
def test_external_metrics_as_kubernetes_computes_them(
    current: int, readiness: list[bool] | None, level: int, target: int, per_pod: bool, replicas: int, shown: int
) -> None:
    amount = Fraction(target, 1000)
    goal = MetricTarget("AverageValue", average_value=amount) if per_pod else MetricTarget("Value", value=amount)
    metric = ExternalMetric("qps", goal, SELECTOR)
    r = metric_replicas(
        metric, inputs(current, pods(current, readiness=readiness)), {metric.key: [Fraction(level, 1000)]}
    )
    assert (r.error, r.replicas, r.current_milli) == (None, replicas, shown)


def test_external_metric_names_its_selector_as_go_prints_it() -> None:
    metric = ExternalMetric("qps", MetricTarget("Value", value=Fraction(1)), SELECTOR)
    assert str(metric) == (
        "external metric qps(&LabelSelector{MatchLabels:map[string]string{label: value,},"
        "MatchExpressions:[]LabelSelectorRequirement{},})"
    )
    assert go_selector(None) == "nil"
    r = external_metric_replicas(metric, [], spec_replicas=1, status_replicas=1, ready_replicas=1)
    where = f"default/qps/{go_selector(SELECTOR)}"
    assert r.error == f"unable to get external metric {where}: no metrics returned from external metrics API"
