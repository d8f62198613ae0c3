"""The HPA's metric sources and its replica calculator (autoscaling/v2 ``MetricSpec``), exact and pure.

Mirrors Kubernetes v1.34 (release-1.34): ``pkg/controller/podautoscaler/replica_calculator.go``,
``metrics/utilization.go``, the resource metrics client's pod and container sums
(``metrics/client.go``) and the ``computeStatusFor*Metric`` functions of ``horizontal.go``. One
function per metric source turns that metric's samples into a replica proposal, or into the error
Kubernetes reports (and the condition reason it reports it under):

- ``External`` (FailedGetExternalMetric): the samples the external metrics API returns for the
  selector, summed. ``averageValue`` set: ``GetExternalPerPodMetricReplicas``, ratio
  total / (target x status replicas); else ``value``: ``GetExternalMetricReplicas``, ratio
  total / target, times the ready pods. The target's ``type`` is not looked at, as in Kubernetes.
- ``Object`` (FailedGetObjectMetric): one value for the described object. ``type: Value`` with
  ``value``: ``GetObjectMetricReplicas`` (as External ``value``); ``type: AverageValue`` with
  ``averageValue``: ``GetObjectPerPodMetricReplicas`` (as External ``averageValue``); otherwise the
  error "neither a value target nor an average value target was set".
- ``Pods`` (FailedGetPodsMetric): one value per pod, ``GetMetricReplicas``/``calcPlainMetricReplicas``:
  the average over the pods that have one against ``averageValue``, with the missing/unready
  rebalancing below.
- ``Resource`` / ``ContainerResource`` (FailedGetResourceMetric / FailedGetContainerResourceMetric):
  each pod's usage from the resource metrics API, summed over its containers or taken from the named
  one. ``averageValue`` set: ``GetRawResourceReplicas`` (as Pods); else ``averageUtilization``:
  ``GetResourceReplicas``, usage as a percentage of the pods' requests (``utilization.go``).

Pod-based metrics group the target's pods first (``groupPods``): pods being deleted or Failed are
ignored; Pending pods are unready; pods with no sample are missing; for ``cpu`` only, a Running pod
is also unready if it has no PodReady condition or start time, or is within the cpu initialization
period (5 min) and not ready or sampled before one metric window after becoming ready, or, after it,
not ready and never ready since its first readiness delay (30 s). Unready pods' samples are dropped.
Without missing or unready pods the proposal is ``ceil(ratio x ready pods)``, or the current count
within the tolerance. Otherwise the ratio is computed again with missing pods at 100% of their request
(or at the utilization target above 100%; at the target value for Pods and raw metrics) when scaling
down and at 0 when scaling up, and unready pods at 0 when scaling up; the current count stays if the
new ratio is within the tolerance, reverses the direction, or its ``ceil(new ratio x pods counted)``
does. Arithmetic is Go's: milli-units rounded up (``MilliValue``), int64 sums and truncating integer
division where Go divides integers, IEEE doubles for ratios, ``int32`` conversions; where Go would
convert a float beyond int32 (its result is implementation-defined) the count is capped at 2^31 - 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import ClassVar, Final, Literal, TypeAlias

from tidegate.model.errors import FieldError
from tidegate.model.quantity import parse_quantity

TargetType: TypeAlias = Literal["Value", "AverageValue", "Utilization"]
SelectorOperator: TypeAlias = Literal["In", "NotIn", "Exists", "DoesNotExist"]
PodPhase: TypeAlias = Literal["Pending", "Running", "Succeeded", "Failed", "Unknown"]
#: A metric sample, request or target as users write it: 300, 1.5, "500m", "2k", or an exact Fraction.
QuantityLike: TypeAlias = int | float | str | Fraction
#: (scale-down tolerance, scale-up tolerance): the band [1 - down, 1 + up] in which nothing changes.
Tolerances: TypeAlias = tuple[float, float]

TARGET_TYPES: Final = ("Value", "AverageValue", "Utilization")
SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")
#: The metric source types of autoscaling/v2, as the API server lists them (sorted).
METRIC_SOURCE_TYPES: Final = ("ContainerResource", "External", "Object", "Pods", "Resource")

#: kube-controller-manager --horizontal-pod-autoscaler-tolerance.
DEFAULT_TOLERANCE: Final = 0.1
#: kube-controller-manager --horizontal-pod-autoscaler-cpu-initialization-period (5m).
DEFAULT_CPU_INITIALIZATION_PERIOD_SECONDS: Final = 300.0
#: kube-controller-manager --horizontal-pod-autoscaler-initial-readiness-delay (30s).
DEFAULT_INITIAL_READINESS_DELAY_SECONDS: Final = 30.0
#: Go's zero time.Time in Unix seconds (0001-01-01): a condition's unset lastTransitionTime.
GO_ZERO_TIME: Final = -62135596800.0

MAX_INT32: Final = 2**31 - 1
MIN_INT32: Final = -(2**31)
MAX_INT64: Final = 2**63 - 1

_NO_PODS: Final = "no pods returned by selector while calculating replica count"
_NO_POD_METRICS: Final = "did not receive metrics for targeted pods (pods might be unready)"


# --------------------------------------------------------------------------------------------------
# Selectors and targets
# --------------------------------------------------------------------------------------------------


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
        """Whether a series with these labels satisfies the requirement (Kubernetes label semantics)."""
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
        """Whether a series with these labels is one the metrics API would return for this selector."""
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


def go_selector(selector: LabelSelector | None) -> str:
    """The selector as Go's ``%+v`` prints a ``*metav1.LabelSelector`` (its generated ``String``), which is
    how Kubernetes names External metrics in conditions: ``&LabelSelector{MatchLabels:map[string]string{
    queue: q,},MatchExpressions:[]LabelSelectorRequirement{},}``; ``nil`` for no selector."""
    if selector is None:
        return "nil"
    labels = "".join(f"{k}: {v}," for k, v in selector.match_labels)
    expressions = "".join(
        f"LabelSelectorRequirement{{Key:{e.key},Operator:{e.operator},Values:[{' '.join(e.values)}],}},"
        for e in selector.match_expressions
    )
    return (
        f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
        f"MatchExpressions:[]LabelSelectorRequirement{{{expressions}}},}}"
    )


def _milli(amount: Fraction | None) -> int | None:
    return None if amount is None else math.ceil(amount * 1000)


@dataclass(frozen=True, slots=True)
class MetricTarget:
    """``target`` of a metric: its ``type`` and whichever of ``value``, ``averageValue`` and
    ``averageUtilization`` the manifest sets. Which one the controller uses depends on the source (see the
    module docstring): External and Resource look at which field is set, Object at ``type``."""

    type: TargetType
    value: Fraction | None = None
    average_value: Fraction | None = None
    average_utilization: int | None = None
    #: ``value`` and ``averageValue`` in milli-units, rounded up (Quantity.MilliValue).
    value_milli: int | None = field(init=False, repr=False, compare=False)
    average_milli: int | None = field(init=False, repr=False, compare=False)
    #: The External target the controller divides by: averageValue if set, else value.
    milli: int | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.type not in TARGET_TYPES:
            raise FieldError("type", f"{self.type!r} must be either Utilization, Value, or AverageValue")
        for name, amount in (("value", self.value), ("averageValue", self.average_value)):
            if amount is not None and amount <= 0:
                raise FieldError(name, f"{amount} must be positive")
        if self.average_utilization is not None and self.average_utilization < 1:
            raise FieldError("averageUtilization", f"{self.average_utilization} must be greater than 0")
        object.__setattr__(self, "value_milli", _milli(self.value))
        object.__setattr__(self, "average_milli", _milli(self.average_value))
        object.__setattr__(self, "milli", self.average_milli if self.average_value is not None else self.value_milli)

    @property
    def per_pod(self) -> bool:
        """True when an External metric uses ``averageValue`` (GetExternalPerPodMetricReplicas)."""
        return self.average_value is not None

    @property
    def milli_value(self) -> int:
        """The External target the controller divides by, in milli-units rounded up (Quantity.MilliValue)."""
        if self.milli is None:
            raise ValueError("an External metric target needs value or averageValue")
        return self.milli


@dataclass(frozen=True, slots=True)
class ObjectReference:
    """A CrossVersionObjectReference: an Object metric's ``describedObject``."""

    kind: str
    name: str
    api_version: str = ""

    @property
    def group(self) -> str:
        """The API group of ``api_version`` ("" for the core group)."""
        return self.api_version.rpartition("/")[0] if "/" in self.api_version else ""


