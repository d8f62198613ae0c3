"""The Kubernetes HorizontalPodAutoscaler (autoscaling/v2) controller, exact and clock-free.

tidegate scales its cloud node pools (virtual-kubelet Deployments) the way a Kubernetes HPA would, so an
HPA manifest written for a real cluster means the same thing here, in the simulator and in the live
control plane. This module reimplements in plain Python what kube-controller-manager v1.34
(release-1.34) does in ``pkg/controller/podautoscaler/horizontal.go``; the per-metric arithmetic of
``replica_calculator.go`` and ``metrics/utilization.go`` is in ``hpa_metrics.py``.

1. ``reconcileAutoscaler``: the target's scale is read (AbleToScale True SucceededGetScale, or False
   FailedGetScale and nothing else happens); a target at 0 replicas is left alone (ScalingActive False
   ScalingDisabled) unless ``minReplicas`` is 0 and scaling from zero is allowed; a target above
   ``maxReplicas`` / below ``minReplicas`` is set straight to the bound, with no metrics, stabilization or
   rate limits (ScalingActive and ScalingLimited keep their previous values).
2. ``computeReplicasForMetrics``: the target's pod selector must be usable (else ScalingActive False
   InvalidSelector or AmbiguousSelector); one proposal per metric, the largest wins (ScalingActive True
   ValidMetricFound); when every metric fails, or some fail and the rest propose a scale-down, nothing
   happens and ScalingActive is False with the first failed metric's reason (FailedGetExternalMetric,
   FailedGetObjectMetric, FailedGetPodsMetric, FailedGetResourceMetric, FailedGetContainerResourceMetric)
   and message.
3. With ``spec.behavior`` set, ``normalizeDesiredReplicasWithBehaviors``: the stabilization window
   (``stabilizeRecommendationWithBehaviors``; AbleToScale ScaleUpStabilized/ScaleDownStabilized, else
   ReadyForNewScale), then the rate limits (``convertDesiredReplicasWithBehaviorRate``; ScalingLimited
   ScaleUpLimit/ScaleDownLimit/TooManyReplicas/TooFewReplicas, True when it changed the count, else False
   DesiredWithinRange) over the scale events of the last ``periodSeconds``. Without ``spec.behavior``
   Kubernetes still runs its older algorithm (``normalizeDesiredReplicas``): the maximum recommendation
   over the downscale window in both directions, and at most ``max(2 x current, 4)`` replicas per
   evaluation. ``HPASpec.behavior is None`` selects it, exactly as ``hpa.Spec.Behavior == nil`` does.
4. The rescale: AbleToScale True SucceededRescale and the scale event stored, or, when the update fails,
   False FailedUpdateScale with nothing stored. Conditions merge into the HPA's status as
   ``setConditionInList`` does: a type keeps its place and its lastTransitionTime unless its status flips.

AbleToScale's BackoffBoth, BackoffDownscale and BackoffUpscale are not set: Kubernetes stopped setting them
in 1.12, when the stabilization window replaced the up/downscale forbidden windows.

Arithmetic follows the Go code operation for operation: metric values and targets are integer
milli-units (``Quantity.MilliValue``, rounded up), ratios and Percent policies are IEEE doubles
(Python floats are the same doubles as Go's ``float64``), and conversions truncate like ``int32(x)``.
This reproduces Kubernetes' own rounding quirks, e.g. a Percent 10 scale-up from 50 replicas allows 56
(``50 * 1.1`` is ``55.000000000000007`` in binary), and a Percent 30 scale-down from 90 allows 62.

Time is an argument (seconds, any epoch), never read from a clock. Boundaries, as in the Go code:
a recommendation or scale event made exactly ``window``/``periodSeconds`` seconds before ``now`` has left
the window (``timestamp.After(cutoff)`` is strict); the older no-behavior path keeps a recommendation
that is exactly ``window`` seconds old (it tests ``Before(cutoff)``).

Scale from zero: Kubernetes only accepts ``minReplicas: 0`` with the ``HPAScaleToZero`` feature gate
(alpha, off by default) and at least one Object or External metric; with it the controller computes
metrics at 0 replicas, and ``averageValue`` metrics propose ``ceil(total / averageValue)`` because the
usage ratio ``total / (averageValue x 0)`` is infinite and so outside the tolerance. tidegate's cloud
pool needs exactly this, so ``HPAControllerConfig.allow_scale_from_zero`` models the gate; off (the
Kubernetes default) a target at 0 replicas is never scaled. A target at 0 with ``minReplicas >= 1`` is
never scaled either way: Kubernetes reads that as "autoscaling paused by the user".
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal, TypeAlias, cast

from tidegate.autoscale.hpa_metrics import (
    DEFAULT_CPU_INITIALIZATION_PERIOD_SECONDS,
    DEFAULT_INITIAL_READINESS_DELAY_SECONDS,
    DEFAULT_TOLERANCE,
    MAX_INT32,
    MIN_INT32,
    ContainerResourceMetric,
    ExternalMetric,
    LabelSelector,
    MetricInputs,
    MetricResult,
    MetricSource,
    ObjectMetric,
    PodsMetric,
    PodUsage,
    QuantityLike,
    ResourceMetric,
    TargetPod,
    external_metric_replicas,
    metric_replicas,
)
from tidegate.model.errors import FieldError, Source

PolicyType: TypeAlias = Literal["Pods", "Percent"]
SelectPolicy: TypeAlias = Literal["Max", "Min", "Disabled"]

POLICY_TYPES: Final = ("Pods", "Percent")
SELECT_POLICIES: Final = ("Max", "Min", "Disabled")

#: The largest stabilization window the Kubernetes API server accepts (validation.go).
MAX_STABILIZATION_WINDOW_SECONDS: Final = 3600
#: The largest policy period the Kubernetes API server accepts (validation.go).
MAX_PERIOD_SECONDS: Final = 1800
#: kube-controller-manager --horizontal-pod-autoscaler-downscale-stabilization (5m).
DEFAULT_DOWNSCALE_STABILIZATION_SECONDS: Final = 300
#: The Volcano metric tidegate's cloud-burst HPA scales on (seconds the queue's jobs have been pending).
PENDING_JOBS_DURATION_METRIC: Final = "volcano_queue_pending_jobs_duration_seconds"
#: What Kubernetes fills in for an HPA without metrics (defaults.go: cpu at 80% of requests).
DEFAULT_CPU_UTILIZATION: Final = 80

# Condition types and reasons, spelled as the Kubernetes HPA controller spells them.
ABLE_TO_SCALE: Final = "AbleToScale"
SCALING_ACTIVE: Final = "ScalingActive"
SCALING_LIMITED: Final = "ScalingLimited"
SUCCEEDED_GET_SCALE: Final = "SucceededGetScale"
FAILED_GET_SCALE: Final = "FailedGetScale"
SUCCEEDED_RESCALE: Final = "SucceededRescale"
FAILED_UPDATE_SCALE: Final = "FailedUpdateScale"
READY_FOR_NEW_SCALE: Final = "ReadyForNewScale"
SCALE_UP_STABILIZED: Final = "ScaleUpStabilized"
SCALE_DOWN_STABILIZED: Final = "ScaleDownStabilized"
SCALING_DISABLED: Final = "ScalingDisabled"
INVALID_SELECTOR: Final = "InvalidSelector"
AMBIGUOUS_SELECTOR: Final = "AmbiguousSelector"
VALID_METRIC_FOUND: Final = "ValidMetricFound"
FAILED_GET_EXTERNAL_METRIC: Final = ExternalMetric.FAILED
FAILED_GET_OBJECT_METRIC: Final = ObjectMetric.FAILED
FAILED_GET_PODS_METRIC: Final = PodsMetric.FAILED
FAILED_GET_RESOURCE_METRIC: Final = ResourceMetric.FAILED
FAILED_GET_CONTAINER_RESOURCE_METRIC: Final = ContainerResourceMetric.FAILED
SCALE_UP_LIMIT: Final = "ScaleUpLimit"
SCALE_DOWN_LIMIT: Final = "ScaleDownLimit"
TOO_MANY_REPLICAS: Final = "TooManyReplicas"
TOO_FEW_REPLICAS: Final = "TooFewReplicas"
DESIRED_WITHIN_RANGE: Final = "DesiredWithinRange"

_MESSAGES: Final = {
    SUCCEEDED_GET_SCALE: "the HPA controller was able to get the target's current scale",
    SCALE_UP_STABILIZED: "recent recommendations were lower than current one, "
    "applying the lowest recent recommendation",
    SCALE_DOWN_STABILIZED: "recent recommendations were higher than current one, "
    "applying the highest recent recommendation",
    READY_FOR_NEW_SCALE: "recommended size matches current size",
    SCALE_UP_LIMIT: "the desired replica count is increasing faster than the maximum scale rate",
    SCALE_DOWN_LIMIT: "the desired replica count is decreasing faster than the maximum scale rate",
    TOO_MANY_REPLICAS: "the desired replica count is more than the maximum replica count",
    TOO_FEW_REPLICAS: "the desired replica count is less than the minimum replica count",
    DESIRED_WITHIN_RANGE: "the desired count is within the acceptable range",
    SCALING_DISABLED: "scaling is disabled since the replica count of the target is zero",
    INVALID_SELECTOR: "the HPA target's scale is missing a selector",
}


# --------------------------------------------------------------------------------------------------
# Spec
# --------------------------------------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class HPAScalingPolicy:
    """One rate limit: at most ``value`` pods (or ``value`` percent) of change per ``period_seconds``."""

    type: PolicyType
    value: int
    period_seconds: int

    def __post_init__(self) -> None:
        if self.type not in POLICY_TYPES:
            raise FieldError("type", f"{self.type!r} is not one of {', '.join(POLICY_TYPES)}")
        if not _is_int(self.value) or self.value <= 0:
            raise FieldError("value", f"{self.value!r} must be an integer greater than zero")
        if not _is_int(self.period_seconds) or self.period_seconds <= 0:
            raise FieldError("periodSeconds", f"{self.period_seconds!r} must be an integer greater than zero")


@dataclass(frozen=True, slots=True)
class HPAScalingRules:
    """``spec.behavior.scaleUp`` or ``scaleDown``.

    ``stabilization_window_seconds=None`` on scale-down means "the controller's
    --horizontal-pod-autoscaler-downscale-stabilization" (300 s by default), as Kubernetes leaves it
    unset when defaulting; on scale-up Kubernetes always defaults it to 0, and None is read as 0.
    ``tolerance`` (the HPAConfigurableTolerance field) overrides the controller's 0.1 for this direction.
    """

    stabilization_window_seconds: int | None
    select_policy: SelectPolicy
    policies: tuple[HPAScalingPolicy, ...]
    tolerance: float | None = None

    def __post_init__(self) -> None:
        window = self.stabilization_window_seconds
        if window is not None and (not _is_int(window) or window < 0):
            raise FieldError("stabilizationWindowSeconds", f"{window!r} must be an integer >= 0")
        if self.select_policy not in SELECT_POLICIES:
            raise FieldError("selectPolicy", f"{self.select_policy!r} is not one of {', '.join(SELECT_POLICIES)}")
        if not self.policies:
            raise FieldError("policies", "must specify at least one Policy")
        if self.tolerance is not None and not (self.tolerance >= 0 and math.isfinite(self.tolerance)):
            raise FieldError("tolerance", f"{self.tolerance!r} must be a finite number >= 0")

    @property
    def longest_period_seconds(self) -> int:
        """The longest policy period: scale events older than this no longer limit anything."""
        return max(policy.period_seconds for policy in self.policies)


#: The scale-up rules Kubernetes fills in when ``behavior`` is set without ``scaleUp`` (defaults.go).
DEFAULT_SCALE_UP_RULES: Final = HPAScalingRules(
    stabilization_window_seconds=0,
    select_policy="Max",
    policies=(HPAScalingPolicy("Pods", 4, 15), HPAScalingPolicy("Percent", 100, 15)),
)
#: The scale-down rules Kubernetes fills in when ``behavior`` is set without ``scaleDown`` (defaults.go);
#: the window stays unset so the controller's 300 s applies.
DEFAULT_SCALE_DOWN_RULES: Final = HPAScalingRules(
    stabilization_window_seconds=None,
    select_policy="Max",
    policies=(HPAScalingPolicy("Percent", 100, 15),),
)


@dataclass(frozen=True, slots=True)
class HPABehavior:
    """``spec.behavior`` with Kubernetes' defaults filled in for whatever the manifest left out."""

    scale_up: HPAScalingRules = DEFAULT_SCALE_UP_RULES
    scale_down: HPAScalingRules = DEFAULT_SCALE_DOWN_RULES


