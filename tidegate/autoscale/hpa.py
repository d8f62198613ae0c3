"""The Kubernetes HorizontalPodAutoscaler (autoscaling/v2) replica calculation, exact and clock-free.

tidegate scales its cloud node pool (a virtual-kubelet Deployment) the way a Kubernetes HPA would, so
an HPA manifest written for a real cluster means the same thing here, in the simulator and in the live
control plane. This module reimplements, in plain Python, what kube-controller-manager does in
``pkg/controller/podautoscaler/horizontal.go`` and ``replica_calculator.go`` for External metrics:

1. ``reconcileAutoscaler``: a target at 0 replicas is left alone ("ScalingDisabled") unless scaling
   from zero is allowed and ``minReplicas`` is 0; a target above ``maxReplicas`` / below ``minReplicas``
   is set straight to the bound, with no metrics, stabilization or rate limits.
2. ``computeReplicasForMetrics``: one proposal per metric, the largest wins; when every metric fails,
   or some fail and the rest propose a scale-down, nothing happens.
3. ``GetExternalPerPodMetricReplicas`` (``averageValue``) and ``GetExternalMetricReplicas`` (``value``),
   with the tolerance band ``[1 - 0.1, 1 + 0.1]`` (inclusive) around a usage ratio of 1.
4. With ``spec.behavior`` set, ``normalizeDesiredReplicasWithBehaviors``: the stabilization window
   (``stabilizeRecommendationWithBehaviors``), then the rate limits
   (``convertDesiredReplicasWithBehaviorRate`` with ``calculateScaleUpLimitWithScalingRules`` and
   ``calculateScaleDownLimitWithBehaviors``) over the scale events of the last ``periodSeconds``.
   Without ``spec.behavior`` Kubernetes still runs its older algorithm (``normalizeDesiredReplicas``):
   the maximum recommendation over the downscale window in both directions, and at most
   ``max(2 x current, 4)`` replicas per evaluation. Both paths are here; ``HPASpec.behavior is None``
   selects the older one, exactly as ``hpa.Spec.Behavior == nil`` does in the controller.

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Final, Literal, TypeAlias

from tidegate.model.errors import FieldError
from tidegate.model.quantity import parse_quantity

PolicyType: TypeAlias = Literal["Pods", "Percent"]
SelectPolicy: TypeAlias = Literal["Max", "Min", "Disabled"]
TargetType: TypeAlias = Literal["Value", "AverageValue", "Utilization"]
SelectorOperator: TypeAlias = Literal["In", "NotIn", "Exists", "DoesNotExist"]
#: A metric sample or target as users write it: 300, 1.5, "500m", "2k", or an exact Fraction.
QuantityLike: TypeAlias = int | float | str | Fraction

POLICY_TYPES: Final = ("Pods", "Percent")
SELECT_POLICIES: Final = ("Max", "Min", "Disabled")
TARGET_TYPES: Final = ("Value", "AverageValue", "Utilization")
SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")

#: The largest stabilization window the Kubernetes API server accepts (validation.go).
MAX_STABILIZATION_WINDOW_SECONDS: Final = 3600
#: The largest policy period the Kubernetes API server accepts (validation.go).
MAX_PERIOD_SECONDS: Final = 1800
#: kube-controller-manager --horizontal-pod-autoscaler-tolerance.
DEFAULT_TOLERANCE: Final = 0.1
#: kube-controller-manager --horizontal-pod-autoscaler-downscale-stabilization (5m).
DEFAULT_DOWNSCALE_STABILIZATION_SECONDS: Final = 300
#: The Volcano metric tidegate's cloud-burst HPA scales on (seconds the queue's jobs have been pending).
PENDING_JOBS_DURATION_METRIC: Final = "volcano_queue_pending_jobs_duration_seconds"

_MAX_INT32: Final = 2**31 - 1
_MIN_INT32: Final = -(2**31)

# Condition types and reasons, spelled as the Kubernetes HPA controller spells them.
ABLE_TO_SCALE: Final = "AbleToScale"
SCALING_ACTIVE: Final = "ScalingActive"
SCALING_LIMITED: Final = "ScalingLimited"
SCALING_DISABLED: Final = "ScalingDisabled"
FAILED_GET_EXTERNAL_METRIC: Final = "FailedGetExternalMetric"
VALID_METRIC_FOUND: Final = "ValidMetricFound"
SUCCEEDED_RESCALE: Final = "SucceededRescale"
READY_FOR_NEW_SCALE: Final = "ReadyForNewScale"
SCALE_UP_STABILIZED: Final = "ScaleUpStabilized"
SCALE_DOWN_STABILIZED: Final = "ScaleDownStabilized"
SCALE_UP_LIMIT: Final = "ScaleUpLimit"
SCALE_DOWN_LIMIT: Final = "ScaleDownLimit"
TOO_MANY_REPLICAS: Final = "TooManyReplicas"
TOO_FEW_REPLICAS: Final = "TooFewReplicas"
DESIRED_WITHIN_RANGE: Final = "DesiredWithinRange"

_MESSAGES: Final = {
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
class LabelSelectorRequirement:
    """One ``matchExpressions`` entry of a metric selector."""

    key: str
    operator: SelectorOperator
    values: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.operator not in SELECTOR_OPERATORS:
            raise FieldError("operator", f"{self.operator!r} is not one of {', '.join(SELECTOR_OPERATORS)}")
        if self.operator in ("In", "NotIn") and not self.values:
            raise FieldError("values", f"must be non-empty when operator is {self.operator}")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise FieldError("values", f"must be empty when operator is {self.operator}")

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a sample with these labels satisfies the requirement (Kubernetes label semantics)."""
        if self.operator == "In":
            return labels.get(self.key) in self.values
        if self.operator == "NotIn":
            return labels.get(self.key) not in self.values
        if self.operator == "Exists":
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A metric's ``selector``: sorted ``matchLabels`` pairs and ``matchExpressions``."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    @classmethod
    def of(cls, match_labels: Mapping[str, str] | None = None, *expressions: LabelSelectorRequirement) -> LabelSelector:
        """A selector from a plain label mapping (sorted, so equal selectors compare equal)."""
        return cls(tuple(sorted((match_labels or {}).items())), tuple(expressions))

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a metric sample with these labels is one the external metrics API would return."""
        return all(labels.get(k) == v for k, v in self.match_labels) and all(
            e.matches(labels) for e in self.match_expressions
        )

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in self.match_labels]
        for e in self.match_expressions:
            if e.operator in ("In", "NotIn"):
                parts.append(f"{e.key} {e.operator.lower()} ({','.join(e.values)})")
            else:
                parts.append(e.key if e.operator == "Exists" else f"!{e.key}")
        return "{" + ",".join(parts) + "}"


@dataclass(frozen=True, slots=True)
class MetricTarget:
    """``target`` of a metric. For External metrics Kubernetes decides by which field is set, not by
    ``type``: ``average_value`` (divide the total by the replica count) wins, otherwise ``value``."""

    type: TargetType
    value: Fraction | None = None
    average_value: Fraction | None = None
    average_utilization: int | None = None
    #: The target the controller divides by, in milli-units rounded up (Quantity.MilliValue); None when
    #: neither value nor averageValue is set (such a target is refused by ExternalMetric).
    milli: int | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.type not in TARGET_TYPES:
            raise FieldError("type", f"{self.type!r} must be either Utilization, Value, or AverageValue")
        for name, amount in (("value", self.value), ("averageValue", self.average_value)):
            if amount is not None and amount <= 0:
                raise FieldError(name, f"{amount} must be positive")
        if self.average_utilization is not None and self.average_utilization < 1:
            raise FieldError("averageUtilization", f"{self.average_utilization} must be greater than 0")
        amount = self.average_value if self.average_value is not None else self.value
        object.__setattr__(self, "milli", None if amount is None else math.ceil(amount * 1000))

    @property
    def per_pod(self) -> bool:
        """True when the controller will use ``averageValue`` (GetExternalPerPodMetricReplicas)."""
        return self.average_value is not None

    @property
    def milli_value(self) -> int:
        """The target the controller divides by, in milli-units rounded up (Quantity.MilliValue)."""
        if self.milli is None:
            raise ValueError("an External metric target needs value or averageValue")
        return self.milli


@dataclass(frozen=True, slots=True)
class ExternalMetric:
    """One ``type: External`` entry of ``spec.metrics``."""

    name: str
    target: MetricTarget
    selector: LabelSelector = LabelSelector()
    #: ``name{selector}``: how ``step`` looks samples up when two metrics share a name.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            raise FieldError("metric.name", "must specify a metric name")
        if self.target.value is None and self.target.average_value is None:
            raise FieldError("target.averageValue", "must set either a target value for metric or a per-pod target")
        object.__setattr__(self, "key", f"{self.name}{self.selector}")

    def __str__(self) -> str:
        return f"external metric {self.key}"


@dataclass(frozen=True, slots=True)
class HPASpec:
    """An autoscaling/v2 HorizontalPodAutoscaler as tidegate evaluates it.

    ``behavior=None`` is a manifest without ``spec.behavior``: Kubernetes then runs its pre-behavior
    algorithm, which is close to, but not the same as, ``DEFAULT_BEHAVIOR`` (see the module docstring).
    """

    name: str
    target_kind: str
    target_name: str
    min_replicas: int
    max_replicas: int
    metrics: tuple[ExternalMetric, ...]
    behavior: HPABehavior | None = None
    namespace: str = "default"
    target_api_version: str = "apps/v1"

    def __post_init__(self) -> None:
        if not _is_int(self.min_replicas) or self.min_replicas < 0:
            raise FieldError("spec.minReplicas", f"{self.min_replicas!r} must be an integer >= 0")
        if not _is_int(self.max_replicas) or self.max_replicas < 1:
            raise FieldError("spec.maxReplicas", f"{self.max_replicas!r} must be an integer greater than 0")
        if not self.metrics:
            raise FieldError("spec.metrics", "must list at least one External metric")


@dataclass(frozen=True, slots=True)
class HPAControllerConfig:
    """The kube-controller-manager settings that change the result, plus the scale-from-zero switch.

    ``allow_scale_from_zero`` models the HPAScaleToZero feature gate: with it, a target at 0 replicas
    and ``minReplicas: 0`` is evaluated like any other; without it (the Kubernetes default) it stays at 0.
    """

    tolerance: float = DEFAULT_TOLERANCE
    downscale_stabilization_seconds: int = DEFAULT_DOWNSCALE_STABILIZATION_SECONDS
    allow_scale_from_zero: bool = False

    def __post_init__(self) -> None:
        if not (self.tolerance >= 0 and math.isfinite(self.tolerance)):
            raise ValueError(f"tolerance {self.tolerance!r} must be a finite number >= 0")
        if not _is_int(self.downscale_stabilization_seconds) or self.downscale_stabilization_seconds < 0:
            raise ValueError("downscale_stabilization_seconds must be an integer >= 0")


DEFAULT_CONFIG: Final = HPAControllerConfig()


# --------------------------------------------------------------------------------------------------
# State and result
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
class HPAState:
    """What the controller remembers about one HPA between evaluations (its maps keyed by HPA)."""

    recommendations: tuple[Recommendation, ...] = ()
    scale_up_events: tuple[ScaleEvent, ...] = ()
    scale_down_events: tuple[ScaleEvent, ...] = ()
    last_evaluated_at: float | None = None


@dataclass(frozen=True, slots=True)
class HPACondition:
    """A status condition as the controller would write it in this evaluation."""

    type: str
    status: bool
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class MetricResult:
    """One metric's proposal. ``current_milli`` is what ``status.currentMetrics`` would show: the
    total for ``value`` targets, the per-pod average (rounded up) for ``averageValue`` targets."""

    metric: ExternalMetric
    replicas: int | None
    current_milli: int | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class HPAResult:
    """The outcome of one evaluation.

    ``desired_replicas`` is what to set the target's replicas to (equal to ``current_replicas`` when
    nothing changes). ``reason`` is the most telling condition reason: ``ScalingDisabled``,
    ``FailedGetExternalMetric``, ``TooManyReplicas``/``TooFewReplicas`` (also for a target outside
    [min, max]), ``ScaleUpLimit``/``ScaleDownLimit``, ``ScaleUpStabilized``/``ScaleDownStabilized``, or
    ``DesiredWithinRange``. ``conditions`` lists the conditions Kubernetes would set in this evaluation;
    a real HPA keeps the previous value of any type not listed.
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
# Metrics (replica_calculator.go)
# --------------------------------------------------------------------------------------------------