# --------------------------------------------------------------------------------------------------
# Metric sources
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExternalMetric:
    """One ``type: External`` entry of ``spec.metrics``."""

    TYPE: ClassVar[str] = "External"
    FAILED: ClassVar[str] = "FailedGetExternalMetric"

    name: str
    target: MetricTarget
    selector: LabelSelector | None = None
    #: ``name{selector}``: how samples are looked up when two metrics share a name.
    key: str = field(init=False, repr=False, compare=False)
    #: How Kubernetes names it in conditions (``str``), made once.
    described: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            raise FieldError("metric.name", "must specify a metric name")
        if self.target.value is None and self.target.average_value is None:
            raise FieldError("target.averageValue", "must set either a target value for metric or a per-pod target")
        object.__setattr__(self, "key", f"{self.name}{self.selector or LabelSelector()}")
        object.__setattr__(self, "described", f"external metric {self.name}({go_selector(self.selector)})")

    def __str__(self) -> str:
        return self.described


@dataclass(frozen=True, slots=True)
class ObjectMetric:
    """One ``type: Object`` entry: a metric describing one object (``describedObject``)."""

    TYPE: ClassVar[str] = "Object"
    FAILED: ClassVar[str] = "FailedGetObjectMetric"

    described_object: ObjectReference
    name: str
    target: MetricTarget
    selector: LabelSelector | None = None
    #: ``Kind/name:metric{selector}``: how its value is looked up.
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            raise FieldError("metric.name", "must specify a metric name")
        ref = self.described_object
        object.__setattr__(self, "key", f"{ref.kind}/{ref.name}:{self.name}{self.selector or LabelSelector()}")

    @property
    def uses_value(self) -> bool:
        """``type: Value`` with ``value`` set (GetObjectMetricReplicas)."""
        return self.target.type == "Value" and self.target.value is not None

    @property
    def uses_average(self) -> bool:
        """``type: AverageValue`` with ``averageValue`` set (GetObjectPerPodMetricReplicas)."""
        return not self.uses_value and self.target.type == "AverageValue" and self.target.average_value is not None

    def __str__(self) -> str:
        # horizontal.go names a per-pod Object metric "external metric ..." (sic), a value one by kind.
        if self.uses_average:
            return f"external metric {self.name}({go_selector(self.selector)})"
        return f"{self.described_object.kind} metric {self.name}"