#: ``behavior: {}``: every default (scale up by max(4 pods, 100%) per 15 s, down by 100% per 15 s
#: after a 300 s window).
DEFAULT_BEHAVIOR: Final = HPABehavior()


@dataclass(frozen=True, slots=True)
class HPASpec:
    """An autoscaling/v2 HorizontalPodAutoscaler as tidegate evaluates it.

    ``behavior=None`` is a manifest without ``spec.behavior``: Kubernetes then runs its pre-behavior
    algorithm, which is close to, but not the same as, ``DEFAULT_BEHAVIOR`` (see the module docstring).
    ``source`` is where the manifest came from, for messages naming the file.
    """

    name: str
    target_kind: str
    target_name: str
    min_replicas: int
    max_replicas: int
    metrics: tuple[MetricSource, ...]
    behavior: HPABehavior | None = None
    namespace: str = "default"
    target_api_version: str = "apps/v1"
    source: Source = field(default=Source(), compare=False)
    #: Every metric is External (samples arrive as values: nothing about pods is read).
    external_only: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not _is_int(self.min_replicas) or self.min_replicas < 0:
            raise FieldError("spec.minReplicas", f"{self.min_replicas!r} must be an integer >= 0")
        if not _is_int(self.max_replicas) or self.max_replicas < 1:
            raise FieldError("spec.maxReplicas", f"{self.max_replicas!r} must be an integer greater than 0")
        if not self.metrics:
            raise FieldError("spec.metrics", "must list at least one metric")
        object.__setattr__(self, "external_only", all(type(m) is ExternalMetric for m in self.metrics))


