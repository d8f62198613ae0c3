"""Read an autoscaling/v2 HorizontalPodAutoscaler manifest into an ``HPASpec``.

Defaults are filled the way the Kubernetes API server fills them (pkg/apis/autoscaling/v2/defaults.go):
``minReplicas`` 1; inside a present ``behavior``, each of ``scaleUp``/``scaleDown`` starts from the
default rules and takes every field the manifest sets (``copyHPAScalingRules``). A manifest without
``behavior`` keeps ``behavior=None``, which the controller treats differently (see ``hpa.py``).

What is rejected here is what has no meaning to evaluate: wrong types, unknown enum values, missing
required fields, non-positive targets, policy values or periods, negative windows or replica counts,
and metric types other than External (Resource, Pods and Object metrics need per-pod or per-object
samples tidegate does not collect). Settings the Kubernetes API server would also refuse but that
still have a defined effect (``maxReplicas < minReplicas``, windows over 3600 s, periods over 1800 s)
load, and ``check_hpa`` reports them. Every problem found is reported at once, each naming its field.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import cast

from tidegate.autoscale.hpa import (
    DEFAULT_SCALE_DOWN_RULES,
    DEFAULT_SCALE_UP_RULES,
    POLICY_TYPES,
    SELECT_POLICIES,
    SELECTOR_OPERATORS,
    TARGET_TYPES,
    ExternalMetric,
    HPABehavior,
    HPAScalingPolicy,
    HPAScalingRules,
    HPASpec,
    LabelSelector,
    LabelSelectorRequirement,
    MetricTarget,
    PolicyType,
    SelectorOperator,
    SelectPolicy,
    TargetType,
)
from tidegate.model.errors import FieldError, ManifestError, ManifestErrors, Source
from tidegate.model.quantity import parse_quantity

KIND = "HorizontalPodAutoscaler"
API_VERSIONS = ("autoscaling/v2", "autoscaling/v2beta2")
_METRIC_SOURCE_TYPES = ("ContainerResource", "External", "Object", "Pods", "Resource")


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


def _metric(fields: _Fields, raw: object, path: str) -> ExternalMetric | None:
    if not isinstance(raw, Mapping):
        fields.fail(path, "must be a mapping")
        return None
    entry = cast(Mapping[str, object], raw)
    kind = fields.choice(entry, "type", f"{path}.type", _METRIC_SOURCE_TYPES, required=True)
    if kind is None:
        return None
    if kind != "External":
        fields.fail(
            f"{path}.type",
            f"{kind} metrics are not supported: tidegate's HPA evaluates External metrics only "
            "(it has no per-pod or per-object samples to evaluate the others with)",
        )
        return None
    external = fields.mapping(entry, "external", f"{path}.external", required=True)
    if external is None:
        return None
    path = f"{path}.external"
    identifier = fields.mapping(external, "metric", f"{path}.metric", required=True) or {}
    name = fields.string(identifier, "name", f"{path}.metric.name", required=True)
    raw_selector = fields.mapping(identifier, "selector", f"{path}.metric.selector", required=False) or {}
    selector = _selector(fields, raw_selector, f"{path}.metric.selector")
    raw_target = fields.mapping(external, "target", f"{path}.target", required=True)
    if raw_target is None:
        return None
    target_path = f"{path}.target"
    target_type = fields.choice(raw_target, "type", f"{target_path}.type", TARGET_TYPES, required=True)
    value = fields.quantity(raw_target, "value", f"{target_path}.value", positive=True)
    average_value = fields.quantity(raw_target, "averageValue", f"{target_path}.averageValue", positive=True)
    utilization = fields.integer(raw_target, "averageUtilization", f"{target_path}.averageUtilization", minimum=1)
    has_value = raw_target.get("value") is not None
    has_average = raw_target.get("averageValue") is not None
    if not has_value and not has_average:
        fields.fail(f"{target_path}.averageValue", "must set either a target value for metric or a per-pod target")
        return None
    if has_value and has_average:
        fields.fail(f"{target_path}.value", "may not set both a target value for metric and a per-pod target")
        return None
    if name is None or target_type is None or (value is None and average_value is None):
        return None
    target = MetricTarget(cast(TargetType, target_type), value, average_value, utilization)
    return ExternalMetric(name, target, selector)


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
    if not raw_metrics and spec:
        fields.fail(
            "spec.metrics",
            "must list at least one External metric (without metrics Kubernetes defaults to a Resource "
            "cpu metric, which tidegate cannot evaluate)",
        )
    metrics = [_metric(fields, item, f"spec.metrics[{i}]") for i, item in enumerate(raw_metrics)]
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
    )
