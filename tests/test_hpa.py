"""The HPA replica calculation against hand-worked Kubernetes behaviour (arithmetic in the comments).

Reference: kubernetes pkg/controller/podautoscaler/horizontal.go and replica_calculator.go,
pkg/apis/autoscaling/v2/defaults.go and pkg/apis/autoscaling/validation/validation.go.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tidegate.autoscale.hpa import (
    ABLE_TO_SCALE,
    DEFAULT_BEHAVIOR,
    DEFAULT_SCALE_UP_RULES,
    DESIRED_WITHIN_RANGE,
    FAILED_GET_CONTAINER_RESOURCE_METRIC,
    FAILED_GET_EXTERNAL_METRIC,
    FAILED_GET_OBJECT_METRIC,
    FAILED_GET_PODS_METRIC,
    FAILED_GET_RESOURCE_METRIC,
    FAILED_GET_SCALE,
    FAILED_UPDATE_SCALE,
    INVALID_SELECTOR,
    PENDING_JOBS_DURATION_METRIC,
    READY_FOR_NEW_SCALE,
    SCALE_DOWN_LIMIT,
    SCALE_DOWN_STABILIZED,
    SCALE_UP_LIMIT,
    SCALING_ACTIVE,
    SCALING_DISABLED,
    SCALING_LIMITED,
    SUCCEEDED_GET_SCALE,
    SUCCEEDED_RESCALE,
    TOO_FEW_REPLICAS,
    TOO_MANY_REPLICAS,
    VALID_METRIC_FOUND,
    HPABehavior,
    HPAController,
    HPAControllerConfig,
    HPAResult,
    HPAScalingPolicy,
    HPAScalingRules,
    HPASpec,
    HPAState,
    Recommendation,
    ScaleEvent,
    SelectPolicy,
    _rate_limited,
    check_hpa,
    queue_metric_selection,
    queue_metric_values,
    scale_down_limit,
    scale_up_limit,
    selected_values,
    status_document,
    step,
)
from tidegate.autoscale.hpa_manifest import parse_hpa
from tidegate.autoscale.hpa_metrics import (
    ContainerResourceMetric,
    ExternalMetric,
    LabelSelector,
    MetricSource,
    MetricTarget,
    ObjectMetric,
    ObjectReference,
    PodsMetric,
    PodUsage,
    ResourceMetric,
    TargetPod,
    to_milli,
)
from tidegate.model.errors import ManifestErrors, Source
from tidegate.model.quantity import parse_quantity

ISSUE_MANIFEST = """
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: cloud-burst-hpa}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: virtual-kubelet-cloud}
  minReplicas: 0
  maxReplicas: 20
  metrics:
  - type: External
    external:
      metric:
        name: volcano_queue_pending_jobs_duration_seconds
        selector: {matchLabels: {queue: hybrid-gpu-pool}}
      target: {type: AverageValue, averageValue: "300"}
  behavior:
    scaleDown:
      stabilizationWindowSeconds: 600
      policies:
      - {type: Percent, value: 10, periodSeconds: 60}