def to_milli(value: QuantityLike) -> int:
    """A metric sample in integer milli-units, rounded up like ``Quantity.MilliValue``."""
    if type(value) is float and math.isfinite(value):
        if value.is_integer() and -_EXACT_FLOAT_INT < value < _EXACT_FLOAT_INT:
            return int(value) * 1000  # "N.0" is the float's shortest repr: the same ceiling, exactly
        # parse_quantity reads a float as its shortest decimal repr; Decimal holds that exactly, and the
        # product stays exact in its 28 digits: the same ceiling, without building a Fraction.
        return math.ceil(Decimal(repr(value)) * 1000)
    return math.ceil(parse_quantity(value, "metric value") * 1000)


#: Integral floats below this in size print as their exact integer ("N.0"); above it, repr may round.
_EXACT_FLOAT_INT: Final = float(2**53)


def _within(ratio: float, scale_down_tolerance: float, scale_up_tolerance: float) -> bool:
    # Tolerances.isWithin; comparisons with NaN are false, so a NaN ratio is never within.
    return (1.0 - scale_down_tolerance) <= ratio <= (1.0 + scale_up_tolerance)


def _ceil_int32(x: float) -> int:
    return _MAX_INT32 if x > _MAX_INT32 else math.ceil(x)


def external_metric_replicas(
    metric: ExternalMetric,
    samples: Sequence[QuantityLike] | None,
    *,
    spec_replicas: int,
    status_replicas: int,
    ready_replicas: int,
    tolerances: tuple[float, float] = (DEFAULT_TOLERANCE, DEFAULT_TOLERANCE),
) -> MetricResult:
    """The replica count one External metric proposes, as the Kubernetes replica calculator computes it.

    ``samples`` are the values the external metrics API returns for the metric's selector; they are
    summed. ``averageValue`` targets (GetExternalPerPodMetricReplicas): ratio = total / (target x
    status_replicas); within tolerance keep ``status_replicas``, else ``ceil(total / target)`` (at 0
    replicas the ratio is infinite, or NaN for a zero total, so never within). ``value`` targets
    (GetExternalMetricReplicas): ratio = total / target; at ``spec_replicas`` 0 propose ``ceil(ratio)``
    with no tolerance, else keep ``spec_replicas`` within tolerance or propose ``ceil(ratio x
    ready_replicas)``. ``tolerances`` is (scale-down, scale-up). No samples is an error, as in Kubernetes.
    """
    if not samples:
        return MetricResult(metric, None, None, "no metrics returned from external metrics API")
    usage = to_milli(samples[0]) if len(samples) == 1 else sum(to_milli(sample) for sample in samples)
    target = metric.target.milli_value
    down_tolerance, up_tolerance = tolerances
    if metric.target.per_pod:
        replicas = status_replicas
        within = status_replicas != 0 and _within(
            float(usage) / (float(target) * float(status_replicas)), down_tolerance, up_tolerance
        )
        if not within:
            replicas = _ceil_int32(float(usage) / float(target))
        per_pod = 0 if status_replicas == 0 else math.ceil(float(usage) / float(status_replicas))
        return MetricResult(metric, replicas, per_pod)
    ratio = float(usage) / float(target)
    if spec_replicas == 0:
        return MetricResult(metric, _ceil_int32(ratio), usage)
    if _within(ratio, down_tolerance, up_tolerance):
        return MetricResult(metric, spec_replicas, usage)
    if status_replicas == 0:
        return MetricResult(metric, None, usage, "no pods returned by selector while calculating replica count")
    return MetricResult(metric, _ceil_int32(ratio * float(ready_replicas)), usage)