@dataclass(frozen=True, slots=True)
class HPAControllerConfig:
    """The kube-controller-manager settings that change the result, plus the scale-from-zero switch.

    ``allow_scale_from_zero`` models the HPAScaleToZero feature gate: with it, a target at 0 replicas
    and ``minReplicas: 0`` is evaluated like any other; without it (the Kubernetes default) it stays at 0.
    """

    tolerance: float = DEFAULT_TOLERANCE
    downscale_stabilization_seconds: int = DEFAULT_DOWNSCALE_STABILIZATION_SECONDS
    allow_scale_from_zero: bool = False
    #: --horizontal-pod-autoscaler-cpu-initialization-period and --...-initial-readiness-delay.
    cpu_initialization_period_seconds: float = DEFAULT_CPU_INITIALIZATION_PERIOD_SECONDS
    initial_readiness_delay_seconds: float = DEFAULT_INITIAL_READINESS_DELAY_SECONDS

    def __post_init__(self) -> None:
        if not (self.tolerance >= 0 and math.isfinite(self.tolerance)):
            raise ValueError(f"tolerance {self.tolerance!r} must be a finite number >= 0")
        if not _is_int(self.downscale_stabilization_seconds) or self.downscale_stabilization_seconds < 0:
            raise ValueError("downscale_stabilization_seconds must be an integer >= 0")


DEFAULT_CONFIG: Final = HPAControllerConfig()


# --------------------------------------------------------------------------------------------------
# State, status and result
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Recommendation:
    """An unstabilized recommendation (what the metrics asked for) and when it was made."""

    replicas: int
    at: float


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """A change the HPA applied: ``change`` replicas (always > 0) added or removed at ``at``.

    ``outdated`` marks an event older than the longest policy period of its direction at the time the
    next event of that direction was stored; such a slot is reused, as in ``storeScaleEvent``.
    """

    change: int
    at: float
    outdated: bool = False


@dataclass(frozen=True, slots=True)
class HPACondition:
    """A status condition. In ``HPAResult.conditions``, as set in one evaluation (no time); in
    ``HPAStatus.conditions``, with ``last_transition_time``: when its status last changed."""

    type: str
    status: bool
    reason: str
    message: str
    last_transition_time: float | None = None


@dataclass(frozen=True, slots=True)
class HPAStatus:
    """The HPA object's ``status`` as the controller last wrote it: replicas, the last rescale, each
    metric's current value (``currentMetrics``) and the conditions, in the order first set."""

    current_replicas: int = 0
    desired_replicas: int = 0
    last_scale_time: float | None = None
    current_metrics: tuple[MetricResult, ...] = ()
    conditions: tuple[HPACondition, ...] = ()

    def condition(self, type_: str) -> HPACondition | None:
        """The condition of that type, if it was ever set."""
        return next((c for c in self.conditions if c.type == type_), None)


@dataclass(frozen=True, slots=True)
class HPAState:
    """What one HPA carries between evaluations: the controller's memory (its maps keyed by HPA) and the
    HPA object's status, which the controller reads back every sync."""

    recommendations: tuple[Recommendation, ...] = ()
    scale_up_events: tuple[ScaleEvent, ...] = ()
    scale_down_events: tuple[ScaleEvent, ...] = ()
    last_evaluated_at: float | None = None
    status: HPAStatus = HPAStatus()


@dataclass(frozen=True, slots=True)
class HPAResult:
    """The outcome of one evaluation.

    ``desired_replicas`` is what the target's replicas are now (``current_replicas`` when nothing changes,
    or when the update failed). ``reason`` is the most telling condition reason: ``FailedGetScale``,
    ``ScalingDisabled``, ``InvalidSelector``/``AmbiguousSelector``, a ``FailedGet*Metric``,
    ``TooManyReplicas``/``TooFewReplicas`` (also for a target outside [min, max]),
    ``ScaleUpLimit``/``ScaleDownLimit``, ``ScaleUpStabilized``/``ScaleDownStabilized``, ``FailedUpdateScale``
    or ``DesiredWithinRange``. ``conditions`` lists the conditions Kubernetes sets in this evaluation (the
    last value of each type set); ``HPAState.status`` has them merged with the ones kept from before.
    """

    desired_replicas: int
    current_replicas: int
    reason: str
    message: str
    metric_replicas: int | None = None
    stabilized_replicas: int | None = None
    metrics: tuple[MetricResult, ...] = ()
    conditions: tuple[HPACondition, ...] = ()

    @property
    def rescale(self) -> bool:
        """Whether the target's replica count changes."""
        return self.desired_replicas != self.current_replicas


# --------------------------------------------------------------------------------------------------
# Queue-labelled External samples
# --------------------------------------------------------------------------------------------------


def queue_metric_values(
    spec: HPASpec,
    per_queue: Mapping[str, QuantityLike],
    metric_name: str = PENDING_JOBS_DURATION_METRIC,
) -> dict[str, tuple[QuantityLike, ...]]:
    """``step``'s ``metric_values`` from one value per Volcano queue of a queue-labelled metric.

    Each value becomes a sample labelled ``{"queue": <name>}`` (how Volcano exports
    ``volcano_queue_pending_jobs_duration_seconds``); every External metric of ``spec`` with that name
    gets the samples its selector matches, keyed by ``metric.key``. A metric that matches no queue gets
    no entry, which the HPA treats as "no metrics returned" and so takes no action on it.
    """
    return selected_values(queue_metric_selection(spec, per_queue, metric_name), per_queue)


#: Which queues each External metric samples: (metric key, queue names in name order), one per metric.
QueueSelection: TypeAlias = tuple[tuple[str, tuple[str, ...]], ...]