"""

M = "m"  # the metric name of the hand-built specs
FROM_ZERO = HPAControllerConfig(allow_scale_from_zero=True)


def issue_spec() -> HPASpec:
    return parse_hpa(yaml.safe_load(ISSUE_MANIFEST), Source("issue.yaml"))


def pending(value: float) -> dict[str, list[float]]:
    return {PENDING_JOBS_DURATION_METRIC: [value]}


def metric(*, average: int | None = None, value: int | None = None) -> ExternalMetric:
    if average is not None:
        return ExternalMetric(M, MetricTarget("AverageValue", average_value=Fraction(average)))
    assert value is not None
    return ExternalMetric(M, MetricTarget("Value", value=Fraction(value)))


def rules(*policies: tuple[str, int, int], window: int | None = 0, select: SelectPolicy = "Max") -> HPAScalingRules:
    return HPAScalingRules(
        window,
        select,
        tuple(HPAScalingPolicy("Pods" if t == "Pods" else "Percent", v, p) for t, v, p in policies),
    )


def spec_of(
    *,
    min_replicas: int = 1,
    max_replicas: int = 50,
    behavior: HPABehavior | None = DEFAULT_BEHAVIOR,
    metrics: Sequence[MetricSource] = (),
) -> HPASpec:
    return HPASpec(
        name="h",
        target_kind="Deployment",
        target_name="d",
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        metrics=tuple(metrics) or (metric(average=1),),
        behavior=behavior,
    )


def condition(result: HPAResult, type_: str) -> tuple[bool, str]:
    found = [c for c in result.conditions if c.type == type_]
    assert len(found) == 1, result.conditions
    return found[0].status, found[0].reason


# --------------------------------------------------------------------------------------------------
# The issue's manifest
# --------------------------------------------------------------------------------------------------


def test_issue_manifest_parses_with_kubernetes_defaults() -> None:
    spec = issue_spec()
    assert (spec.name, spec.namespace) == ("cloud-burst-hpa", "default")
    assert (spec.target_api_version, spec.target_kind, spec.target_name) == (
        "apps/v1",
        "Deployment",
        "virtual-kubelet-cloud",
    )
    assert (spec.min_replicas, spec.max_replicas) == (0, 20)
    (m,) = spec.metrics
    assert m.name == PENDING_JOBS_DURATION_METRIC
    assert m.selector == LabelSelector.of({"queue": "hybrid-gpu-pool"})
    assert m.target == MetricTarget("AverageValue", average_value=Fraction(300))
    assert m.target.milli_value == 300_000
    assert m.key == "volcano_queue_pending_jobs_duration_seconds{queue=hybrid-gpu-pool}"
    # behavior is set, so scaleUp gets every default (defaults.go) ...
    assert spec.behavior is not None
    assert spec.behavior.scale_up == DEFAULT_SCALE_UP_RULES
    assert spec.behavior.scale_up == rules(("Pods", 4, 15), ("Percent", 100, 15), window=0)
    # ... and scaleDown keeps what it sets, selectPolicy defaulted to Max.
    assert spec.behavior.scale_down == rules(("Percent", 10, 60), window=600, select="Max")
    # Scaling from 0 needs the gate; with it, nothing to warn about (a Pods policy can start from 0).
    assert check_hpa(spec, FROM_ZERO) == []
    (warning,) = check_hpa(spec)
    assert "minReplicas is 0" in warning and "HPAScaleToZero" in warning


def test_issue_manifest_scales_up_from_zero_then_follows_the_pending_duration() -> None:
    hpa = HPAController(issue_spec(), FROM_ZERO)
    # t=0, 0 replicas, 1500 s pending: ratio 1500 / (300 x 0) = +Inf is outside the tolerance, so the
    # proposal is ceil(1500 / 300) = 5; scale-up limit from 0: Pods 0 + 4 = 4, Percent ceil(0 x 2) = 0,
    # Max -> 4.
    r = hpa.step(0, 0, pending(1500))
    assert (r.metric_replicas, r.desired_replicas, r.reason) == (5, 4, SCALE_UP_LIMIT)
    assert condition(r, SCALING_LIMITED) == (True, SCALE_UP_LIMIT)
    assert r.metrics[0].current_milli == 0  # per-pod average is reported as 0 at 0 replicas
    # t=15: the scale event of t=0 is exactly one period old, so it no longer counts.
    # ratio 1500 / (300 x 4) = 1.25 > 1.1 -> ceil(1500 / 300) = 5; limit max(4 + 4, ceil(4 x 2)) = 8.
    r = hpa.step(15, 4, pending(1500))
    assert (r.desired_replicas, r.reason) == (5, DESIRED_WITHIN_RANGE)
    # t=30: ratio 1500 / (300 x 5) = 1.0 -> keep 5.
    r = hpa.step(30, 5, pending(1500))
    assert (r.desired_replicas, r.rescale) == (5, False)
    # t=45: 390 s pending: ratio 390 / 1500 = 0.26 -> ceil(390 / 300) = 2, but the 600 s scale-down
    # window still holds recommendations of 5.
    r = hpa.step(45, 5, pending(390))
    assert (r.metric_replicas, r.stabilized_replicas, r.desired_replicas) == (2, 5, 5)
    assert r.reason == SCALE_DOWN_STABILIZED


def test_average_value_sum_1500_over_300_with_2_replicas_is_5() -> None:
    hpa = HPAController(issue_spec())
    # Two samples summed: 1000 + 500 = 1500. ratio 1500 / (300 x 2) = 2.5 -> ceil(1500 / 300) = 5;
    # scale-up limit from 2: max(2 + 4, ceil(2 x 2)) = 6, so 5 is within.
    r = hpa.step(0, 2, {PENDING_JOBS_DURATION_METRIC: [1000, 500]})
    assert (r.metric_replicas, r.desired_replicas, r.reason) == (5, 5, DESIRED_WITHIN_RANGE)
    assert r.metrics[0].current_milli == 750_000  # 1500 / 2 pods = 750 per pod
    assert condition(r, ABLE_TO_SCALE)[1] == "SucceededRescale"
    assert condition(r, SCALING_ACTIVE)[1] == "ValidMetricFound"


def test_issue_manifest_scale_down_waits_600_s_then_removes_10_percent_per_minute() -> None:
    hpa = HPAController(issue_spec())
    # t=0, 10 replicas, 3000 s pending: ratio 3000 / (300 x 10) = 1.0 -> keep 10 (recommendation 10).
    assert hpa.step(0, 10, pending(3000)).desired_replicas == 10
    # Recommendations 8 (2400 / 300), 6 (1800 / 300), then 2 (600 / 300) from t=180; the window
    # (t - 600, t] still holds the 10s recorded at t=0, so the count is held at 10.
    for t, total, proposal in [(60, 2400, 8), (120, 1800, 6), (180, 600, 2), (540, 600, 2)]:
        r = hpa.step(t, 10, pending(total))
        assert (r.metric_replicas, r.desired_replicas, r.reason) == (proposal, 10, SCALE_DOWN_STABILIZED)
    # t=600: the t=0 recommendations have left the window; the highest left is 8 (t=60). Scale-down
    # limit Percent 10/60 s from 10: int(10 x 0.9) = 9.
    r = hpa.step(600, 10, pending(600))
    assert (r.stabilized_replicas, r.desired_replicas, r.reason) == (8, 9, SCALE_DOWN_LIMIT)
    # t=660: highest in (60, 660] is 6 (t=120); the event at t=600 is one period old -> start 9,
    # int(9 x 0.9) = int(8.1) = 8.
    r = hpa.step(660, 9, pending(600))
    assert (r.stabilized_replicas, r.desired_replicas) == (6, 8)
    # t=720: only 2s remain in the window; int(8 x 0.9) = int(7.2) = 7.
    r = hpa.step(720, 8, pending(600))
    assert (r.stabilized_replicas, r.desired_replicas) == (2, 7)


# --------------------------------------------------------------------------------------------------
# Tolerance and metric arithmetic
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "total", "expected"),
    [
        # value target 100, 4 ready pods: ratio 105 / 100 = 1.05 is inside [0.9, 1.1] -> keep 4
        (metric(value=100), 105, 4),
        # averageValue 100 per pod, 4 pods: ratio 420 / (100 x 4) = 1.05 -> keep 4
        (metric(average=100), 420, 4),
        # the band is inclusive: 440 / 400 = 1.1 and 360 / 400 = 0.9 -> keep 4
        (metric(average=100), 440, 4),
        (metric(average=100), 360, 4),
        # just outside: 444 / 400 = 1.11 -> ceil(444 / 100) = 5
        (metric(average=100), 444, 5),
        # value target: 150 / 100 = 1.5 -> ceil(1.5 x 4 ready pods) = 6
        (metric(value=100), 150, 6),
    ],
)
def test_tolerance_band(target: ExternalMetric, total: int, expected: int) -> None:
    spec = spec_of(metrics=[target])
    # min 1 and a 0 s scale-down window so only the tolerance decides.
    spec = replace(spec, behavior=HPABehavior(scale_down=rules(("Percent", 100, 15))))
    _, r = step(HPAState(), spec, 0, 4, {M: [total]})
    assert r.desired_replicas == expected
    assert r.rescale == (expected != 4)


def test_value_target_multiplies_by_ready_pods_and_samples_round_up_to_milli() -> None:
    spec = spec_of(metrics=[metric(value=100)])
    # 4 pods exist but 2 are ready: ratio 300 / 100 = 3 -> ceil(3 x 2) = 6.
    _, r = step(HPAState(), spec, 0, 4, {M: [300]}, ready_replicas=2)
    assert r.metric_replicas == 6
    # "0.0001" is 0.1 milli, read as 1 milli (Quantity.MilliValue rounds up): total 100.001 is
    # within tolerance of 100, so nothing changes; the reported total is 100001 milli.
    _, r = step(HPAState(), spec, 0, 4, {M: [100, "0.0001", "1m"]})
    assert (r.desired_replicas, r.metrics[0].current_milli) == (4, 100_002)


def test_configurable_tolerance_per_direction() -> None:
    behavior = HPABehavior(
        scale_up=HPAScalingRules(0, "Max", DEFAULT_SCALE_UP_RULES.policies, tolerance=0.5),
        scale_down=rules(("Percent", 100, 15)),
    )
    spec = spec_of(metrics=[metric(average=100)], behavior=behavior)
    # Scale-up tolerance 0.5: ratio 560 / (100 x 4) = 1.4 <= 1.5 -> keep 4.
    assert step(HPAState(), spec, 0, 4, {M: [560]})[1].desired_replicas == 4
    # Scale-down keeps the controller's 0.1: ratio 300 / 400 = 0.75 < 0.9 -> ceil(300 / 100) = 3.
    assert step(HPAState(), spec, 0, 4, {M: [300]})[1].desired_replicas == 3


def test_largest_metric_wins_and_failures_block_only_scale_downs() -> None:
    a = ExternalMetric("a", MetricTarget("AverageValue", average_value=Fraction(100)))
    b = ExternalMetric("b", MetricTarget("AverageValue", average_value=Fraction(100)))
    spec = spec_of(metrics=[a, b], behavior=HPABehavior(scale_down=rules(("Percent", 100, 15))))
    # a: ceil(800 / 100) = 8, b: ceil(200 / 100) = 2 -> 8.
    _, r = step(HPAState(), spec, 0, 4, {"a": [800], "b": [200]})
    assert r.desired_replicas == 8
    # b has no samples: the others still scale up ...
    _, r = step(HPAState(), spec, 0, 4, {"a": [800]})
    assert r.desired_replicas == 8
    # ... but never down (computeReplicasForMetrics: some invalid and replicas < spec replicas).
    _, r = step(HPAState(), spec, 0, 4, {"a": [200]})
    assert (r.desired_replicas, r.reason) == (4, FAILED_GET_EXTERNAL_METRIC)
    assert "no metrics returned from external metrics API" in r.message
    # Nothing at all: no action, ScalingActive False.
    state, r = step(HPAState(), spec, 0, 4, {})
    assert (r.desired_replicas, condition(r, SCALING_ACTIVE)) == (4, (False, FAILED_GET_EXTERNAL_METRIC))
    assert len(state.recommendations) == 1  # only the initial one: no stabilization happened


# --------------------------------------------------------------------------------------------------
# Rate limits and stabilization
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("select", "first", "held", "second"),
    [
        # Max: from 3, Pods 3 + 4 = 7 vs Percent ceil(3 x 2) = 6 -> 7; at t=15 from 7: max(11, 14) = 14
        ("Max", 7, 7, 14),
        # Min: min(7, 6) = 6; at t=15 from 6: min(6 + 4, ceil(6 x 2)) = min(10, 12) = 10
        ("Min", 6, 6, 10),
    ],
)
def test_scale_up_limited_by_pods_and_percent_policies(
    select: SelectPolicy, first: int, held: int, second: int
) -> None:
    up = rules(("Pods", 4, 15), ("Percent", 100, 15), select=select)
    hpa = HPAController(spec_of(behavior=HPABehavior(scale_up=up)))
    r = hpa.step(0, 3, {M: [40]})  # averageValue 1 -> proposal 40
    assert (r.metric_replicas, r.desired_replicas, r.reason) == (40, first, SCALE_UP_LIMIT)
    # t=5: the t=0 event is inside both 15 s periods, so the period started at 3 and the limit is
    # unchanged: no further growth.
    r = hpa.step(5, first, {M: [40]})
    assert (r.desired_replicas, r.rescale, r.reason) == (held, False, SCALE_UP_LIMIT)
    r = hpa.step(15, first, {M: [40]})
    assert r.desired_replicas == second
    assert hpa.state.scale_up_events[-1] == ScaleEvent(second - first, 15)


def test_default_behavior_scales_up_fast_and_down_after_300_s() -> None:
    spec = parse_hpa(
        {
            "apiVersion": "autoscaling/v2",
            "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h"},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "d"},
                "maxReplicas": 30,
                "metrics": [
                    {
                        "type": "External",
                        "external": {"metric": {"name": M}, "target": {"type": "AverageValue", "averageValue": 1}},
                    }
                ],
                "behavior": {},
            },
        }
    )
    assert spec.behavior == DEFAULT_BEHAVIOR and spec.min_replicas == 1
    hpa = HPAController(spec)
    # Up: max(2 + 4, 2 x 2) = 6; max(6 + 4, 12) = 12; max(16, 24) = 24 >= 20 -> 20.
    assert [hpa.step(t, c, {M: [20]}).desired_replicas for t, c in [(0, 2), (15, 6), (30, 12)]] == [6, 12, 20]
    # Down to 2 from t=45: held at 20 while a 20 is inside (t - 300, t] (the last one was at t=30) ...
    for t in range(45, 330, 15):
        r = hpa.step(t, 20, {M: [2]})
        assert (r.desired_replicas, r.reason) == (20, SCALE_DOWN_STABILIZED)
    # ... released at t=330 (30 is not after 330 - 300); Percent 100 allows 0, so 2 is within range.
    r = hpa.step(330, 20, {M: [2]})
    assert (r.desired_replicas, r.reason) == (2, DESIRED_WITHIN_RANGE)
    assert condition(r, SCALING_LIMITED) == (False, DESIRED_WITHIN_RANGE)


def test_without_behavior_kubernetes_uses_its_older_algorithm() -> None:
    spec = spec_of(behavior=None, max_replicas=30)
    hpa = HPAController(spec)
    # Up: at most max(2 x current, 4) per evaluation, no periods: 2 -> 4 -> 8 -> 16 -> 20, even 1 s apart.
    seen = []
    current = 2
    for t in range(4):
        current = hpa.step(t, current, {M: [20]}).desired_replicas
        seen.append(current)
    assert seen == [4, 8, 16, 20]
    assert hpa.state.scale_up_events == ()  # no behavior, no scale events
    # Down: the highest recommendation of the last 300 s, and a recommendation exactly 300 s old still
    # counts (the older path tests Before(cutoff)). t=0 records 10 (initial) and proposes 2.
    for behavior, released_at in ((None, 301), (DEFAULT_BEHAVIOR, 300)):
        hpa = HPAController(spec_of(behavior=behavior))
        r = hpa.step(0, 10, {M: [2]})
        assert (r.desired_replicas, r.reason) == (10, SCALE_DOWN_STABILIZED)
        assert hpa.step(released_at - 1, 10, {M: [2]}).desired_replicas == 10
        # With behavior: {} the window is (t - 300, t], so the t=0 recommendation leaves at t=300.
        assert hpa.step(released_at, 10, {M: [2]}).desired_replicas == 2


def test_percent_10_per_60_s_scale_down_from_20_with_event_history() -> None:
    spec = spec_of(min_replicas=0, behavior=HPABehavior(scale_down=rules(("Percent", 10, 60), window=0)))
    hpa = HPAController(spec)
    # Hand arithmetic, one step per period: 20x0.9=18, 18x0.9=16.2->16, 14.4->14, 12.6->12, 10.8->10,
    # 9.0->9, 8.1->8, 7.2->7, 6.3->6, 5.4->5, 4.5->4, 3.6->3, 2.7->2, 1.8->1, 0.9->0.
    expected = [18, 16, 14, 12, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]
    current = 20
    for period, want in enumerate(expected):
        t = 60 * period
        r = hpa.step(t, current, {M: [0]})  # proposal ceil(0 / 1) = 0
        assert r.desired_replicas == want
        current = want
        if current == 0:
            break
        # Memory stays bounded: a recommendation that has left both windows gives its slot to the next.
        assert len(hpa.state.recommendations) == 2
        # Inside the period the removed replicas still count: start = current + removed = previous.
        for dt in (15, 30, 45):
            r = hpa.step(t + dt, current, {M: [0]})
            assert (r.desired_replicas, r.reason) == (current, SCALE_DOWN_LIMIT)
        if period == 2:
            # t=120: the t=0 event (older than the 60 s period) was flagged outdated and its slot
            # reused for this one; the t=60 event stays.
            assert hpa.state.scale_down_events == (ScaleEvent(2, 120), ScaleEvent(2, 60))


def test_scale_up_window_applies_the_lowest_recent_recommendation() -> None:
    behavior = HPABehavior(scale_up=rules(("Pods", 100, 15), window=60), scale_down=rules(("Pods", 100, 15)))
    hpa = HPAController(spec_of(behavior=behavior))
    # t=0: 4 replicas at target (ratio 4 / 4 = 1): recommendations 4 (initial) and 4.
    assert hpa.step(0, 4, {M: [4]}).desired_replicas == 4
    # t=30 proposes 12, t=45 proposes 8: the lowest in (t - 60, t] is still the 4 of t=0.
    for t, total in ((30, 12), (45, 8)):
        r = hpa.step(t, 4, {M: [total]})
        assert (r.metric_replicas, r.desired_replicas, r.reason) == (total, 4, "ScaleUpStabilized")
    # t=60: the t=0 recommendations have left; lowest of 12 (t=30), 8 (t=45), 10 (now) is 8.
    r = hpa.step(60, 4, {M: [10]})
    assert (r.stabilized_replicas, r.desired_replicas) == (8, 8)
    # t=106: (46, 106] holds 10 (t=60) and 10 (now): up to 10.
    assert hpa.step(106, 8, {M: [10]}).desired_replicas == 10


def test_a_below_min_correction_uses_the_scale_up_budget_but_never_forces_a_scale_down() -> None:
    hpa = HPAController(spec_of(min_replicas=10, behavior=HPABehavior(scale_up=rules(("Pods", 4, 60)))))
    # 1 replica is below minReplicas 10: set to 10 directly, recorded as 9 added.
    assert hpa.step(0, 1, {M: [12]}).desired_replicas == 10
    # t=5: metrics want 12; the 60 s period started at 10 - 9 = 1, so Pods 4 allows 5, which is below
    # the current 10: the limit is raised to the current count (no growth, and no shrinking either).
    r = hpa.step(5, 10, {M: [12]})
    assert (r.metric_replicas, r.desired_replicas, r.reason) == (12, 10, SCALE_UP_LIMIT)
    # t=60: the correction is a whole period old: 10 + 4 = 14 >= 12.
    assert hpa.step(60, 10, {M: [12]}).desired_replicas == 12


def test_an_above_max_correction_uses_the_scale_down_budget_but_never_forces_a_scale_up() -> None:
    hpa = HPAController(spec_of(max_replicas=20, behavior=HPABehavior(scale_down=rules(("Pods", 1, 60)))))
    # 25 replicas are above maxReplicas 20: set to 20 directly, recorded as 5 removed.
    assert hpa.step(0, 25, {M: [2]}).desired_replicas == 20
    # t=5: metrics want 2; the period started at 20 + 5 = 25, Pods 1 allows 24, above the current 20:
    # the limit is lowered to the current count (no shrinking, and no growing either).
    r = hpa.step(5, 20, {M: [2]})
    assert (r.metric_replicas, r.desired_replicas, r.reason) == (2, 20, SCALE_DOWN_LIMIT)


def test_average_value_divides_by_the_pods_that_exist() -> None:
    spec = spec_of(metrics=[metric(average=100)], behavior=HPABehavior(scale_down=rules(("Percent", 100, 15))))
    # spec.replicas 4 but only 2 pods exist (status.replicas): ratio 210 / (100 x 2) = 1.05 is within
    # the tolerance, so GetExternalPerPodMetricReplicas proposes the status count, 2 -- Kubernetes then
    # scales the target down to 2.
    _, r = step(HPAState(), spec, 0, 4, {M: [210]}, status_replicas=2)
    assert (r.metric_replicas, r.desired_replicas) == (2, 2)
    assert r.metrics[0].current_milli == 105_000  # 210 / 2 pods


def test_rate_limits_count_both_directions_from_the_period_start() -> None:
    behavior = HPABehavior(scale_down=rules(("Pods", 1, 60)))
    hpa = HPAController(spec_of(behavior=behavior))
    # t=0: 4 -> 8 (limit max(4 + 4, 4 x 2) = 8).
    assert hpa.step(0, 4, {M: [8]}).desired_replicas == 8
    # t=10: proposal 2. The 60 s scale-down period started at 8 - 4 added + 0 removed = 4, and Pods 1
    # allows 4 - 1 = 3: so the count drops straight to 3, not to 7.
    r = hpa.step(10, 8, {M: [2]})
    assert (r.desired_replicas, r.reason) == (3, SCALE_DOWN_LIMIT)


def test_percent_policies_round_like_go_float64() -> None:
    # 50 x (1 + 10/100) is 55.000000000000007 in binary64, so Kubernetes allows ceil(...) = 56, not 55.
    up = HPABehavior(scale_up=rules(("Percent", 10, 60)))
    _, r = step(HPAState(), spec_of(max_replicas=200, behavior=up), 0, 50, {M: [100]})
    assert r.desired_replicas == 56
    # 90 x (1 - 30/100) is 62.999999999999993, truncated to 62 (exactly it would be 63).
    down = HPABehavior(scale_down=rules(("Percent", 30, 60)))
    _, r = step(HPAState(), spec_of(max_replicas=200, behavior=down), 0, 90, {M: [0]})
    assert r.desired_replicas == 62


# --------------------------------------------------------------------------------------------------
# Bounds, selectPolicy Disabled, scale from zero
# --------------------------------------------------------------------------------------------------


def test_outside_min_max_is_set_to_the_bound_without_metrics() -> None:
    spec = spec_of(min_replicas=2, max_replicas=20)
    # Above max: straight to max, metrics not even read (none given), the change recorded as an event.
    state, r = step(HPAState(), spec, 0, 25, {})
    assert (r.desired_replicas, r.reason) == (20, TOO_MANY_REPLICAS)
    assert "above Spec.MaxReplicas" in r.message
    assert state.scale_down_events == (ScaleEvent(5, 0),)
    # Below min (but not 0): straight to min.
    _, r = step(HPAState(), spec, 0, 1, {})
    assert (r.desired_replicas, r.reason) == (2, TOO_FEW_REPLICAS)


def test_metric_proposals_are_clamped_to_min_and_max() -> None:
    behavior = HPABehavior(scale_up=rules(("Pods", 100, 15)), scale_down=rules(("Percent", 100, 15)))
    spec = spec_of(min_replicas=3, max_replicas=20, behavior=behavior)
    # Proposal 50 from 10: rate limit 10 + 100 = 110 > max 20, so maxReplicas is the binding limit.
    _, r = step(HPAState(), spec, 0, 10, {M: [50]})
    assert (r.desired_replicas, r.reason) == (20, TOO_MANY_REPLICAS)
    # Proposal 0 from 5: Percent 100 allows int(5 x 0) = 0 < min 3, so minReplicas binds.
    _, r = step(HPAState(), spec, 0, 5, {M: [0]})
    assert (r.desired_replicas, r.reason) == (3, TOO_FEW_REPLICAS)


def test_select_policy_disabled() -> None:
    behavior = HPABehavior(scale_up=rules(("Pods", 4, 15), select="Disabled"), scale_down=rules(("Pods", 4, 15)))
    spec = spec_of(min_replicas=2, behavior=behavior)
    # Scale-up disabled: the limit is the current count, 3.
    _, r = step(HPAState(), spec, 0, 3, {M: [10]})
    assert (r.metric_replicas, r.desired_replicas, r.reason) == (10, 3, SCALE_UP_LIMIT)
    assert condition(r, SCALING_LIMITED) == (True, SCALE_UP_LIMIT)
    # ... but a target below minReplicas is still raised to it.
    assert step(HPAState(), spec, 0, 1, {M: [10]})[1].desired_replicas == 2
    assert any("selectPolicy is Disabled" in w for w in check_hpa(spec))
    down_disabled = HPABehavior(scale_down=rules(("Pods", 4, 15), select="Disabled"))
    _, r = step(HPAState(), spec_of(behavior=down_disabled), 0, 10, {M: [2]})
    assert (r.desired_replicas, r.reason) == (10, SCALE_DOWN_LIMIT)


def test_zero_replicas_is_left_alone_unless_scale_from_zero_is_allowed() -> None:
    spec = issue_spec()
    # Kubernetes default (no HPAScaleToZero): "scaling is disabled since the replica count of the
    # target is zero".
    state, r = step(HPAState(), spec, 0, 0, pending(1500))
    assert (r.desired_replicas, r.reason) == (0, SCALING_DISABLED)
    assert condition(r, SCALING_ACTIVE) == (False, SCALING_DISABLED)
    assert "HPAScaleToZero" in r.message
    assert state.recommendations[0].replicas == 0  # the initial recommendation is still recorded
    # minReplicas >= 1 and 0 replicas: disabled even with the flag (a user paused it).
    paused = replace(spec, min_replicas=1)
    assert step(HPAState(), paused, 0, 0, pending(1500), config=FROM_ZERO)[1].reason == SCALING_DISABLED
    # With the flag and nothing pending: ratio 0 / (300 x 0) is NaN, never within the tolerance, so the
    # proposal is ceil(0 / 300) = 0 and the target stays at 0.
    _, r = step(HPAState(), spec, 0, 0, pending(0), config=FROM_ZERO)
    assert (r.desired_replicas, r.reason) == (0, DESIRED_WITHIN_RANGE)
    # A value target at 0 replicas: ceil(1500 / 300) = 5 with no tolerance, limited to 4 from 0.
    value_spec = spec_of(min_replicas=0, metrics=[metric(value=300)])
    _, r = step(HPAState(), value_spec, 0, 0, {M: [1500]}, config=FROM_ZERO)
    assert (r.metric_replicas, r.desired_replicas) == (5, 4)
    # Without behavior (older algorithm) the limit from 0 is max(2 x 0, 4) = 4 as well.
    legacy = replace(spec, behavior=None)
    assert step(HPAState(), legacy, 0, 0, pending(1500), config=FROM_ZERO)[1].desired_replicas == 4


def test_percent_only_scale_up_cannot_leave_zero_and_check_hpa_says_so() -> None:
    behavior = HPABehavior(scale_up=rules(("Percent", 100, 15)), scale_down=rules(("Percent", 100, 15)))
    spec = spec_of(min_replicas=0, behavior=behavior)
    (warning,) = check_hpa(spec, FROM_ZERO)
    assert "cannot scale up from 0 replicas" in warning and "every policy is Percent" in warning
    assert "ceil(0 x (1 + value/100)) = 0" in warning
    hpa = HPAController(spec, FROM_ZERO)
    # t=0: 2 -> 0 (proposal 0, Percent 100 allows int(2 x 0) = 0).
    assert hpa.step(0, 2, {M: [0]}).desired_replicas == 0
    # t=5: the period started at 0 + 2 removed = 2, so Percent 100 allows ceil(2 x 2) = 4.
    assert hpa.step(5, 0, {M: [5]}).desired_replicas == 4
    hpa = HPAController(spec, FROM_ZERO)
    # A pool that has been at 0 for a whole period: ceil(0 x 2) = 0, stuck.
    r = hpa.step(0, 0, {M: [5]})
    assert (r.metric_replicas, r.desired_replicas, r.reason) == (5, 0, SCALE_UP_LIMIT)
    # selectPolicy Min with a Pods policy is stuck too (min(0 + 4, 0) = 0); Max with Pods is not.
    mixed = rules(("Pods", 4, 15), ("Percent", 100, 15), select="Min")
    (warning,) = check_hpa(spec_of(min_replicas=0, behavior=HPABehavior(scale_up=mixed)), FROM_ZERO)
    assert "selectPolicy Min" in warning
    assert check_hpa(spec_of(min_replicas=0), FROM_ZERO) == []


# --------------------------------------------------------------------------------------------------
# Manifest errors and checks
# --------------------------------------------------------------------------------------------------


def test_parse_reports_every_bad_field_by_path() -> None:
    doc = yaml.safe_load(ISSUE_MANIFEST)
    doc["spec"]["behavior"]["scaleDown"]["policies"][0]["type"] = "Replicas"
    doc["spec"]["behavior"]["scaleDown"]["policies"].append({"type": "Pods", "value": 0, "periodSeconds": 60})
    doc["spec"]["behavior"]["scaleUp"] = {"selectPolicy": "Fastest", "stabilizationWindowSeconds": -1}
    doc["spec"]["metrics"][0]["external"]["target"] = {"type": "AverageValue", "averageValue": "-3"}
    doc["spec"]["metrics"].append({"type": "Queue", "resource": {"name": "cpu"}})
    with pytest.raises(ManifestErrors) as caught:
        parse_hpa(doc, Source("hpa.yaml", 2))
    fields = {e.field: e.message for e in caught.value.errors}
    assert set(fields) == {
        "spec.behavior.scaleDown.policies[0].type",
        "spec.behavior.scaleDown.policies[1].value",
        "spec.behavior.scaleUp.selectPolicy",
        "spec.behavior.scaleUp.stabilizationWindowSeconds",
        "spec.metrics[0].external.target.averageValue",
        "spec.metrics[1].type",
        "spec.metrics[1].resource",
    }
    assert "supported values: Pods, Percent" in fields["spec.behavior.scaleDown.policies[0].type"]
    assert 'unsupported value "Queue"' in fields["spec.metrics[1].type"]
    assert fields["spec.metrics[1].resource"] == "must populate the given metric source only"
    first = str(caught.value.errors[0])
    assert first.startswith("hpa.yaml: document 2: HorizontalPodAutoscaler/cloud-burst-hpa field spec.")


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.update(apiVersion="autoscaling/v1"), "apiVersion"),
        (lambda d: d["spec"].pop("maxReplicas"), "spec.maxReplicas"),
        (lambda d: d["spec"].update(minReplicas=True), "spec.minReplicas"),
        (lambda d: d["spec"]["scaleTargetRef"].pop("name"), "spec.scaleTargetRef.name"),
        (lambda d: d["spec"]["metrics"][0]["external"]["metric"].pop("name"), "spec.metrics[0].external.metric.name"),
        (lambda d: d["spec"]["behavior"]["scaleDown"].update(policies=[]), "spec.behavior.scaleDown.policies"),
        (
            lambda d: d["spec"]["metrics"][0]["external"]["target"].update(value="5"),
            "spec.metrics[0].external.target.value",
        ),
        (
            lambda d: d["spec"]["metrics"][0]["external"]["metric"]["selector"].update(
                matchExpressions=[{"key": "queue", "operator": "In"}]
            ),
            "spec.metrics[0].external.metric.selector.matchExpressions[0].values",
        ),
    ],
)
def test_parse_names_the_field(edit: Callable[[dict[str, Any]], object], field: str) -> None:
    doc = yaml.safe_load(ISSUE_MANIFEST)
    edit(doc)
    with pytest.raises(ManifestErrors) as caught:
        parse_hpa(doc)
    assert [e.field for e in caught.value.errors] == [field]


def test_check_hpa_reports_what_the_api_server_would_reject() -> None:
    doc = yaml.safe_load(ISSUE_MANIFEST)
    doc["spec"].update(minReplicas=5, maxReplicas=3)
    doc["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] = 7200
    doc["spec"]["behavior"]["scaleDown"]["policies"][0]["periodSeconds"] = 3600
    doc["spec"]["metrics"][0]["external"]["target"]["type"] = "Value"
    warnings = check_hpa(parse_hpa(doc))
    assert len(warnings) == 4
    assert "maxReplicas (3) is below spec.minReplicas (5)" in warnings[0]
    assert "ignores the type" in warnings[1] and "uses averageValue" in warnings[1]
    assert "stabilizationWindowSeconds is 7200" in warnings[2] and "3600" in warnings[2]
    assert "policies[0].periodSeconds is 3600" in warnings[3] and "1800" in warnings[3]


def test_behavior_tolerance_and_selector_expressions_parse() -> None:
    doc = yaml.safe_load(ISSUE_MANIFEST)
    doc["spec"]["behavior"]["scaleUp"] = {"tolerance": "50m"}
    doc["spec"]["metrics"][0]["external"]["metric"]["selector"]["matchExpressions"] = [
        {"key": "tier", "operator": "NotIn", "values": ["spot"]}
    ]
    spec = parse_hpa(doc)
    assert spec.behavior is not None
    assert spec.behavior.scale_up.tolerance == 0.05
    assert spec.behavior.scale_up.policies == DEFAULT_SCALE_UP_RULES.policies
    selector = spec.metrics[0].selector
    assert selector.matches({"queue": "hybrid-gpu-pool", "tier": "ondemand"})
    assert not selector.matches({"queue": "hybrid-gpu-pool", "tier": "spot"})
    assert not selector.matches({"queue": "other"})
    assert parse_hpa({**doc, "spec": {**doc["spec"], "behavior": None}}).behavior is None


# --------------------------------------------------------------------------------------------------
# Inputs and helpers
# --------------------------------------------------------------------------------------------------


def test_queue_metric_values_keeps_the_queues_the_selector_matches() -> None:
    spec = issue_spec()
    values = queue_metric_values(spec, {"hybrid-gpu-pool": 900, "idc-only": 5000})
    assert values == {spec.metrics[0].key: (900,)}
    # 900 s pending over averageValue 300 -> 3 replicas.
    _, r = step(HPAState(), spec, 0, 1, values)
    assert r.metric_replicas == 3
    assert queue_metric_values(spec, {"idc-only": 5000}) == {}


def test_a_selection_worked_out_once_reads_what_queue_metric_values_reads() -> None:
    spec = issue_spec()
    selection = queue_metric_selection(spec, ["idc-only", "hybrid-gpu-pool"])
    assert selection == ((spec.metrics[0].key, ("hybrid-gpu-pool",)),)
    for per_queue in ({"hybrid-gpu-pool": 900.5, "idc-only": 5000}, {"hybrid-gpu-pool": 0.0, "idc-only": 0.0}):
        assert selected_values(selection, per_queue) == queue_metric_values(spec, per_queue)
    assert queue_metric_selection(spec, ["idc-only"]) == ()


# --------------------------------------------------------------------------------------------------
# Every metric type, and the conditions as horizontal.go sets them (horizontal_test.go's cases named)
# --------------------------------------------------------------------------------------------------

CPU_80 = ResourceMetric("cpu", MetricTarget("Utilization", average_utilization=80))


def hpa_pods(count: int, request: str = "100m") -> list[TargetPod]:
    """horizontal_test.go's pods: Running, Ready, one container requesting `request` cpu, started long ago."""
    return [TargetPod(f"p{i}", requests={"c": {"cpu": request}}, started=-1e9, ready_since=-1e9) for i in range(count)]