@dataclass(frozen=True, slots=True)
class PodsMetric:
    """One ``type: Pods`` entry: a metric each pod of the target reports, averaged against averageValue."""

    TYPE: ClassVar[str] = "Pods"
    FAILED: ClassVar[str] = "FailedGetPodsMetric"

    name: str
    target: MetricTarget
    selector: LabelSelector | None = None
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            raise FieldError("metric.name", "must specify a metric name")
        if self.target.average_value is None:
            raise FieldError("target.averageValue", "must specify a positive target averageValue")
        object.__setattr__(self, "key", f"{self.name}{self.selector or LabelSelector()}")

    def __str__(self) -> str:
        return f"pods metric {self.name}"


@dataclass(frozen=True, slots=True)
class ResourceMetric:
    """One ``type: Resource`` entry: a resource (cpu, memory, nvidia.com/gpu...) of the target's pods."""

    TYPE: ClassVar[str] = "Resource"
    FAILED: ClassVar[str] = "FailedGetResourceMetric"

    name: str
    target: MetricTarget

    def __post_init__(self) -> None:
        if not self.name:
            raise FieldError("name", "must specify a resource name")
        if self.target.average_value is None and self.target.average_utilization is None:
            raise FieldError("target.averageUtilization", "must set either a target raw value or a target utilization")

    @property
    def container(self) -> str:
        return ""

    @property
    def key(self) -> str:
        return self.name

    def __str__(self) -> str:
        if self.target.average_value is not None:
            return f"{self.name} resource"
        return f"{self.name} resource utilization (percentage of request)"


@dataclass(frozen=True, slots=True)
class ContainerResourceMetric:
    """One ``type: ContainerResource`` entry: a resource of one named container of each pod."""

    TYPE: ClassVar[str] = "ContainerResource"
    FAILED: ClassVar[str] = "FailedGetContainerResourceMetric"

    name: str
    container: str
    target: MetricTarget

    def __post_init__(self) -> None:
        if not self.name:
            raise FieldError("name", "must specify a resource name")
        if not self.container:
            raise FieldError("container", "must specify a container")
        if self.target.average_value is None and self.target.average_utilization is None:
            raise FieldError("target.averageUtilization", "must set either a target raw value or a target utilization")

    @property
    def key(self) -> str:
        return f"{self.container}/{self.name}"

    def __str__(self) -> str:
        if self.target.average_value is not None:
            return f"{self.name} resource"
        return f"{self.name} container resource utilization (percentage of request)"


#: One entry of ``spec.metrics``.
MetricSource: TypeAlias = ExternalMetric | ObjectMetric | PodsMetric | ResourceMetric | ContainerResourceMetric


# --------------------------------------------------------------------------------------------------
# What the controller reads
# --------------------------------------------------------------------------------------------------