def _samples_for(
    metric: ExternalMetric, metric_values: Mapping[str, Sequence[QuantityLike]]
) -> Sequence[QuantityLike] | None:
    if metric.key in metric_values:
        return metric_values[metric.key]
    return metric_values.get(metric.name)


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
        if metric.name != metric_name:
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
def _queues_matching(selector: LabelSelector, names: tuple[str, ...]) -> tuple[str, ...]:
    """The queues whose `queue` label the selector matches (asked every sync, for the same few queues)."""
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
    result = _MAX_INT32 if pick_min else _MIN_INT32
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
    result = _MIN_INT32 if pick_max else _MAX_INT32
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
    # convertDesiredReplicasWithBehaviorRate.
    if desired > current:
        limit = scale_up_limit(current, state.scale_up_events, state.scale_down_events, behavior.scale_up, now)
        limit = max(limit, current)
        if spec.max_replicas > limit:
            allowed, reason = limit, SCALE_UP_LIMIT
        else:
            allowed, reason = spec.max_replicas, TOO_MANY_REPLICAS
        if desired > allowed:
            return allowed, reason
    elif desired < current:
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
        return HPAState(state.recommendations, events, state.scale_down_events, state.last_evaluated_at)
    events = _mark_and_store(state.scale_down_events, behavior.scale_down.longest_period_seconds, previous - new, now)
    return HPAState(state.recommendations, state.scale_up_events, events, state.last_evaluated_at)


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