def queue_metric_selection(
    spec: HPASpec, queues: Iterable[str], metric_name: str = PENDING_JOBS_DURATION_METRIC
) -> QueueSelection:
    """The queues whose values each External metric of ``spec`` named ``metric_name`` samples, by metric
    key (metrics that match no queue left out): what ``queue_metric_values`` reads. A caller that asks
    every sync over the same queues works it out once and passes it to ``selected_values``."""
    names = tuple(sorted(queues))
    selection = []
    for metric in spec.metrics:
        if not isinstance(metric, ExternalMetric) or metric.name != metric_name:
            continue
        matched = _queues_matching(metric.selector, names)
        if matched:
            selection.append((metric.key, matched))
    return tuple(selection)


def selected_values(
    selection: QueueSelection, per_queue: Mapping[str, QuantityLike]
) -> dict[str, tuple[QuantityLike, ...]]:
    """``step``'s ``metric_values``: each selected metric's samples, one value a queue of its selection."""
    return {key: tuple(per_queue[q] for q in queues) for key, queues in selection}


@functools.lru_cache(maxsize=256)
def _queues_matching(selector: LabelSelector | None, names: tuple[str, ...]) -> tuple[str, ...]:
    """The queues whose series (labelled ``queue``) the selector matches; no selector lists them all, as
    the external metrics API lists every series then."""
    if selector is None:
        return names
    return tuple(q for q in names if selector.matches({"queue": q}))


# --------------------------------------------------------------------------------------------------
# Normalization (horizontal.go)
# --------------------------------------------------------------------------------------------------


def _changes_in_period(period_seconds: int, events: Iterable[ScaleEvent], now: float) -> int:
    # getReplicasChangePerPeriod: events strictly after now - period.
    cutoff = now - period_seconds
    return sum(event.change for event in events if event.at > cutoff)


def scale_up_limit(
    current: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    rules: HPAScalingRules,
    now: float,
) -> int:
    """The most replicas the scale-up rules allow now (calculateScaleUpLimitWithScalingRules).

    Each policy starts from the replica count at the start of its period (current minus what was added
    plus what was removed within it) and adds ``value`` pods or ``ceil(start x (1 + value/100))``;
    ``Max`` takes the largest proposal, ``Min`` the smallest, ``Disabled`` allows no change. From 0 a
    Percent policy allows ``ceil(0 x ...) = 0``.
    """
    if rules.select_policy == "Disabled":
        return current
    pick_min = rules.select_policy == "Min"
    result = MAX_INT32 if pick_min else MIN_INT32
    for policy in rules.policies:
        start = (
            current
            - _changes_in_period(policy.period_seconds, up_events, now)
            + _changes_in_period(policy.period_seconds, down_events, now)
        )
        if policy.type == "Pods":
            proposed = start + policy.value
        else:
            proposed = math.ceil(float(start) * (1 + float(policy.value) / 100))
        result = min(result, proposed) if pick_min else max(result, proposed)
    return result


def scale_down_limit(
    current: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    rules: HPAScalingRules,
    now: float,
) -> int:
    """The fewest replicas the scale-down rules allow now (calculateScaleDownLimitWithBehaviors).

    Each policy removes ``value`` pods, or keeps ``int(start x (1 - value/100))`` (truncated), from the
    replica count at the start of its period; ``Max`` (most change) takes the smallest count, ``Min``
    the largest, ``Disabled`` allows no change.
    """
    if rules.select_policy == "Disabled":
        return current
    pick_max = rules.select_policy == "Min"
    result = MIN_INT32 if pick_max else MAX_INT32
    for policy in rules.policies:
        start = (
            current
            - _changes_in_period(policy.period_seconds, up_events, now)
            + _changes_in_period(policy.period_seconds, down_events, now)
        )
        if policy.type == "Pods":
            proposed = start - policy.value
        else:
            proposed = int(float(start) * (1 - float(policy.value) / 100))
        result = max(result, proposed) if pick_max else min(result, proposed)
    return result


def _store_in_slot(
    items: tuple[Recommendation, ...], slot: int | None, item: Recommendation
) -> tuple[Recommendation, ...]:
    if slot is None:
        return (*items, item)
    return (*items[:slot], item, *items[slot + 1 :])


def _stabilize_with_behavior(
    recommendations: tuple[Recommendation, ...],
    desired: int,
    current: int,
    up_window: int,
    down_window: int,
    now: float,
) -> tuple[int, str, tuple[Recommendation, ...]]:
    # stabilizeRecommendationWithBehaviors: the lowest recommendation of the scale-up window is a
    # floor, the highest of the scale-down window a ceiling, and the current count is moved into
    # [floor, ceiling]. The new recommendation replaces one that left both windows, or is appended.
    up_cutoff = now - up_window
    down_cutoff = now - down_window
    floor = ceiling = desired
    obsolete: int | None = None
    for i, rec in enumerate(recommendations):  # runs every sync over the whole window: no calls inside
        at = rec.at
        if at > up_cutoff:
            if rec.replicas < floor:
                floor = rec.replicas
        elif at < up_cutoff and at < down_cutoff:
            obsolete = i
        if at > down_cutoff and rec.replicas > ceiling:
            ceiling = rec.replicas
    stabilized = min(max(current, floor), ceiling)
    reason = SCALE_UP_STABILIZED if desired >= current else SCALE_DOWN_STABILIZED
    return stabilized, reason, _store_in_slot(recommendations, obsolete, Recommendation(desired, now))


def _stabilize_legacy(
    recommendations: tuple[Recommendation, ...], desired: int, window: int, now: float
) -> tuple[int, tuple[Recommendation, ...]]:
    # stabilizeRecommendation (no spec.behavior): the highest recommendation not older than the window,
    # in either direction; "not older" includes a recommendation exactly `window` seconds old.
    cutoff = now - window
    highest = desired
    obsolete: int | None = None
    for i, rec in enumerate(recommendations):
        if rec.at < cutoff:
            obsolete = i
        elif rec.replicas > highest:
            highest = rec.replicas
    return highest, _store_in_slot(recommendations, obsolete, Recommendation(desired, now))