def cpu_usage(*milli: int) -> dict[str, PodUsage]:
    return {f"p{i}": PodUsage({"c": {"cpu": Fraction(m, 1000)}}, 0.0) for i, m in enumerate(milli)}


def types(result: HPAResult) -> list[tuple[str, bool, str]]:
    return [(c.type, c.status, c.reason) for c in result.conditions]


def test_condition_failed_update_scale_stores_no_scale_event() -> None:
    # TestConditionFailedUpdateScale: 3 pods at 150% of a 100% target want ceil(1.5 x 3) = 5; the update fails.
    spec = spec_of(
        max_replicas=5, metrics=[ResourceMetric("cpu", MetricTarget("Utilization", average_utilization=100))]
    )
    hpa = HPAController(spec)
    refused = hpa.step(0, 3, {}, pods=hpa_pods(3), usage=cpu_usage(150, 150, 150), update_scale=lambda c, d: "boom")
    assert (refused.desired_replicas, refused.reason, refused.rescale) == (3, FAILED_UPDATE_SCALE, False)
    assert types(refused) == [
        (ABLE_TO_SCALE, False, FAILED_UPDATE_SCALE),
        (SCALING_ACTIVE, True, VALID_METRIC_FOUND),
        (SCALING_LIMITED, False, DESIRED_WITHIN_RANGE),
    ]
    assert refused.conditions[0].message == "the HPA controller was unable to update the target scale: boom"
    assert refused.conditions[1].message == (
        "the HPA was able to successfully calculate a replica count from "
        "cpu resource utilization (percentage of request)"
    )
    status = hpa.status
    assert (status.desired_replicas, status.last_scale_time, hpa.state.scale_up_events) == (0, None, ())
    # Nothing was stored, so at t=5 the full budget is there: max(3 + 4, 3 x 2) = 7 allows 5.
    done = hpa.step(5, 3, {}, pods=hpa_pods(3), usage=cpu_usage(150, 150, 150))
    assert (done.desired_replicas, types(done)[0]) == (5, (ABLE_TO_SCALE, True, SUCCEEDED_RESCALE))
    assert (hpa.status.desired_replicas, hpa.status.last_scale_time) == (5, 5)
    # AbleToScale flipped False -> True at 5; ScalingActive stayed True since 0.
    assert [(c.type, c.last_transition_time) for c in hpa.status.conditions] == [
        (ABLE_TO_SCALE, 5),
        (SCALING_ACTIVE, 0),
        (SCALING_LIMITED, 0),
    ]