# --------------------------------------------------------------------------------------------------
# One evaluation
# --------------------------------------------------------------------------------------------------


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
) -> tuple[HPAState, HPAResult]:
    """One HPA evaluation (``reconcileAutoscaler``) at time ``now``; returns the new state and result.

    ``current_replicas`` is the target's ``spec.replicas``; ``status_replicas`` (pods that exist,
    default ``current_replicas``) is what ``averageValue`` metrics divide by; ``ready_replicas``
    (default ``status_replicas``) is what ``value`` metrics multiply by. ``metric_values`` maps each
    External metric's ``key`` (``name{selector}``) or plain ``name`` to the samples its selector
    matches. The new state assumes the target is set to ``desired_replicas`` (the scale event is
    recorded); ``now`` must not go back in time.
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

    # recordInitialRecommendation: the first evaluation remembers the current size.
    recommendations = state.recommendations or (Recommendation(current_replicas, now),)
    state = HPAState(recommendations, state.scale_up_events, state.scale_down_events, now)
    current = current_replicas

    if current == 0 and (spec.min_replicas != 0 or not config.allow_scale_from_zero):
        message = _MESSAGES[SCALING_DISABLED]
        if spec.min_replicas == 0:
            message += " (scaling up from zero needs allow_scale_from_zero: Kubernetes' HPAScaleToZero gate)"
        result = HPAResult(
            desired_replicas=0,
            current_replicas=0,
            reason=SCALING_DISABLED,
            message=message,
            conditions=(_condition(SCALING_ACTIVE, False, SCALING_DISABLED, message),),
        )
        return state, result
    if current > spec.max_replicas or current < spec.min_replicas:
        above = current > spec.max_replicas
        desired = spec.max_replicas if above else spec.min_replicas
        message = f"Current number of replicas {'above Spec.MaxReplicas' if above else 'below Spec.MinReplicas'}"
        if spec.behavior is not None:
            state = _record_scale_event(state, spec.behavior, current, desired, now)
        result = HPAResult(
            desired_replicas=desired,
            current_replicas=current,
            reason=TOO_MANY_REPLICAS if above else TOO_FEW_REPLICAS,
            message=f"{message}: {current} -> {desired}",
            conditions=(_condition(ABLE_TO_SCALE, True, SUCCEEDED_RESCALE, _rescaled(desired)),),
        )
        return state, result

    # computeReplicasForMetrics
    tolerances = _tolerances(spec, config)
    results = tuple(
        external_metric_replicas(
            metric,
            _samples_for(metric, metric_values),
            spec_replicas=current,
            status_replicas=status,
            ready_replicas=ready,
            tolerances=tolerances,
        )
        for metric in spec.metrics
    )
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
        message = f"the HPA was unable to compute the replica count: failed to get {first.metric}: {first.error}"
        result = HPAResult(
            desired_replicas=current,
            current_replicas=current,
            reason=FAILED_GET_EXTERNAL_METRIC,
            message=message,
            metrics=results,
            conditions=(_condition(SCALING_ACTIVE, False, FAILED_GET_EXTERNAL_METRIC, message),),
        )
        return state, result
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
    state = HPAState(recommendations, state.scale_up_events, state.scale_down_events, now)

    able_reason = stabilized_reason if stabilized != metric_desired else READY_FOR_NEW_SCALE
    conditions = (
        _condition(ABLE_TO_SCALE, True, able_reason),
        active,
        _condition(SCALING_LIMITED, desired != stabilized, limit_reason),
    )
    if desired != current:
        if spec.behavior is not None:
            state = _record_scale_event(state, spec.behavior, current, desired, now)
        conditions = (_condition(ABLE_TO_SCALE, True, SUCCEEDED_RESCALE, _rescaled(desired)), *conditions[1:])

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
        conditions=conditions,
    )
    return state, result


def _rescaled(desired: int) -> str:
    return f"the HPA controller was able to update the target scale to {desired}"


class HPAController:
    """One HPA with its memory: a thin stateful wrapper around ``step`` for callers that keep no state.

    Still clock-free: every call passes ``now``. ``spec`` may be replaced between calls (an edited
    HPA keeps its recommendations and scale events, as in Kubernetes).
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

    def step(
        self,
        now: float,
        current_replicas: int,
        metric_values: Mapping[str, Sequence[QuantityLike]],
        *,
        status_replicas: int | None = None,
        ready_replicas: int | None = None,
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
        )
        return result


# --------------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------------


def check_hpa(spec: HPASpec, config: HPAControllerConfig = DEFAULT_CONFIG) -> list[str]:
    """Warnings for an HPA that is well-formed but will not behave as its author most likely expects.

    Covers what the Kubernetes API server would reject (so the same manifest fails ``kubectl apply``)
    and valid settings with a surprising effect, e.g. rules that can never scale up from 0 replicas.
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
    for i, metric in enumerate(spec.metrics):
        target, path = metric.target, f"spec.metrics[{i}].external.target"
        used = "averageValue" if target.per_pod else "value"
        if target.type != ("AverageValue" if target.per_pod else "Value"):
            warnings.append(
                f"{path}.type is {target.type} but the controller ignores the type of External metric "
                f"targets and uses {used} ({'total / replicas' if target.per_pod else 'the total'} "
                "against the target) because that field is set"
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