def _rate_limited(
    desired: int,
    current: int,
    spec: HPASpec,
    behavior: HPABehavior,
    state: HPAState,
    now: float,
) -> tuple[int, str]:
    # convertDesiredReplicasWithBehaviorRate. A scale-up limit is at least the current count, so from
    # maxReplicas or above the answer is maxReplicas, TooManyReplicas, whatever the limit (and from minReplicas
    # or below a scale-down's is minReplicas, TooFewReplicas): the limit is not worked out. An HPA pinned at
    # its maximum by a long backlog is there every sync (tests/test_hpa.py holds this to the full rule).
    if desired > current:
        if current >= spec.max_replicas:
            return spec.max_replicas, TOO_MANY_REPLICAS
        limit = scale_up_limit(current, state.scale_up_events, state.scale_down_events, behavior.scale_up, now)
        limit = max(limit, current)
        if spec.max_replicas > limit:
            allowed, reason = limit, SCALE_UP_LIMIT
        else:
            allowed, reason = spec.max_replicas, TOO_MANY_REPLICAS
        if desired > allowed:
            return allowed, reason
    elif desired < current:
        if current <= spec.min_replicas:
            return spec.min_replicas, TOO_FEW_REPLICAS
        limit = scale_down_limit(current, state.scale_up_events, state.scale_down_events, behavior.scale_down, now)
        limit = min(limit, current)
        if spec.min_replicas < limit:
            allowed, reason = limit, SCALE_DOWN_LIMIT
        else:
            allowed, reason = spec.min_replicas, TOO_FEW_REPLICAS
        if desired < allowed:
            return allowed, reason
    return desired, DESIRED_WITHIN_RANGE


def _legacy_limited(desired: int, current: int, spec: HPASpec) -> tuple[int, str]:
    # convertDesiredReplicasWithRules: at most max(2 x current, 4) per evaluation, then [min, max].
    up_limit = int(max(2.0 * float(current), 4.0))
    if spec.max_replicas > up_limit:
        allowed, reason = up_limit, SCALE_UP_LIMIT
    else:
        allowed, reason = spec.max_replicas, TOO_MANY_REPLICAS
    if desired < spec.min_replicas:
        return spec.min_replicas, TOO_FEW_REPLICAS
    if desired > allowed:
        return allowed, reason
    return desired, DESIRED_WITHIN_RANGE


def _mark_and_store(events: tuple[ScaleEvent, ...], longest: int, change: int, now: float) -> tuple[ScaleEvent, ...]:
    # storeScaleEvent: flag events older than the direction's longest period, reuse the last such slot.
    cutoff = now - longest
    marked = [ScaleEvent(e.change, e.at, True) if e.at < cutoff else e for e in events]
    slot = max((i for i, e in enumerate(marked) if e.outdated), default=None)
    new = ScaleEvent(change, now)
    if slot is None:
        marked.append(new)
    else:
        marked[slot] = new
    return tuple(marked)


def _record_scale_event(state: HPAState, behavior: HPABehavior, previous: int, new: int, now: float) -> HPAState:
    if new > previous:
        events = _mark_and_store(state.scale_up_events, behavior.scale_up.longest_period_seconds, new - previous, now)
        return replace(state, scale_up_events=events)
    events = _mark_and_store(state.scale_down_events, behavior.scale_down.longest_period_seconds, previous - new, now)
    return replace(state, scale_down_events=events)


def _tolerances(spec: HPASpec, config: HPAControllerConfig) -> tuple[float, float]:
    down = up = config.tolerance
    if spec.behavior is not None:
        if spec.behavior.scale_down.tolerance is not None:
            down = spec.behavior.scale_down.tolerance
        if spec.behavior.scale_up.tolerance is not None:
            up = spec.behavior.scale_up.tolerance
    return down, up


def _condition(type_: str, status: bool, reason: str, message: str | None = None) -> HPACondition:
    if message is None:
        return _standard_condition(type_, status, reason)
    return HPACondition(type_, status, reason, message)


@functools.lru_cache(maxsize=128)
def _standard_condition(type_: str, status: bool, reason: str) -> HPACondition:
    """A condition with its reason's standard message (immutable: one object per kind, made once)."""
    return HPACondition(type_, status, reason, _MESSAGES[reason])


@functools.lru_cache(maxsize=128)
def _metric_found(metric: str) -> HPACondition:
    return HPACondition(
        SCALING_ACTIVE,
        True,
        VALID_METRIC_FOUND,
        f"the HPA was able to successfully calculate a replica count from {metric}",
    )


@functools.lru_cache(maxsize=128)
def _rescaled(desired: int) -> HPACondition:
    return HPACondition(
        ABLE_TO_SCALE, True, SUCCEEDED_RESCALE, f"the HPA controller was able to update the target scale to {desired}"
    )


def _set_conditions(
    existing: tuple[HPACondition, ...], updates: Sequence[HPACondition], now: float
) -> tuple[HPACondition, ...]:
    """setConditionInList for each update in turn: a new type is appended; a known one keeps its place and
    takes the update's status, reason and message, its lastTransitionTime moving to ``now`` only when the
    status changes."""
    if len(existing) == len(updates):
        # Most syncs set every type again in its place, most of them unchanged: one plain pass, no copy.
        aligned = unchanged = True
        for old, update in zip(existing, updates, strict=True):
            if old.type != update.type:
                aligned = False
                break
            if unchanged and not (
                old.status is update.status and old.reason == update.reason and old.message == update.message
            ):
                unchanged = False
        if aligned and unchanged:
            return existing
    out: list[HPACondition] | None = None  # a copy made on the first change
    for update in updates:
        current = existing if out is None else out
        for i, old in enumerate(current):
            if old.type == update.type:
                if old.status is update.status and old.reason == update.reason and old.message == update.message:
                    break
                since = now if old.status is not update.status else old.last_transition_time
                if out is None:
                    out = list(existing)
                out[i] = HPACondition(update.type, update.status, update.reason, update.message, since)
                break
        else:
            if out is None:
                out = list(existing)
            out.append(HPACondition(update.type, update.status, update.reason, update.message, now))
    return existing if out is None else tuple(out)


def _by_type(*conditions: HPACondition) -> tuple[HPACondition, ...]:
    """The conditions of one evaluation in the order each type was first set, each at its last value."""
    last: dict[str, HPACondition] = {}
    for condition in conditions:
        last[condition.type] = condition
    return tuple(last.values())


# --------------------------------------------------------------------------------------------------
# One evaluation
# --------------------------------------------------------------------------------------------------

#: What a failed scale update says (the host refusing it): given (current replicas, desired), an error
#: message, or None when the update succeeds.
UpdateScale: TypeAlias = Callable[[int, int], str | None]