def test_condition_failed_get_metrics_per_metric_type() -> None:
    # TestConditionFailedGetMetrics: one metric whose API answers nothing -> ScalingActive False with its reason.
    cases = [
        (CPU_80, FAILED_GET_RESOURCE_METRIC, "failed to get cpu utilization: unable to get metrics for resource cpu"),
        (
            PodsMetric("qps", MetricTarget("AverageValue", average_value=Fraction(15))),
            FAILED_GET_PODS_METRIC,
            "unable to get metric qps: no metrics returned from custom metrics API",
        ),
        (
            ObjectMetric(
                ObjectReference("Deployment", "d", "apps/v1"), "qps", MetricTarget("Value", value=Fraction(15))
            ),
            FAILED_GET_OBJECT_METRIC,
            "unable to get metric qps: Deployment on default d/",
        ),
        (
            ExternalMetric("qps", MetricTarget("Value", value=Fraction(3, 10)), LabelSelector()),
            FAILED_GET_EXTERNAL_METRIC,
            "unable to get external metric default/qps/&LabelSelector{",
        ),
        (
            ContainerResourceMetric("cpu", "c", MetricTarget("Utilization", average_utilization=10)),
            FAILED_GET_CONTAINER_RESOURCE_METRIC,
            "failed to get cpu utilization: unable to get metrics for resource cpu",
        ),
    ]
    for metric, reason, message in cases:
        _, r = step(HPAState(), spec_of(max_replicas=100, metrics=[metric]), 0, 3, {}, pods=hpa_pods(3))
        assert types(r) == [(ABLE_TO_SCALE, True, SUCCEEDED_GET_SCALE), (SCALING_ACTIVE, False, reason)]
        assert r.conditions[1].message.startswith(f"the HPA was unable to compute the replica count: {message}")
        assert (r.desired_replicas, r.reason) == (3, reason)