def to_milli(value: QuantityLike) -> int:
    """A sample in integer milli-units, rounded up like ``Quantity.MilliValue``."""
    if type(value) is int:
        return value * 1000
    if type(value) is float and math.isfinite(value):
        if value.is_integer() and -_EXACT_FLOAT_INT < value < _EXACT_FLOAT_INT:
            return int(value) * 1000  # "N.0" is the float's shortest repr: the same ceiling, exactly
        # parse_quantity reads a float as its shortest decimal repr d. The float product lies within
        # |value| x 1000 x 2^-52 of d x 1000; unless that is near an integer, their ceilings agree (the HPA
        # sync reads such sums of seconds every 15 s). Otherwise Decimal holds d exactly, and the product
        # stays exact in its 28 digits: the same ceiling, without building a Fraction.
        product = value * 1000.0
        ceiling = math.ceil(product)
        if ceiling - product > abs(product) * _NEAR_INTEGER and product - (ceiling - 1) > abs(product) * _NEAR_INTEGER:
            return ceiling
        if -_MILLI_EXACT < value < _MILLI_EXACT:
            # Near a whole number of milli-units, most often on one (sums of seconds on a millisecond grid): that
            # number w when w / 1000 reads back as the float. Below 2^42 a float's spacing is under half a
            # milli-unit, so no other decimal of three places does, and none with more places is shorter: d is
            # w / 1000, and d x 1000 is w. (Such a w is within 0.25 of the exact product and the float product
            # within 0.25 of that: round finds it.)
            whole = round(product)
            if whole / 1000 == value:
                return whole
            # Else no whole number of milli-units rounds to the float: none lies in its rounding interval, which
            # holds d and the float's exact value, so none lies between d x 1000 and the exact product either.
            # Their ceilings agree, and the exact one is an integer division.
            numerator, denominator = value.as_integer_ratio()
            return -(-numerator * 1000 // denominator)
        return math.ceil(Decimal(repr(value)) * 1000)
    if isinstance(value, Fraction):
        return math.ceil(value * 1000)
    return math.ceil(parse_quantity(value, "metric value") * 1000)


#: Integral floats below this in size print as their exact integer ("N.0"); above it, repr may round.
_EXACT_FLOAT_INT: Final = float(2**53)
#: Floats smaller than this in size are spaced under half a milli-unit apart (`to_milli`'s whole milli-units).
_MILLI_EXACT: Final = float(2**42)
#: A float product this close to an integer, relative to its size, is rounded through Decimal (`to_milli`):
#: far wider than the float's own error (2^-52 relative); a sample of ordinary size is a whole number of
#: milli-units that close only when it is one.
_NEAR_INTEGER: Final = 1e-9


@dataclass(frozen=True, slots=True)
class TargetPod:
    """One pod the scale target's selector lists, as the HPA controller's pod lister sees it.

    ``ready`` is the PodReady condition's status (None: the pod has no such condition) and
    ``ready_since`` its lastTransitionTime (None: unset, Go's zero time); ``started`` is status.startTime
    (None: unset). ``requests`` maps each container, in spec order, to its resource requests."""

    name: str
    phase: PodPhase = "Running"
    ready: bool | None = True
    ready_since: float | None = None
    started: float | None = None
    deleting: bool = False
    requests: Mapping[str, Mapping[str, QuantityLike]] = field(default_factory=dict)

    @property
    def counts_as_ready(self) -> bool:
        """Running and Ready: what ``getReadyPodsCount`` counts for Object and External value metrics."""
        return self.phase == "Running" and self.ready is True


@dataclass(frozen=True, slots=True)
class PodUsage:
    """One pod's entry in the resource metrics API (metrics.k8s.io PodMetrics): each container's usage,
    when it was sampled and over what window (seconds)."""

    containers: Mapping[str, Mapping[str, QuantityLike]]
    timestamp: float
    window: float = 0.0


@dataclass(frozen=True, slots=True)
class MetricResult:
    """One metric's proposal, or why it has none.

    ``current_milli`` is what ``status.currentMetrics`` shows: the total for value targets, the per-pod
    average (rounded up) for averageValue targets, the raw average for utilization targets (with the
    percentage in ``utilization``). ``error`` is the message of the condition Kubernetes sets when every
    metric fails (ScalingActive False, reason ``metric.FAILED``)."""

    metric: MetricSource
    replicas: int | None
    current_milli: int | None
    error: str | None = None
    utilization: int | None = None

    @property
    def reason(self) -> str:
        """The condition reason a failure is reported under (FailedGetExternalMetric, ...)."""
        return self.metric.FAILED


@dataclass(frozen=True, slots=True)
class MetricInputs:
    """Everything one sync's metrics read besides External samples: the scale's replicas, the target's pods,
    the answers of the custom and resource metrics APIs, and the controller settings they use."""

    spec_replicas: int
    status_replicas: int
    ready_replicas: int
    #: The pods the target's selector lists; None: not listed (every pod-based metric then fails as with
    #: no pods, and value metrics multiply by ``ready_replicas``).
    pods: tuple[TargetPod, ...] | None = None
    #: Object metrics' values by ``ObjectMetric.key`` (absent: the custom metrics API has none).
    objects: Mapping[str, QuantityLike] = field(default_factory=dict)
    #: Pods metrics by ``PodsMetric.key``: each pod's value by pod name.
    pod_values: Mapping[str, Mapping[str, QuantityLike]] = field(default_factory=dict)
    #: The resource metrics API: each pod's usage by pod name.
    usage: Mapping[str, PodUsage] = field(default_factory=dict)
    namespace: str = "default"
    now: float = 0.0
    tolerances: Tolerances = (DEFAULT_TOLERANCE, DEFAULT_TOLERANCE)
    cpu_initialization_period: float = DEFAULT_CPU_INITIALIZATION_PERIOD_SECONDS
    initial_readiness_delay: float = DEFAULT_INITIAL_READINESS_DELAY_SECONDS


# --------------------------------------------------------------------------------------------------
# Arithmetic helpers
# --------------------------------------------------------------------------------------------------


def within(ratio: float, tolerances: Tolerances) -> bool:
    """Tolerances.isWithin: [1 - down, 1 + up], inclusive; comparisons with NaN are false, so a NaN ratio
    is never within."""
    return (1.0 - tolerances[0]) <= ratio <= (1.0 + tolerances[1])


def ceil_int32(x: float) -> int:
    """``int32(math.Ceil(x))``, capped at 2^31 - 1 where Go's conversion would be undefined."""
    return MAX_INT32 if x > MAX_INT32 else math.ceil(x)


def _go_div(a: int, b: int) -> int:
    """Go's integer division: truncates toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _sum_per_pod(values: Sequence[int]) -> int:
    # GetExternalPerPodMetricReplicas: an int64 overflow (the running sum going negative) reads as MaxInt64.
    usage = 0
    for value in values:
        usage += value
        if usage < 0 or usage > MAX_INT64:
            return MAX_INT64
    return usage


def _sum_capped(values: Sequence[int]) -> int:
    # GetExternalMetricReplicas: a positive value that would overflow caps the sum at MaxInt64.
    usage = 0
    for value in values:
        if value > 0 and usage > MAX_INT64 - value:
            return MAX_INT64
        usage += value
    return usage


def _usage_ratio_replicas(
    spec_replicas: int,
    ratio: float,
    pods: Sequence[TargetPod] | None,
    ready_replicas: int,
    status_replicas: int,
    tolerances: Tolerances,
) -> int | str:
    """getUsageRatioReplicaCount: a value metric's proposal, or the error text. The ready pods are the
    Running and Ready ones of ``pods`` when listed, else ``ready_replicas`` (none listed: ``status_replicas``
    is 0)."""
    if spec_replicas == 0:
        return ceil_int32(ratio)  # scale from (or stay at) zero: no tolerance, no pods
    if within(ratio, tolerances):
        return spec_replicas
    if pods is not None:
        if not pods:
            return f"unable to calculate ready pods: {_NO_PODS}"
        ready_replicas = sum(1 for pod in pods if pod.counts_as_ready)
    elif status_replicas == 0:
        return f"unable to calculate ready pods: {_NO_PODS}"
    return ceil_int32(ratio * float(ready_replicas))


# --------------------------------------------------------------------------------------------------
# External and Object metrics
# --------------------------------------------------------------------------------------------------


def external_metric_replicas(
    metric: ExternalMetric,
    samples: Sequence[QuantityLike] | None,
    *,
    spec_replicas: int,
    status_replicas: int,
    ready_replicas: int,
    tolerances: Tolerances = (DEFAULT_TOLERANCE, DEFAULT_TOLERANCE),
    namespace: str = "default",
    pods: Sequence[TargetPod] | None = None,
) -> MetricResult:
    """The replica count one External metric proposes (computeStatusForExternalMetric).

    ``samples`` are the values the external metrics API returns for the metric's selector. averageValue
    (GetExternalPerPodMetricReplicas): ratio = total / (target x status_replicas); within tolerance keep
    ``status_replicas``, else ``ceil(total / target)`` (at 0 replicas the ratio is infinite, or NaN for a
    zero total, so never within). value (GetExternalMetricReplicas): ratio = total / target; at
    ``spec_replicas`` 0 propose ``ceil(ratio)``, else keep ``spec_replicas`` within tolerance or propose
    ``ceil(ratio x ready pods)``: the Running and Ready ones of ``pods`` when listed, else
    ``ready_replicas`` (an error when no pods are listed, or when not listed and ``status_replicas`` is 0).
    No samples is an error, as in Kubernetes."""
    if not samples:
        return MetricResult(
            metric,
            None,
            None,
            f"unable to get external metric {namespace}/{metric.name}/{go_selector(metric.selector)}: "
            "no metrics returned from external metrics API",
        )
    per_pod = metric.target.per_pod
    if len(samples) == 1:
        usage = to_milli(samples[0])
        if not 0 <= usage <= MAX_INT64:
            usage = _sum_per_pod([usage]) if per_pod else _sum_capped([usage])
    else:
        milli = [to_milli(sample) for sample in samples]
        usage = _sum_per_pod(milli) if per_pod else _sum_capped(milli)
    target = metric.target.milli_value
    if per_pod:
        replicas = status_replicas
        if not (status_replicas != 0 and within(float(usage) / (float(target) * float(status_replicas)), tolerances)):
            replicas = ceil_int32(float(usage) / float(target))
        return MetricResult(metric, replicas, _per_pod_usage(usage, status_replicas))
    ratio = float(usage) / float(target)
    proposal = _usage_ratio_replicas(spec_replicas, ratio, pods, ready_replicas, status_replicas, tolerances)
    if isinstance(proposal, str):
        return MetricResult(metric, None, usage, proposal)
    return MetricResult(metric, proposal, usage)


def _per_pod_usage(usage: int, status_replicas: int) -> int:
    # The averageValue status: ceil(total / status replicas); at 0 replicas Go divides by zero (its int64
    # conversion of +Inf is implementation-defined): shown as 0.
    if float(usage) >= float(MAX_INT64):
        return MAX_INT64
    return 0 if status_replicas == 0 else math.ceil(float(usage) / float(status_replicas))


def object_metric_replicas(metric: ObjectMetric, inputs: MetricInputs) -> MetricResult:
    """The replica count one Object metric proposes (computeStatusForObjectMetric): ``type: Value`` as an
    External value metric (GetObjectMetricReplicas), ``type: AverageValue`` as an External averageValue
    one (GetObjectPerPodMetricReplicas), anything else an error."""
    if not (metric.uses_value or metric.uses_average):
        problem = "invalid object metric source: neither a value target nor an average value target was set"
        return MetricResult(metric, None, None, problem)
    ref = metric.described_object
    value = inputs.objects.get(metric.key)
    if value is None:
        # replica_calculator.go's wording (its arguments in that order).
        problem = (
            "unable to fetch metrics from custom metrics API: the server could not find the metric "
            f"{metric.name} for {ref.kind} {ref.name}"
        )
        where = f"{ref.kind} on {inputs.namespace} {ref.name}"
        return MetricResult(metric, None, None, f"unable to get metric {metric.name}: {where}/{problem}")
    usage = to_milli(value)
    if metric.uses_value:
        assert metric.target.value_milli is not None
        ratio = float(usage) / float(metric.target.value_milli)
        proposal = _usage_ratio_replicas(
            inputs.spec_replicas, ratio, inputs.pods, inputs.ready_replicas, inputs.status_replicas, inputs.tolerances
        )
        if isinstance(proposal, str):
            return MetricResult(metric, None, usage, proposal)
        return MetricResult(metric, proposal, usage)
    assert metric.target.average_milli is not None
    target = metric.target.average_milli
    status = inputs.status_replicas
    replicas = status
    if not (status != 0 and within(float(usage) / (float(target) * float(status)), inputs.tolerances)):
        replicas = ceil_int32(float(usage) / float(target))
    return MetricResult(metric, replicas, _per_pod_usage(usage, status))


# --------------------------------------------------------------------------------------------------
# Pod-based metrics: Pods, Resource, ContainerResource
# --------------------------------------------------------------------------------------------------

#: A pod's sample: (value in milli-units, timestamp, window).
_Sample: TypeAlias = tuple[int, float, float]


def _group_pods(
    pods: Sequence[TargetPod], metrics: Mapping[str, _Sample], resource: str, inputs: MetricInputs
) -> tuple[int, set[str], set[str], set[str]]:
    """groupPods: (ready count, unready, missing, ignored)."""
    ready = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    now = inputs.now
    for pod in pods:
        if pod.deleting or pod.phase == "Failed":
            ignored.add(pod.name)
            continue
        if pod.phase == "Pending":
            unready.add(pod.name)
            continue
        sample = metrics.get(pod.name)
        if sample is None:
            missing.add(pod.name)
            continue
        if resource == "cpu":
            since = GO_ZERO_TIME if pod.ready_since is None else pod.ready_since
            if pod.ready is None or pod.started is None:
                not_ready = True
            elif pod.started + inputs.cpu_initialization_period > now:
                # Within the initialization period: unready until a full window was sampled after readiness.
                not_ready = pod.ready is False or sample[1] < since + sample[2]
            else:
                # Ignore the sample of a pod that is unready and has never been ready.
                not_ready = pod.ready is False and pod.started + inputs.initial_readiness_delay > since
            if not_ready:
                unready.add(pod.name)
                continue
        ready += 1
    return ready, unready, missing, ignored


def _requests(pods: Sequence[TargetPod], container: str, resource: str) -> dict[str, int] | str:
    """calculateRequests (container requests; tidegate's pods set no pod-level requests): each pod's
    request in milli-units, or the error text."""
    out: dict[str, int] = {}
    for pod in pods:
        request = 0
        found = False
        for name, requests in pod.requests.items():
            if container in ("", name):
                amount = requests.get(resource)
                if amount is None:
                    return f"missing request for {resource} in container {name} of Pod {pod.name}"
                request += to_milli(amount)
            if container == name:
                found = True
                break
        if container and not found:
            return f"container {container} not found in Pod {pod.name}"
        out[pod.name] = request
    return out


def _utilization_ratio(
    metrics: Mapping[str, _Sample], requests: Mapping[str, int], target: int
) -> tuple[float, int, int] | str:
    """GetResourceUtilizationRatio: (ratio, utilization %, raw average), or the error text."""
    total = requested = entries = 0
    for name, sample in metrics.items():
        request = requests.get(name)
        if request is None:
            continue  # a sample of a pod the selector no longer lists
        total += sample[0]
        requested += request
        entries += 1
    if requested == 0:
        return "no metrics returned matched known pods"
    percentage = _go_div(total * 100, requested)
    if not MIN_INT32 <= percentage <= MAX_INT32:
        return f"resource utilization {percentage} is outside the int32 range"
    return float(percentage) / float(target), percentage, _go_div(total, entries)


def _usage(metrics: Mapping[str, _Sample], target: int) -> tuple[float, int]:
    """GetMetricUsageRatio: (ratio, average)."""
    average = _go_div(sum(sample[0] for sample in metrics.values()), len(metrics))
    return float(average) / float(target), average


def _rebalanced(
    current: int,
    ratio: float,
    metrics: dict[str, _Sample],
    unready: set[str],
    missing: set[str],
    missing_value: Mapping[str, int],
    recompute: Callable[[dict[str, _Sample]], float | str],
    tolerances: Tolerances,
) -> int | str:
    """The second pass for missing and unready pods (shared by GetResourceReplicas and
    calcPlainMetricReplicas): ``recompute`` gives the new ratio (or an error) from the adjusted samples."""
    if missing:
        if ratio < 1.0:
            for name in missing:  # a scale-down: missing pods at their fallback usage
                metrics[name] = (missing_value[name], 0.0, 0.0)
        elif ratio > 1.0:
            for name in missing:  # a scale-up: missing pods use nothing
                metrics[name] = (0, 0.0, 0.0)
    if unready and ratio > 1.0:
        for name in unready:
            metrics[name] = (0, 0.0, 0.0)
    new_ratio = recompute(metrics)
    if isinstance(new_ratio, str):
        return new_ratio
    if within(new_ratio, tolerances) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current  # the change would be too small, or would reverse the direction
    replicas = ceil_int32(new_ratio * float(len(metrics)))
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return current  # counting the pods would reverse the direction
    return replicas


def _plain_replicas(
    metrics: dict[str, _Sample], current: int, target: int, inputs: MetricInputs, resource: str
) -> tuple[int, int] | str:
    """calcPlainMetricReplicas: (proposal, average usage), or the error text."""
    pods = inputs.pods or ()
    if not pods:
        return _NO_PODS
    ready, unready, missing, ignored = _group_pods(pods, metrics, resource, inputs)
    for name in ignored | unready:
        metrics.pop(name, None)
    if not metrics:
        return _NO_POD_METRICS
    ratio, usage = _usage(metrics, target)
    if not (unready and ratio > 1.0) and not missing:
        if within(ratio, inputs.tolerances):
            return current, usage
        return ceil_int32(ratio * float(ready)), usage
    proposal = _rebalanced(
        current,
        ratio,
        metrics,
        unready,
        missing,
        dict.fromkeys(missing, target),
        lambda adjusted: _usage(adjusted, target)[0],
        inputs.tolerances,
    )
    return proposal if isinstance(proposal, str) else (proposal, usage)


def pods_metric_replicas(metric: PodsMetric, inputs: MetricInputs) -> MetricResult:
    """The replica count one Pods metric proposes (computeStatusForPodsMetric, GetMetricReplicas)."""
    values = inputs.pod_values.get(metric.key)
    if not values:
        problem = "no metrics returned from custom metrics API"
        return MetricResult(metric, None, None, f"unable to get metric {metric.name}: {problem}")
    assert metric.target.average_milli is not None
    metrics = {name: (to_milli(value), inputs.now, 0.0) for name, value in values.items()}
    outcome = _plain_replicas(metrics, inputs.spec_replicas, metric.target.average_milli, inputs, "")
    if isinstance(outcome, str):
        return MetricResult(metric, None, None, outcome)
    return MetricResult(metric, outcome[0], outcome[1])


def _resource_samples(
    usage: Mapping[str, PodUsage], resource: str, container: str, namespace: str
) -> dict[str, _Sample] | str:
    """The resource metrics client (GetResourceMetric): each pod's usage summed over its containers (a pod
    missing the resource in one of them, or with none, has no sample), or the named container's."""
    if not usage:
        return "no metrics returned from resource metrics API"
    out: dict[str, _Sample] = {}
    for name, pod in usage.items():
        if container:
            if container not in pod.containers:
                where = f"{namespace}/{name}"
                return f"failed to get container metrics: container {container} not present in metrics for pod {where}"
            amount = pod.containers[container].get(resource)
            if amount is not None:
                out[name] = (to_milli(amount), pod.timestamp, pod.window)
            continue
        total = 0
        complete = bool(pod.containers)
        for values in pod.containers.values():
            amount = values.get(resource)
            if amount is None:
                complete = False
                break
            total += to_milli(amount)
        if complete:
            out[name] = (total, pod.timestamp, pod.window)
    return out


def resource_metric_replicas(metric: ResourceMetric | ContainerResourceMetric, inputs: MetricInputs) -> MetricResult:
    """The replica count one Resource or ContainerResource metric proposes
    (computeStatusForResourceMetricGeneric): averageValue set, GetRawResourceReplicas; else
    averageUtilization, GetResourceReplicas."""
    resource, container, target = metric.name, metric.container, metric.target
    kind = "usage" if target.average_value is not None else "utilization"

    def failed(problem: str) -> MetricResult:
        return MetricResult(metric, None, None, f"failed to get {resource} {kind}: {problem}")

    samples = _resource_samples(inputs.usage, resource, container, inputs.namespace)
    if isinstance(samples, str):
        return failed(f"unable to get metrics for resource {resource}: {samples}")
    current = inputs.spec_replicas
    if target.average_milli is not None:
        outcome = _plain_replicas(samples, current, target.average_milli, inputs, resource)
        if isinstance(outcome, str):
            return failed(outcome)
        return MetricResult(metric, outcome[0], outcome[1])
    assert target.average_utilization is not None
    utilization_target = target.average_utilization
    pods = inputs.pods or ()
    if not pods:
        return failed(_NO_PODS)
    ready, unready, missing, ignored = _group_pods(pods, samples, resource, inputs)
    for name in ignored | unready:
        samples.pop(name, None)
    if not samples:
        return failed(_NO_POD_METRICS)
    requests = _requests(pods, container, resource)
    if isinstance(requests, str):
        return failed(requests)
    first = _utilization_ratio(samples, requests, utilization_target)
    if isinstance(first, str):
        return failed(first)
    ratio, utilization, raw = first
    if not (unready and ratio > 1.0) and not missing:
        proposal: int | str = current if within(ratio, inputs.tolerances) else ceil_int32(ratio * float(ready))
    else:
        fallback = max(100, utilization_target)  # missing pods on a scale-down: 100%, or the target above it
        proposal = _rebalanced(
            current,
            ratio,
            samples,
            unready,
            missing,
            {name: _go_div(requests[name] * fallback, 100) for name in missing},
            lambda adjusted: _ratio_only(_utilization_ratio(adjusted, requests, utilization_target)),
            inputs.tolerances,
        )
    if isinstance(proposal, str):
        return failed(proposal)
    return MetricResult(metric, proposal, raw, utilization=utilization)


def _ratio_only(outcome: tuple[float, int, int] | str) -> float | str:
    return outcome if isinstance(outcome, str) else outcome[0]


def metric_replicas(
    metric: MetricSource, inputs: MetricInputs, external: Mapping[str, Sequence[QuantityLike]]
) -> MetricResult:
    """One metric's proposal (computeReplicasForMetric), whatever its source; External samples are looked up
    by ``metric.key``, then by plain name."""
    if isinstance(metric, ExternalMetric):
        samples = external.get(metric.key)
        if samples is None:
            samples = external.get(metric.name)
        return external_metric_replicas(
            metric,
            samples,
            spec_replicas=inputs.spec_replicas,
            status_replicas=inputs.status_replicas,
            ready_replicas=inputs.ready_replicas,
            tolerances=inputs.tolerances,
            namespace=inputs.namespace,
            pods=inputs.pods,
        )
    if isinstance(metric, ObjectMetric):
        return object_metric_replicas(metric, inputs)
    if isinstance(metric, PodsMetric):
        return pods_metric_replicas(metric, inputs)
    return resource_metric_replicas(metric, inputs)