def step(
    state: HPAState,
    spec: HPASpec,
    now: float,
    current_replicas: int,
    metric_values: Mapping[str, Sequence[QuantityLike]],
    *,
    config: HPAControllerConfig = DEFAULT_CONFIG,
    status_replicas: int | None = None,
    ready_replicas: int | None = None,
    pods: Sequence[TargetPod] | None = None,
    objects: Mapping[str, QuantityLike] | None = None,
    pod_values: Mapping[str, Mapping[str, QuantityLike]] | None = None,
    usage: Mapping[str, PodUsage] | None = None,
    scale_error: str | None = None,
    selector_error: tuple[str, str] | None = None,
    update_scale: UpdateScale | None = None,
) -> tuple[HPAState, HPAResult]:
    """One HPA evaluation (``reconcileAutoscaler``) at time ``now``; returns the new state and result.

    ``current_replicas`` is the target's ``spec.replicas``; ``status_replicas`` (pods that exist and are
    not terminating, default ``current_replicas``) is what ``averageValue`` metrics divide by. What the
    metrics read: ``metric_values`` maps each External metric's ``key`` (``name{selector}``) or plain
    ``name`` to the samples the external metrics API returns for it; ``pods`` are the pods the target's
    selector lists (Pods and Resource metrics need them; value metrics count their Running and Ready ones,
    or take ``ready_replicas``, default ``status_replicas``, when they are not listed); ``objects`` maps
    ``ObjectMetric.key`` to the object's value; ``pod_values`` maps ``PodsMetric.key`` to each pod's value;
    ``usage`` is the resource metrics API's answer by pod name. A metric whose samples are absent fails as
    Kubernetes' does. ``scale_error`` is the error reading the target's scale failed with;
    ``selector_error`` a (reason, message) that makes the target's pod selector unusable (InvalidSelector,
    AmbiguousSelector); ``update_scale`` says whether setting the target's replicas fails (default: it
    succeeds). The new state records the rescale only when it succeeded; ``now`` must not go back in time.
    """
    if not _is_int(current_replicas) or current_replicas < 0:
        raise ValueError(f"current_replicas {current_replicas!r} must be an integer >= 0")
    if not math.isfinite(now):
        raise ValueError(f"now {now!r} must be a finite number of seconds")
    if state.last_evaluated_at is not None and now < state.last_evaluated_at:
        raise ValueError(f"now {now} is before the previous evaluation at {state.last_evaluated_at}")
    status = current_replicas if status_replicas is None else status_replicas
    ready = status if ready_replicas is None else ready_replicas
    if status < 0 or ready < 0:
        raise ValueError("status_replicas and ready_replicas must be >= 0")
    old = state.status
    if scale_error is not None:
        message = f"the HPA controller was unable to get the target's current scale: {scale_error}"
        unread = HPACondition(ABLE_TO_SCALE, False, FAILED_GET_SCALE, message)
        written = replace(old, conditions=_set_conditions(old.conditions, (unread,), now))
        result = HPAResult(current_replicas, current_replicas, FAILED_GET_SCALE, message, conditions=(unread,))
        return replace(state, last_evaluated_at=now, status=written), result

    # recordInitialRecommendation: the first evaluation remembers the current size.
    recommendations = state.recommendations or (Recommendation(current_replicas, now),)
    state = HPAState(recommendations, state.scale_up_events, state.scale_down_events, now, old)
    current = current_replicas
    got_scale = _standard_condition(ABLE_TO_SCALE, True, SUCCEEDED_GET_SCALE)

    if current == 0 and (spec.min_replicas != 0 or not config.allow_scale_from_zero):
        message = _MESSAGES[SCALING_DISABLED]
        if spec.min_replicas == 0:
            message += " (scaling up from zero needs allow_scale_from_zero: Kubernetes' HPAScaleToZero gate)"
        conditions = (got_scale, _condition(SCALING_ACTIVE, False, SCALING_DISABLED, message))
        result = HPAResult(0, 0, SCALING_DISABLED, message, conditions=conditions)
        return _settled(state, result, now, rescaled=False), result
    if current > spec.max_replicas or current < spec.min_replicas:
        above = current > spec.max_replicas
        desired = spec.max_replicas if above else spec.min_replicas
        message = f"Current number of replicas {'above Spec.MaxReplicas' if above else 'below Spec.MinReplicas'}"
        result = HPAResult(
            desired_replicas=desired,
            current_replicas=current,
            reason=TOO_MANY_REPLICAS if above else TOO_FEW_REPLICAS,
            message=f"{message}: {current} -> {desired}",
            conditions=(got_scale,),
        )
        return _rescale(state, spec, result, now, update_scale)
    if selector_error is not None:
        reason, message = selector_error
        conditions = (got_scale, HPACondition(SCALING_ACTIVE, False, reason, message))
        result = HPAResult(current, current, reason, message, conditions=conditions)
        return _settled(state, result, now, rescaled=False, keep_desired=True), result

    # computeReplicasForMetrics
    tolerances = _tolerances(spec, config)
    if spec.external_only and pods is None:
        results = tuple(
            external_metric_replicas(
                metric,
                _samples_for(metric, metric_values),
                spec_replicas=current,
                status_replicas=status,
                ready_replicas=ready,
                tolerances=tolerances,
                namespace=spec.namespace,
            )
            for metric in cast(tuple[ExternalMetric, ...], spec.metrics)
        )
    else:
        inputs = MetricInputs(
            current,
            status,
            ready,
            None if pods is None else tuple(pods),
            objects or {},
            pod_values or {},
            usage or {},
            spec.namespace,
            now,
            tolerances,
            config.cpu_initialization_period_seconds,
            config.initial_readiness_delay_seconds,
        )
        results = tuple(metric_replicas(metric, inputs, metric_values) for metric in spec.metrics)
    proposal = 0
    proposer: MetricResult | None = None
    for metric_result in results:
        if metric_result.replicas is None:
            continue
        if proposal == 0 or metric_result.replicas > proposal:
            proposal, proposer = metric_result.replicas, metric_result
    failed = [r for r in results if r.error is not None]
    if len(failed) == len(results) or (failed and proposal < current):
        first = failed[0]
        message = f"the HPA was unable to compute the replica count: {first.error}"
        conditions = (got_scale, HPACondition(SCALING_ACTIVE, False, first.reason, message))
        result = HPAResult(current, current, first.reason, message, metrics=results, conditions=conditions)
        return _settled(state, result, now, rescaled=False, keep_desired=True), result
    assert proposer is not None
    active = _metric_found(str(proposer.metric))
    metric_desired = max(proposal, 0)

    if spec.behavior is None:
        stabilized, recommendations = _stabilize_legacy(
            state.recommendations, metric_desired, config.downscale_stabilization_seconds, now
        )
        stabilized_reason = SCALE_DOWN_STABILIZED
        desired, limit_reason = _legacy_limited(stabilized, current, spec)
    else:
        behavior = spec.behavior
        up_window = behavior.scale_up.stabilization_window_seconds or 0
        down_window = behavior.scale_down.stabilization_window_seconds
        if down_window is None:
            down_window = config.downscale_stabilization_seconds
        stabilized, stabilized_reason, recommendations = _stabilize_with_behavior(
            state.recommendations, metric_desired, current, up_window, down_window, now
        )
        desired, limit_reason = _rate_limited(stabilized, current, spec, behavior, state, now)
    state = HPAState(recommendations, state.scale_up_events, state.scale_down_events, now, old)

    able_reason = stabilized_reason if stabilized != metric_desired else READY_FOR_NEW_SCALE
    if desired != stabilized:
        reason = limit_reason
    elif stabilized != metric_desired:
        reason = able_reason
    else:
        reason = DESIRED_WITHIN_RANGE
    direction = (
        f"{proposer.metric} above target"
        if metric_desired > current
        else "All metrics below target"
        if metric_desired < current
        else "metrics at target"
    )
    message = (
        f"{reason}: {_MESSAGES[reason]}; {direction}: metrics propose {metric_desired}, "
        f"stabilized {stabilized}, replicas {current} -> {desired}"
    )
    result = HPAResult(
        desired_replicas=desired,
        current_replicas=current,
        reason=reason,
        message=message,
        metric_replicas=metric_desired,
        stabilized_replicas=stabilized,
        metrics=results,
        conditions=(
            _condition(ABLE_TO_SCALE, True, able_reason),
            active,
            _condition(SCALING_LIMITED, desired != stabilized, limit_reason),
        ),
    )
    return _rescale(state, spec, result, now, update_scale)