def test_condition_failed_get_scale_and_invalid_selector() -> None:
    # TestConditionFailedGetScale: only AbleToScale is set, nothing else happens (no recommendation recorded).
    state, r = step(HPAState(), spec_of(), 0, 3, {M: [3]}, scale_error="something went wrong")
    assert types(r) == [(ABLE_TO_SCALE, False, FAILED_GET_SCALE)]
    assert r.message == "the HPA controller was unable to get the target's current scale: something went wrong"
    assert state.recommendations == () and state.status.conditions[0].reason == FAILED_GET_SCALE
    # TestConditionInvalidSelectorMissing: the scale is read, the metrics are not.
    missing = (INVALID_SELECTOR, "the HPA target's scale is missing a selector")
    _, r = step(HPAState(), spec_of(), 0, 3, {M: [30]}, selector_error=missing)
    assert types(r) == [(ABLE_TO_SCALE, True, SUCCEEDED_GET_SCALE), (SCALING_ACTIVE, False, INVALID_SELECTOR)]
    assert (r.desired_replicas, r.metrics) == (3, ())


def test_zero_replicas_and_out_of_range_conditions() -> None:
    # TestZeroReplicas: a target at 0 with minReplicas 3 is left alone.
    _, r = step(HPAState(), spec_of(min_replicas=3), 0, 0, {M: [30]})
    assert types(r) == [(ABLE_TO_SCALE, True, SUCCEEDED_GET_SCALE), (SCALING_ACTIVE, False, SCALING_DISABLED)]
    assert r.conditions[1].message == "scaling is disabled since the replica count of the target is zero"
    # TestTooFewReplicas / TestTooManyReplicas: set straight to the bound; only AbleToScale is set.
    hpa = HPAController(spec_of(min_replicas=3, max_replicas=5))
    first = hpa.step(0, 4, {M: [4]})  # within range: all three conditions
    assert [c.type for c in first.conditions] == [ABLE_TO_SCALE, SCALING_ACTIVE, SCALING_LIMITED]
    r = hpa.step(10, 2, {M: [40]})
    assert (r.desired_replicas, types(r)) == (3, [(ABLE_TO_SCALE, True, SUCCEEDED_RESCALE)])
    # ScalingActive and ScalingLimited keep their values (and times) from the evaluation before.
    assert [(c.type, c.reason, c.last_transition_time) for c in hpa.status.conditions] == [
        (ABLE_TO_SCALE, SUCCEEDED_RESCALE, 0),
        (SCALING_ACTIVE, VALID_METRIC_FOUND, 0),
        (SCALING_LIMITED, DESIRED_WITHIN_RANGE, 0),
    ]
    assert hpa.status.current_metrics == ()  # no metrics were read
    r = hpa.step(20, 9, {M: [40]})
    assert (r.desired_replicas, r.reason, r.message) == (
        5,
        TOO_MANY_REPLICAS,
        "Current number of replicas above Spec.MaxReplicas: 9 -> 5",
    )


