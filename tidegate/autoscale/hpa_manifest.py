"""Read an autoscaling/v2 HorizontalPodAutoscaler manifest into an ``HPASpec``.

Defaults are filled the way the Kubernetes API server fills them (pkg/apis/autoscaling/v2/defaults.go):
``minReplicas`` 1; inside a present ``behavior``, each of ``scaleUp``/``scaleDown`` starts from the
default rules and takes every field the manifest sets (``copyHPAScalingRules``). A manifest without
``behavior`` keeps ``behavior=None``, which the controller treats differently (see ``hpa.py``).

What is rejected here is what has no meaning to evaluate: wrong types, unknown enum values, missing
required fields, non-positive targets, policy values or periods, negative windows or replica counts,
and metric specs the API server's validation.go refuses (a type with no member, or another type's
member beside it; a target without what its source needs, or with both of two exclusive fields). Every
metric type parses (External, Object, Pods, Resource, ContainerResource); without metrics Kubernetes
defaults to cpu at 80% utilization, and so does this. Whether tidegate can supply a metric's samples is
the loader's question (``tidegate/fleet/hpa_supply.py``). Settings the Kubernetes API server would also
refuse but that still have a defined effect (``maxReplicas < minReplicas``, windows over 3600 s,
periods over 1800 s) load, and ``check_hpa`` reports them. Every problem found is reported at once,
each naming its field.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import cast

from tidegate.autoscale.hpa import (
    DEFAULT_CPU_UTILIZATION,
    DEFAULT_SCALE_DOWN_RULES,
    DEFAULT_SCALE_UP_RULES,
    POLICY_TYPES,
    SELECT_POLICIES,
    HPABehavior,
    HPAScalingPolicy,
    HPAScalingRules,
    HPASpec,
    PolicyType,
    SelectPolicy,
)
from tidegate.autoscale.hpa_metrics import (
    METRIC_SOURCE_TYPES,
    SELECTOR_OPERATORS,
    TARGET_TYPES,
    ContainerResourceMetric,
    ExternalMetric,
    LabelSelector,
    LabelSelectorRequirement,
    MetricSource,
    MetricTarget,
    ObjectMetric,
    ObjectReference,
    PodsMetric,
    ResourceMetric,
    SelectorOperator,
    TargetType,
)
from tidegate.model.errors import FieldError, ManifestError, ManifestErrors, Source
from tidegate.model.quantity import parse_quantity
from tidegate.model.resources import CPU

KIND = "HorizontalPodAutoscaler"
API_VERSIONS = ("autoscaling/v2", "autoscaling/v2beta2")


class _Fields:
    """Collects field errors while reading one document, so all of them are reported together."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def fail(self, field: str, message: str) -> None:
        self.errors.append(FieldError(field, message))

    def mapping(
        self, parent: Mapping[str, object], key: str, path: str, *, required: bool
    ) -> Mapping[str, object] | None:
        value = parent.get(key)
        if value is None:
            if required:
                self.fail(path, "required field is missing")
            return None
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            self.fail(path, f"must be a mapping, not {type(value).__name__}")
            return None
        return cast(Mapping[str, object], value)

    def string(self, parent: Mapping[str, object], key: str, path: str, *, required: bool) -> str | None:
        value = parent.get(key)
        if value is None or value == "":
            if required:
                self.fail(path, "required field is missing")
            return None
        if not isinstance(value, str):
            self.fail(path, f"{value!r} must be a string")
            return None
        return value

    def integer(
        self, parent: Mapping[str, object], key: str, path: str, *, minimum: int, required: bool = False
    ) -> int | None:
        value = parent.get(key)
        if value is None:
            if required:
                self.fail(path, "required field is missing")
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(path, f"{value!r} must be an integer")
            return None
        if value < minimum:
            bound = "greater than zero" if minimum == 1 else f"greater than or equal to {minimum}"
            self.fail(path, f"{value} must be {bound}")
            return None
        return value

    def choice(
        self, parent: Mapping[str, object], key: str, path: str, choices: tuple[str, ...], *, required: bool
    ) -> str | None:
        value = self.string(parent, key, path, required=required)
        if value is not None and value not in choices:
            self.fail(path, f'unsupported value "{value}": supported values: {", ".join(choices)}')
            return None
        return value

    def quantity(self, parent: Mapping[str, object], key: str, path: str, *, positive: bool) -> Fraction | None:
        value = parent.get(key)
        if value is None:
            return None
        try:
            amount = parse_quantity(value, path)
        except FieldError as error:
            self.errors.append(error)
            return None
        if positive and amount <= 0:
            self.fail(path, f"{value} must be positive")
            return None
        if not positive and amount < 0:
            self.fail(path, f"{value} must be greater than or equal to zero")
            return None
        return amount

    def items(self, parent: Mapping[str, object], key: str, path: str) -> list[object] | None:
        value = parent.get(key)
        if value is None:
            return None
        if not isinstance(value, list):
            self.fail(path, f"must be a list, not {type(value).__name__}")
            return None
        return value