def _samples_for(
    metric: ExternalMetric, metric_values: Mapping[str, Sequence[QuantityLike]]
) -> Sequence[QuantityLike] | None:
    samples = metric_values.get(metric.key)
    return metric_values.get(metric.name) if samples is None else samples


def _rescale(
    state: HPAState, spec: HPASpec, result: HPAResult, now: float, update_scale: UpdateScale | None
) -> tuple[HPAState, HPAResult]:
    """The end of reconcileAutoscaler: set the target's replicas if they change (AbleToScale
    SucceededRescale and the scale event stored, or FailedUpdateScale and nothing stored), then the
    status."""
    current, desired = result.current_replicas, result.desired_replicas
    if desired == current:
        return _settled(state, result, now, rescaled=False), result
    error = update_scale(current, desired) if update_scale is not None else None
    if error is not None:
        message = f"the HPA controller was unable to update the target scale: {error}"
        refused = HPACondition(ABLE_TO_SCALE, False, FAILED_UPDATE_SCALE, message)
        result = replace(
            result,
            desired_replicas=current,
            reason=FAILED_UPDATE_SCALE,
            message=f"{message} (wanted {current} -> {desired}: {result.reason})",
            conditions=_by_type(*result.conditions, refused),
        )
        return _settled(state, result, now, rescaled=False, keep_desired=True), result
    if spec.behavior is not None:
        state = _record_scale_event(state, spec.behavior, current, desired, now)
    result = replace(result, conditions=_by_type(*result.conditions, _rescaled(desired)))
    return _settled(state, result, now, rescaled=True), result


def _settled(state: HPAState, result: HPAResult, now: float, *, rescaled: bool, keep_desired: bool = False) -> HPAState:
    """The state with the HPA's status written as this evaluation leaves it (setStatus, or
    setCurrentReplicasAndMetricsInStatus when the metrics or the update failed: the previous desired count
    stays), its conditions merged in."""
    old = state.status
    status = HPAStatus(
        result.current_replicas,
        old.desired_replicas if keep_desired else result.desired_replicas,
        now if rescaled else old.last_scale_time,
        result.metrics,
        _set_conditions(old.conditions, result.conditions, now),
    )
    # Built directly, not with dataclasses.replace: this runs every sync of a simulated month.
    events = state.scale_up_events, state.scale_down_events
    return HPAState(state.recommendations, *events, state.last_evaluated_at, status)


def status_document(status: HPAStatus) -> dict[str, Any]:
    """The status as JSON-ready data, named as in ``kubectl get hpa -o yaml`` (``currentMetrics`` values in
    units, not milli-units; condition statuses "True"/"False"; times in the clock's seconds)."""
    return {
        "currentReplicas": status.current_replicas,
        "desiredReplicas": status.desired_replicas,
        "lastScaleTime": status.last_scale_time,
        "currentMetrics": [_metric_document(m) for m in status.current_metrics],
        "conditions": [
            {
                "type": c.type,
                "status": "True" if c.status else "False",
                "reason": c.reason,
                "message": c.message,
                "lastTransitionTime": c.last_transition_time,
            }
            for c in status.conditions
        ],
    }


def status_from_document(doc: Mapping[str, Any], metrics: Sequence[MetricSource]) -> HPAStatus:
    """The status ``status_document`` wrote, read back (a store's copy): its ``currentMetrics`` are taken as
    the given metrics' (in order; none if they no longer match)."""
    shown = list(doc.get("currentMetrics") or ())
    same = len(shown) == len(metrics) and all(
        d["type"] == m.TYPE and str(m) == d["metric"] for m, d in zip(metrics, shown, strict=True)
    )
    results = tuple(
        MetricResult(
            metric,
            d["replicas"],
            next((round(v * 1000) for k, v in d["current"].items() if k != "averageUtilization"), None),
            d["error"],
            d["current"].get("averageUtilization"),
        )
        for metric, d in (zip(metrics, shown, strict=True) if same else ())
    )
    conditions = tuple(
        HPACondition(c["type"], c["status"] == "True", c["reason"], c["message"], c["lastTransitionTime"])
        for c in doc.get("conditions") or ()
    )
    return HPAStatus(doc["currentReplicas"], doc["desiredReplicas"], doc["lastScaleTime"], results, conditions)


def _metric_document(result: MetricResult) -> dict[str, Any]:
    metric = result.metric
    current: dict[str, Any] = {}
    if result.current_milli is not None:
        per_pod = (
            metric.target.per_pod
            if isinstance(metric, ExternalMetric)
            else metric.uses_average
            if isinstance(metric, ObjectMetric)
            else True
        )
        current["averageValue" if per_pod else "value"] = result.current_milli / 1000
    if result.utilization is not None:
        current["averageUtilization"] = result.utilization
    return {
        "type": metric.TYPE,
        "metric": str(metric),
        "current": current,
        "replicas": result.replicas,
        "error": result.error,
    }