def test_pods_metric_scale_up_and_more_replicas_than_spec() -> None:
    # TestNoBackoffUpscaleCM: qps 20, 10 and 30 against 15 per pod -> ceil(20 / 15 x 3) = 4.
    qps = PodsMetric("qps", MetricTarget("AverageValue", average_value=Fraction(15)))
    values = {qps.key: {"p0": 20, "p1": 10, "p2": 30}}
    _, r = step(
        HPAState(), spec_of(max_replicas=5, behavior=None, metrics=[qps]), 0, 3, {}, pods=hpa_pods(3), pod_values=values
    )
    assert r.desired_replicas == 4
    assert types(r) == [
        (ABLE_TO_SCALE, True, SUCCEEDED_RESCALE),
        (SCALING_ACTIVE, True, VALID_METRIC_FOUND),
        (SCALING_LIMITED, False, DESIRED_WITHIN_RANGE),
    ]
    assert "pods metric qps" in r.conditions[1].message
    # TestMoreReplicasThanSpecNoScale: spec 4 while 5 pods run (a surge), each at 50% of a 50% target: keep 4.
    half = ResourceMetric("cpu", MetricTarget("Utilization", average_utilization=50))
    spec = spec_of(max_replicas=8, behavior=None, metrics=[half])
    _, r = step(HPAState(), spec, 0, 4, {}, status_replicas=5, pods=hpa_pods(5, "1"), usage=cpu_usage(*[500] * 5))
    assert (r.desired_replicas, types(r)[0]) == (4, (ABLE_TO_SCALE, True, READY_FOR_NEW_SCALE))