def _selector(fields: _Fields, raw: Mapping[str, object], path: str) -> LabelSelector:
    labels = fields.mapping(raw, "matchLabels", f"{path}.matchLabels", required=False) or {}
    pairs: list[tuple[str, str]] = []
    for key, value in labels.items():
        if not isinstance(value, str):
            fields.fail(f"{path}.matchLabels.{key}", f"{value!r} must be a string")
        else:
            pairs.append((key, value))
    expressions: list[LabelSelectorRequirement] = []
    for j, item in enumerate(fields.items(raw, "matchExpressions", f"{path}.matchExpressions") or []):
        item_path = f"{path}.matchExpressions[{j}]"
        if not isinstance(item, Mapping):
            fields.fail(item_path, "must be a mapping")
            continue
        entry = cast(Mapping[str, object], item)
        label = fields.string(entry, "key", f"{item_path}.key", required=True)
        operator = fields.choice(entry, "operator", f"{item_path}.operator", SELECTOR_OPERATORS, required=True)
        values = fields.items(entry, "values", f"{item_path}.values") or []
        if not all(isinstance(v, str) for v in values):
            fields.fail(f"{item_path}.values", "must be a list of strings")
            continue
        if label is None or operator is None:
            continue
        try:
            expressions.append(
                LabelSelectorRequirement(label, cast(SelectorOperator, operator), tuple(cast(list[str], values)))
            )
        except FieldError as error:
            fields.fail(f"{item_path}.{error.field}", error.message)
    return LabelSelector(tuple(sorted(pairs)), tuple(expressions))


def _target(fields: _Fields, parent: Mapping[str, object], path: str) -> MetricTarget | None:
    """validateMetricTarget: a type, and whichever of value, averageValue and averageUtilization are set,
    each positive (the source checks which of them it needs)."""
    raw = fields.mapping(parent, "target", path, required=True)
    if raw is None:
        return None
    target_type = fields.choice(raw, "type", f"{path}.type", TARGET_TYPES, required=True)
    value = fields.quantity(raw, "value", f"{path}.value", positive=True)
    average_value = fields.quantity(raw, "averageValue", f"{path}.averageValue", positive=True)
    utilization = fields.integer(raw, "averageUtilization", f"{path}.averageUtilization", minimum=1)
    given = (("value", value), ("averageValue", average_value), ("averageUtilization", utilization))
    if target_type is None or any(raw.get(key) is not None and parsed is None for key, parsed in given):
        return None  # the bad field's error is recorded
    return MetricTarget(cast(TargetType, target_type), value, average_value, utilization)


def _identifier(fields: _Fields, source: Mapping[str, object], path: str) -> tuple[str | None, LabelSelector | None]:
    """A MetricIdentifier: its name, and its selector (None when absent)."""
    identifier = fields.mapping(source, "metric", f"{path}.metric", required=True) or {}
    name = fields.string(identifier, "name", f"{path}.metric.name", required=True)
    raw_selector = fields.mapping(identifier, "selector", f"{path}.metric.selector", required=False)
    selector = None if raw_selector is None else _selector(fields, raw_selector, f"{path}.metric.selector")
    return name, selector


def _external(fields: _Fields, source: Mapping[str, object], path: str) -> ExternalMetric | None:
    name, selector = _identifier(fields, source, path)
    target = _target(fields, source, f"{path}.target")
    if target is not None:
        if target.value is None and target.average_value is None:
            fields.fail(f"{path}.target.averageValue", "must set either a target value for metric or a per-pod target")
            return None
        if target.value is not None and target.average_value is not None:
            fields.fail(f"{path}.target.value", "may not set both a target value for metric and a per-pod target")
            return None
    if name is None or target is None:
        return None
    return ExternalMetric(name, target, selector)