class HPAController:
    """One HPA with its memory: a thin stateful wrapper around ``step`` for callers that keep no state.

    Still clock-free: every call passes ``now``. ``spec`` may be replaced between calls (an edited
    HPA keeps its recommendations, scale events and status, as in Kubernetes).
    """

    def __init__(
        self,
        spec: HPASpec,
        config: HPAControllerConfig = DEFAULT_CONFIG,
        state: HPAState | None = None,
    ) -> None:
        self.spec = spec
        self.config = config
        self._state = state if state is not None else HPAState()

    @property
    def state(self) -> HPAState:
        """The memory after the last evaluation (an immutable snapshot; save it to resume later)."""
        return self._state

    @property
    def status(self) -> HPAStatus:
        """The HPA's status as the last evaluation wrote it (``kubectl describe hpa``'s conditions)."""
        return self._state.status

    def step(
        self,
        now: float,
        current_replicas: int,
        metric_values: Mapping[str, Sequence[QuantityLike]],
        *,
        status_replicas: int | None = None,
        ready_replicas: int | None = None,
        pods: Sequence[TargetPod] | None = None,
        objects: Mapping[str, QuantityLike] | None = None,
        pod_values: Mapping[str, Mapping[str, QuantityLike]] | None = None,
        usage: Mapping[str, PodUsage] | None = None,
        scale_error: str | None = None,
        selector_error: tuple[str, str] | None = None,
        update_scale: UpdateScale | None = None,
    ) -> HPAResult:
        """Evaluate at ``now`` (see the module-level ``step``) and remember the outcome."""
        self._state, result = step(
            self._state,
            self.spec,
            now,
            current_replicas,
            metric_values,
            config=self.config,
            status_replicas=status_replicas,
            ready_replicas=ready_replicas,
            pods=pods,
            objects=objects,
            pod_values=pod_values,
            usage=usage,
            scale_error=scale_error,
            selector_error=selector_error,
            update_scale=update_scale,
        )
        return result


# --------------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------------


def _metric_path(i: int, metric: MetricSource) -> str:
    member = {"ContainerResource": "containerResource"}.get(metric.TYPE, metric.TYPE.lower())
    return f"spec.metrics[{i}].{member}.target"


def check_hpa(spec: HPASpec, config: HPAControllerConfig = DEFAULT_CONFIG) -> list[str]:
    """Warnings for an HPA that is well-formed but will not behave as its author most likely expects.

    Covers what the Kubernetes API server would reject (so the same manifest fails ``kubectl apply``)
    and valid settings with a surprising effect, e.g. rules that can never scale up from 0 replicas, or a
    target whose ``type`` the controller ignores or fails on.
    """
    warnings: list[str] = []
    if spec.max_replicas < spec.min_replicas:
        warnings.append(
            f"spec.maxReplicas ({spec.max_replicas}) is below spec.minReplicas ({spec.min_replicas}): "
            "the Kubernetes API server rejects this, and the replica count would alternate between the "
            "two bounds (above maxReplicas it is set to maxReplicas, below minReplicas to minReplicas)"
        )
    if spec.min_replicas == 0 and not config.allow_scale_from_zero:
        warnings.append(
            "spec.minReplicas is 0: the HPA can scale the target down to 0 but, at 0 replicas, scaling is "
            "disabled and it never scales back up; enable allow_scale_from_zero (in Kubernetes, the "
            "HPAScaleToZero feature gate, without which the API server rejects minReplicas 0)"
        )
    if spec.min_replicas == 0 and not any(isinstance(m, ExternalMetric | ObjectMetric) for m in spec.metrics):
        warnings.append(
            "spec.minReplicas is 0 without an Object or External metric: the Kubernetes API server rejects "
            "this, and at 0 replicas the other metrics have no pods to read, so the target never scales up again"
        )
    for i, metric in enumerate(spec.metrics):
        target, path = metric.target, _metric_path(i, metric)
        if isinstance(metric, ExternalMetric):
            used = "averageValue" if target.per_pod else "value"
            if target.type != ("AverageValue" if target.per_pod else "Value"):
                warnings.append(
                    f"{path}.type is {target.type} but the controller ignores the type of External metric "
                    f"targets and uses {used} ({'total / replicas' if target.per_pod else 'the total'} "
                    "against the target) because that field is set"
                )
        elif isinstance(metric, ObjectMetric):
            if not (metric.uses_value or metric.uses_average):
                warnings.append(
                    f"{path}: an Object metric uses value with type Value and averageValue with type AverageValue; "
                    f"type {target.type} with {'value' if target.value is not None else 'averageValue'} makes every "
                    "evaluation fail (ScalingActive False, FailedGetObjectMetric)"
                )
            elif target.value is not None and target.average_value is not None:
                warnings.append(f"{path}: both value and averageValue are set; type {target.type} uses only one")
        elif isinstance(metric, ResourceMetric | ContainerResourceMetric):
            used = "averageValue" if target.average_value is not None else "averageUtilization"
            if target.type != ("AverageValue" if target.average_value is not None else "Utilization"):
                warnings.append(
                    f"{path}.type is {target.type} but the controller ignores the type of {metric.TYPE} metric "
                    f"targets and uses {used} because that field is set"
                )
    if spec.behavior is None:
        return warnings
    for direction, rules in (("scaleUp", spec.behavior.scale_up), ("scaleDown", spec.behavior.scale_down)):
        path = f"spec.behavior.{direction}"
        window = rules.stabilization_window_seconds
        if window is not None and window > MAX_STABILIZATION_WINDOW_SECONDS:
            warnings.append(
                f"{path}.stabilizationWindowSeconds is {window}: more than the "
                f"{MAX_STABILIZATION_WINDOW_SECONDS} s the Kubernetes API server accepts"
            )
        for j, policy in enumerate(rules.policies):
            if policy.period_seconds > MAX_PERIOD_SECONDS:
                warnings.append(
                    f"{path}.policies[{j}].periodSeconds is {policy.period_seconds}: more than the "
                    f"{MAX_PERIOD_SECONDS} s the Kubernetes API server accepts"
                )
    up = spec.behavior.scale_up
    if up.select_policy == "Disabled":
        warnings.append(
            "spec.behavior.scaleUp.selectPolicy is Disabled: the HPA never adds replicas, whatever the "
            "metrics say (only a target below minReplicas is raised to it)"
        )
    elif spec.min_replicas == 0 and scale_up_limit(0, (), (), up, 0.0) <= 0:
        percent = [p for p in up.policies if p.type == "Percent"]
        why = (
            "every policy is Percent"
            if len(percent) == len(up.policies)
            else "selectPolicy Min picks the smallest limit and the Percent policies allow none"
        )
        warnings.append(
            f"spec.behavior.scaleUp cannot scale up from 0 replicas (minReplicas is 0): {why}, and a "
            "Percent policy allows ceil(0 x (1 + value/100)) = 0 replicas from 0, so once the target has "
            "been at 0 for longer than the longest scale-up periodSeconds it stays there; add a Pods "
            "policy (e.g. {type: Pods, value: 4, periodSeconds: 15}) with selectPolicy Max"
        )
    return warnings