def test_stabilize_downscale_without_behavior() -> None:
    # TestStabilizeDownscale: recommendations 10 (10 min ago, out of the 5 min window) and 4 (1 min ago); the
    # metrics now ask for 2 (50% of a 100% target over 4 pods), the window's highest, 4, is kept.
    state = HPAState(recommendations=(Recommendation(10, -600), Recommendation(4, -60)))
    cpu = ResourceMetric("cpu", MetricTarget("Utilization", average_utilization=100))
    spec = spec_of(max_replicas=5, behavior=None, metrics=[cpu])
    state, r = step(state, spec, 0, 4, {}, pods=hpa_pods(4), usage=cpu_usage(50, 50, 50, 50))
    assert (r.metric_replicas, r.desired_replicas) == (2, 4)
    assert types(r)[0] == (ABLE_TO_SCALE, True, SCALE_DOWN_STABILIZED)
    # The old recommendation's slot took the new one.
    assert state.recommendations == (Recommendation(2, 0), Recommendation(4, -60))


def test_status_document_names_fields_as_kubernetes() -> None:
    hpa = HPAController(issue_spec(), FROM_ZERO)
    hpa.step(0, 0, pending(1500))
    doc = status_document(hpa.status)
    assert (doc["currentReplicas"], doc["desiredReplicas"], doc["lastScaleTime"]) == (0, 4, 0)
    assert doc["currentMetrics"] == [
        {
            "type": "External",
            "metric": "external metric volcano_queue_pending_jobs_duration_seconds(&LabelSelector{MatchLabels:"
            "map[string]string{queue: hybrid-gpu-pool,},MatchExpressions:[]LabelSelectorRequirement{},})",
            "current": {"averageValue": 0.0},
            "replicas": 5,
            "error": None,
        }
    ]
    assert [(c["type"], c["status"], c["reason"]) for c in doc["conditions"]] == [
        ("AbleToScale", "True", "SucceededRescale"),
        ("ScalingActive", "True", "ValidMetricFound"),
        ("ScalingLimited", "True", "ScaleUpLimit"),
    ]


def test_every_metric_type_parses() -> None:
    doc = yaml.safe_load(ISSUE_MANIFEST)
    doc["spec"]["metrics"] += [
        {
            "type": "Object",
            "object": {
                "describedObject": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": "dev"},
                "metric": {"name": "tidegate_queue_jobs", "selector": {"matchLabels": {"phase": "waiting"}}},
                "target": {"type": "Value", "value": "4"},
            },
        },
        {
            "type": "Pods",
            "pods": {"metric": {"name": "tidegate_node_jobs"}, "target": {"type": "AverageValue", "averageValue": 2}},
        },
        {
            "type": "Resource",
            "resource": {"name": "nvidia.com/gpu", "target": {"type": "Utilization", "averageUtilization": 75}},
        },
        {
            "type": "ContainerResource",
            "containerResource": {
                "name": "cpu",
                "container": "virtual-kubelet",
                "target": {"type": "AverageValue", "averageValue": "48"},
            },
        },
    ]
    external, queue, node, gpu, cpu = parse_hpa(doc).metrics
    assert isinstance(external, ExternalMetric)
    assert queue == ObjectMetric(
        ObjectReference("Queue", "dev", "scheduling.volcano.sh/v1beta1"),
        "tidegate_queue_jobs",
        MetricTarget("Value", value=Fraction(4)),
        LabelSelector.of({"phase": "waiting"}),
    )
    assert node == PodsMetric("tidegate_node_jobs", MetricTarget("AverageValue", average_value=Fraction(2)))
    assert gpu == ResourceMetric("nvidia.com/gpu", MetricTarget("Utilization", average_utilization=75))
    assert cpu == ContainerResourceMetric(
        "cpu", "virtual-kubelet", MetricTarget("AverageValue", average_value=Fraction(48))
    )
    # defaults.go: no metrics is cpu at 80% utilization.
    assert parse_hpa({**doc, "spec": {**doc["spec"], "metrics": None}}).metrics == (CPU_80,)


@pytest.mark.parametrize(
    ("metric", "fields"),
    [
        (
            {"type": "Pods", "pods": {"metric": {"name": "q"}, "target": {"type": "Value", "value": 1}}},
            ["pods.target.averageValue"],
        ),
        (
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 5, "averageValue": 1},
                },
            },
            ["resource.target.averageValue"],
        ),
        (
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Value", "value": 1}}},
            ["resource.target.averageUtilization"],
        ),
        (
            {
                "type": "ContainerResource",
                "containerResource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 5}},
            },
            ["containerResource.container"],
        ),
        (
            {"type": "Object", "object": {"metric": {"name": "q"}, "target": {"type": "Value", "value": 1}}},
            ["object.describedObject"],
        ),
        ({"type": "Object"}, ["object"]),
        (
            {
                "type": "Pods",
                "pods": {"metric": {"name": "q"}, "target": {"type": "AverageValue", "averageValue": 1}},
                "external": {},
            },
            ["external"],
        ),
        (
            {
                "type": "Resource",
                "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 0}},
            },
            ["resource.target.averageUtilization"],
        ),
    ],
)
def test_metric_specs_the_api_server_refuses(metric: dict[str, Any], fields: list[str]) -> None:
    doc = yaml.safe_load(ISSUE_MANIFEST)
    doc["spec"]["metrics"] = [metric]
    with pytest.raises(ManifestErrors) as caught:
        parse_hpa(doc)
    assert [e.field for e in caught.value.errors] == [f"spec.metrics[0].{f}" for f in fields]


def test_check_hpa_on_targets_the_controller_reads_differently() -> None:
    odd = ObjectMetric(ObjectReference("Queue", "dev"), "m", MetricTarget("Value", average_value=Fraction(2)))
    raw = ResourceMetric("cpu", MetricTarget("Utilization", average_value=Fraction(2)))
    object_warning, resource_warning = check_hpa(spec_of(min_replicas=1, metrics=[odd, raw]), FROM_ZERO)
    assert "FailedGetObjectMetric" in object_warning and "spec.metrics[0].object.target" in object_warning
    assert "uses averageValue" in resource_warning and "spec.metrics[1].resource.target.type" in resource_warning
    zero, _ = check_hpa(spec_of(min_replicas=0, metrics=[raw]), FROM_ZERO)
    assert "spec.minReplicas is 0 without an Object or External metric" in zero


def test_time_must_not_go_back() -> None:
    state, _ = step(HPAState(), spec_of(), 100, 2, {M: [2]})
    with pytest.raises(ValueError, match="before the previous evaluation"):
        step(state, spec_of(), 99.5, 2, {M: [2]})
    with pytest.raises(ValueError, match="current_replicas"):
        step(HPAState(), spec_of(), 0, -1, {M: [2]})


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------