def _object(fields: _Fields, source: Mapping[str, object], path: str) -> ObjectMetric | None:
    ref = fields.mapping(source, "describedObject", f"{path}.describedObject", required=True)
    kind = object_name = None
    api_version = ""
    if ref is not None:
        kind = fields.string(ref, "kind", f"{path}.describedObject.kind", required=True)
        object_name = fields.string(ref, "name", f"{path}.describedObject.name", required=True)
        api_version = fields.string(ref, "apiVersion", f"{path}.describedObject.apiVersion", required=False) or ""
    name, selector = _identifier(fields, source, path)
    target = _target(fields, source, f"{path}.target")
    if target is not None and target.value is None and target.average_value is None:
        fields.fail(f"{path}.target.averageValue", "must set either a target value or averageValue")
        return None
    if None in (kind, object_name, name, target):
        return None
    assert kind is not None and object_name is not None and name is not None and target is not None
    return ObjectMetric(ObjectReference(kind, object_name, api_version), name, target, selector)


def _pods(fields: _Fields, source: Mapping[str, object], path: str) -> PodsMetric | None:
    name, selector = _identifier(fields, source, path)
    target = _target(fields, source, f"{path}.target")
    if target is not None and target.average_value is None:
        fields.fail(f"{path}.target.averageValue", "must specify a positive target averageValue")
        return None
    if name is None or target is None:
        return None
    return PodsMetric(name, target, selector)


def _resource(
    fields: _Fields, source: Mapping[str, object], path: str, *, container: bool
) -> ResourceMetric | ContainerResourceMetric | None:
    name = fields.string(source, "name", f"{path}.name", required=True)
    container_name = fields.string(source, "container", f"{path}.container", required=True) if container else ""
    target = _target(fields, source, f"{path}.target")
    if target is not None:
        if target.average_utilization is None and target.average_value is None:
            message = "must set either a target raw value or a target utilization"
            fields.fail(f"{path}.target.averageUtilization", message)
            return None
        if target.average_utilization is not None and target.average_value is not None:
            fields.fail(f"{path}.target.averageValue", "may not set both a target raw value and a target utilization")
            return None
    if name is None or container_name is None or target is None:
        return None
    if container:
        return ContainerResourceMetric(name, container_name, target)
    return ResourceMetric(name, target)


#: Each metric source type and the member of the MetricSpec that holds it.
_MEMBERS = {
    "ContainerResource": "containerResource",
    "External": "external",
    "Object": "object",
    "Pods": "pods",
    "Resource": "resource",
}


def _metric(fields: _Fields, raw: object, path: str) -> MetricSource | None:
    """validateMetricSpec: a known type, its member and no other."""
    if not isinstance(raw, Mapping):
        fields.fail(path, "must be a mapping")
        return None
    entry = cast(Mapping[str, object], raw)
    kind = fields.choice(entry, "type", f"{path}.type", METRIC_SOURCE_TYPES, required=True)
    for other in _MEMBERS.values():
        if entry.get(other) is not None and (kind is None or other != _MEMBERS[kind]):
            fields.fail(f"{path}.{other}", "must populate the given metric source only")
    if kind is None:
        return None
    member = _MEMBERS[kind]
    source = fields.mapping(entry, member, f"{path}.{member}", required=True)
    if source is None:
        return None
    path = f"{path}.{member}"
    if kind == "External":
        return _external(fields, source, path)
    if kind == "Object":
        return _object(fields, source, path)
    if kind == "Pods":
        return _pods(fields, source, path)
    return _resource(fields, source, path, container=kind == "ContainerResource")


def _rules(fields: _Fields, raw: Mapping[str, object], path: str, defaults: HPAScalingRules) -> HPAScalingRules:
    window: int | None = defaults.stabilization_window_seconds
    if raw.get("stabilizationWindowSeconds") is not None:
        window = fields.integer(raw, "stabilizationWindowSeconds", f"{path}.stabilizationWindowSeconds", minimum=0)
    select = fields.choice(raw, "selectPolicy", f"{path}.selectPolicy", SELECT_POLICIES, required=False)
    policies = defaults.policies
    raw_policies = fields.items(raw, "policies", f"{path}.policies")
    if raw_policies is not None:
        if not raw_policies:
            fields.fail(f"{path}.policies", "must specify at least one Policy")
        parsed: list[HPAScalingPolicy] = []
        for j, item in enumerate(raw_policies):
            item_path = f"{path}.policies[{j}]"
            if not isinstance(item, Mapping):
                fields.fail(item_path, "must be a mapping")
                continue
            entry = cast(Mapping[str, object], item)
            kind = fields.choice(entry, "type", f"{item_path}.type", POLICY_TYPES, required=True)
            value = fields.integer(entry, "value", f"{item_path}.value", minimum=1, required=True)
            period = fields.integer(entry, "periodSeconds", f"{item_path}.periodSeconds", minimum=1, required=True)
            if kind is not None and value is not None and period is not None:
                parsed.append(HPAScalingPolicy(cast(PolicyType, kind), value, period))
        policies = tuple(parsed) or defaults.policies
    tolerance = defaults.tolerance
    amount = fields.quantity(raw, "tolerance", f"{path}.tolerance", positive=False)
    if amount is not None:
        tolerance = float(amount)
    return HPAScalingRules(
        stabilization_window_seconds=window,
        select_policy=cast(SelectPolicy, select) if select is not None else defaults.select_policy,
        policies=policies,
        tolerance=tolerance,
    )


def _behavior(fields: _Fields, spec: Mapping[str, object]) -> HPABehavior | None:
    if "behavior" not in spec or spec["behavior"] is None:
        return None
    raw = fields.mapping(spec, "behavior", "spec.behavior", required=True)
    if raw is None:
        return None
    up = fields.mapping(raw, "scaleUp", "spec.behavior.scaleUp", required=False) or {}
    down = fields.mapping(raw, "scaleDown", "spec.behavior.scaleDown", required=False) or {}
    return HPABehavior(
        scale_up=_rules(fields, up, "spec.behavior.scaleUp", DEFAULT_SCALE_UP_RULES),
        scale_down=_rules(fields, down, "spec.behavior.scaleDown", DEFAULT_SCALE_DOWN_RULES),
    )


def parse_hpa(doc: Mapping[str, object], source: Source | None = None) -> HPASpec:
    """The ``HPASpec`` of one HorizontalPodAutoscaler document; raises ``ManifestErrors`` listing every
    bad field (e.g. ``spec.behavior.scaleDown.policies[0].type``) with the file and document."""
    source = source if source is not None else Source()
    fields = _Fields()
    if not isinstance(doc, Mapping):
        fields.fail("", f"a manifest must be a mapping, not {type(doc).__name__}")
        doc = {}
    api_version = doc.get("apiVersion")
    if api_version not in API_VERSIONS:
        fields.fail("apiVersion", f"{api_version!r} is not one of {', '.join(API_VERSIONS)}")
    if doc.get("kind") != KIND:
        fields.fail("kind", f"{doc.get('kind')!r} is not {KIND}")
    metadata = fields.mapping(doc, "metadata", "metadata", required=True) or {}
    name = fields.string(metadata, "name", "metadata.name", required=True) or ""
    namespace = fields.string(metadata, "namespace", "metadata.namespace", required=False) or "default"
    spec = fields.mapping(doc, "spec", "spec", required=True) or {}
    ref = fields.mapping(spec, "scaleTargetRef", "spec.scaleTargetRef", required=True) or {}
    target_kind = fields.string(ref, "kind", "spec.scaleTargetRef.kind", required=True)
    target_name = fields.string(ref, "name", "spec.scaleTargetRef.name", required=True)
    target_api_version = fields.string(ref, "apiVersion", "spec.scaleTargetRef.apiVersion", required=False)
    min_replicas = fields.integer(spec, "minReplicas", "spec.minReplicas", minimum=0)
    if spec.get("minReplicas") is None:
        min_replicas = 1
    max_replicas = fields.integer(spec, "maxReplicas", "spec.maxReplicas", minimum=1, required=True)
    raw_metrics = fields.items(spec, "metrics", "spec.metrics") or []
    metrics = [_metric(fields, item, f"spec.metrics[{i}]") for i, item in enumerate(raw_metrics)]
    if not raw_metrics:
        # defaults.go: no metrics means cpu at 80% of the pods' requests.
        metrics = [ResourceMetric(CPU, MetricTarget("Utilization", average_utilization=DEFAULT_CPU_UTILIZATION))]
    behavior = _behavior(fields, spec)
    if fields.errors:
        raise ManifestErrors([ManifestError(source, KIND, name, e.field, e.message) for e in fields.errors])
    assert target_kind is not None and target_name is not None
    assert min_replicas is not None and max_replicas is not None
    return HPASpec(
        name=name,
        namespace=namespace,
        target_api_version=target_api_version or "",
        target_kind=target_kind,
        target_name=target_name,
        min_replicas=min_replicas,
        max_replicas=max_replicas,
        metrics=tuple(m for m in metrics if m is not None),
        behavior=behavior,
        source=source,
    )