policy_st = st.builds(
    HPAScalingPolicy,
    st.sampled_from(["Pods", "Percent"]),
    st.integers(1, 150),
    st.integers(1, 120),
)
rules_st = st.builds(
    HPAScalingRules,
    st.one_of(st.none(), st.integers(0, 300)),
    st.sampled_from(["Max", "Min", "Disabled"]),
    st.lists(policy_st, min_size=1, max_size=3).map(tuple),
)
behavior_st = st.one_of(st.none(), st.builds(HPABehavior, rules_st, rules_st))
steps_st = st.lists(st.tuples(st.integers(0, 90), st.one_of(st.none(), st.integers(0, 60))), min_size=1, max_size=40)


@st.composite
def scenario(draw: st.DrawFn) -> tuple[HPASpec, HPAControllerConfig, int, list[tuple[int, int | None]]]:
    min_replicas = draw(st.integers(0, 5))
    max_replicas = draw(st.integers(max(min_replicas, 1), 30))
    spec = spec_of(min_replicas=min_replicas, max_replicas=max_replicas, behavior=draw(behavior_st))
    config = HPAControllerConfig(allow_scale_from_zero=draw(st.booleans()))
    return spec, config, draw(st.integers(0, 40)), draw(steps_st)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_desired_stays_within_min_max(
    case: tuple[HPASpec, HPAControllerConfig, int, list[tuple[int, int | None]]],
) -> None:
    spec, config, current, steps = case
    hpa = HPAController(spec, config)
    now = 0
    for dt, total in steps:
        now += dt
        r = hpa.step(now, current, {} if total is None else {M: [total]})
        if r.reason == SCALING_DISABLED:
            # The one exception, as in Kubernetes: a target at 0 is left at 0, even below minReplicas.
            assert current == 0 and r.desired_replicas == 0
        else:
            assert spec.min_replicas <= r.desired_replicas <= spec.max_replicas
        current = r.desired_replicas


def _limits(rules_: HPAScalingRules, history: list[tuple[float, int]], initial: int, now: float) -> tuple[float, float]:
    """Independent oracle: the (lowest, highest) count the policies allow, each policy starting from
    the count in effect ``periodSeconds`` ago according to the actual history of changes."""

    def count_at(t: float) -> int:
        value = initial
        for at, replicas in history:
            if at <= t:
                value = replicas
        return value

    downs, ups = [], []
    for p in rules_.policies:
        start = count_at(now - p.period_seconds)
        if p.type == "Pods":
            downs.append(start - p.value)
            ups.append(start + p.value)
        else:
            downs.append(int(start * (1 - p.value / 100)))
            ups.append(math.ceil(start * (1 + p.value / 100)))
    if rules_.select_policy == "Min":
        return max(downs), min(ups)
    return min(downs), max(ups)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_changes_never_exceed_the_policies_within_a_period(
    case: tuple[HPASpec, HPAControllerConfig, int, list[tuple[int, int | None]]],
) -> None:
    spec, config, initial, steps = case
    behavior = spec.behavior or DEFAULT_BEHAVIOR
    spec = replace(spec, behavior=behavior)
    initial = min(max(initial, spec.min_replicas), spec.max_replicas)  # start inside [min, max]
    hpa = HPAController(spec, config)
    history: list[tuple[float, int]] = []
    current, now = initial, 0
    for dt, total in steps:
        now += dt
        r = hpa.step(now, current, {} if total is None else {M: [total]})
        lowest, _ = _limits(behavior.scale_down, history, initial, now)
        _, highest = _limits(behavior.scale_up, history, initial, now)
        if r.desired_replicas < current:
            assert behavior.scale_down.select_policy != "Disabled"
            assert r.desired_replicas >= lowest
        if r.desired_replicas > current:
            assert behavior.scale_up.select_policy != "Disabled"
            assert r.desired_replicas <= highest
        if r.rescale:
            history.append((now, r.desired_replicas))
        current = r.desired_replicas


@given(st.floats(min_value=0, max_value=1e15, allow_nan=False, allow_infinity=False))
def test_a_float_sample_rounds_up_to_milli_units_exactly_as_its_quantity_does(value: float) -> None:
    assert to_milli(value) == math.ceil(parse_quantity(value) * 1000)


@given(st.integers(min_value=-(10**17), max_value=10**17), st.integers(min_value=-3, max_value=3))
@example(2007, 0)  # 2.007 x 1000.0 is 2007.0000000000002 in floats: its ceiling alone would say 2008
@example(-2007, 0)
@example(4_398_046_511_103_999, 0)  # just below 2^42: the last floats read as whole milli-units by the float
@example(4_398_046_511_104_001, 0)  # just above: read through the decimal
@example(-4_398_046_511_103_999, 1)
def test_a_float_sample_a_few_ulps_from_a_whole_milli_unit_rounds_up_as_its_quantity_does(n: int, ulps: int) -> None:
    # Where the float product alone could round across the integer, to_milli must read the decimal.
    value = n / 1000
    for _ in range(abs(ulps)):
        value = math.nextafter(value, math.copysign(math.inf, ulps))
    assert to_milli(value) == math.ceil(parse_quantity(value) * 1000)


@given(st.integers(min_value=-(2**62), max_value=2**62))
def test_an_integral_float_sample_takes_the_same_milli_units_as_its_quantity(n: int) -> None:
    # Integral floats skip the decimal parse; above 2**53 their shortest repr rounds (2**60 prints as
    # 1.152921504606847e+18), which only the parse reproduces.
    value = float(n)
    assert to_milli(value) == math.ceil(parse_quantity(value) * 1000)


def _full_rate_limit(
    desired: int, current: int, spec: HPASpec, behavior: HPABehavior, state: HPAState, now: float
) -> tuple[int, str]:
    """convertDesiredReplicasWithBehaviorRate with both limits always worked out (what `_rate_limited`
    shortcuts at the bounds)."""
    ups, downs = state.scale_up_events, state.scale_down_events
    if desired > current:
        limit = max(scale_up_limit(current, ups, downs, behavior.scale_up, now), current)
        allowed, reason = (
            (limit, SCALE_UP_LIMIT) if spec.max_replicas > limit else (spec.max_replicas, TOO_MANY_REPLICAS)
        )
        if desired > allowed:
            return allowed, reason
    elif desired < current:
        limit = min(scale_down_limit(current, ups, downs, behavior.scale_down, now), current)
        allowed, reason = (
            (limit, SCALE_DOWN_LIMIT) if spec.min_replicas < limit else (spec.min_replicas, TOO_FEW_REPLICAS)
        )
        if desired < allowed:
            return allowed, reason
    return desired, DESIRED_WITHIN_RANGE


_SELECTS: list[SelectPolicy] = ["Max", "Min", "Disabled"]
_EVENTS = st.lists(st.builds(ScaleEvent, st.integers(1, 6), st.integers(0, 120).map(float)), max_size=4)


@settings(max_examples=400, deadline=None)
@given(
    st.integers(0, 40),
    st.integers(0, 40),
    st.integers(0, 12),
    st.integers(0, 20),
    st.sampled_from(_SELECTS),
    st.sampled_from(_SELECTS),
    _EVENTS,
    _EVENTS,
)
def test_rate_limit_at_the_bounds_answers_as_the_full_rule(
    desired: int,
    current: int,
    low: int,
    span: int,
    up_select: SelectPolicy,
    down_select: SelectPolicy,
    ups: list[ScaleEvent],
    downs: list[ScaleEvent],
) -> None:
    """`_rate_limited` does not work a limit out at maxReplicas (scale-up) or minReplicas (scale-down), current
    counts at, above and below the bounds included: its answer is the full rule's (fails if the shortcut took
    current == maxReplicas - 1, or answered with the limit)."""
    behavior = HPABehavior(
        scale_up=rules(("Pods", 4, 15), ("Percent", 100, 60), select=up_select),
        scale_down=rules(("Percent", 10, 60), ("Pods", 2, 15), select=down_select),
    )
    spec = spec_of(min_replicas=low, max_replicas=max(low, 1) + span, behavior=behavior)
    state = HPAState(scale_up_events=tuple(ups), scale_down_events=tuple(downs))
    got = _rate_limited(desired, current, spec, behavior, state, 100.0)
    assert got == _full_rate_limit(desired, current, spec, behavior, state, 100.0)
