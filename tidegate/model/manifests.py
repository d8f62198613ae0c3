"""Load Kubernetes and Volcano manifests the way `kubectl apply -f` reads them.

`load_manifests` takes files, folders (recursively, in sorted order) and "-" for stdin. Every YAML
or JSON document becomes a typed object from tidegate.model.objects that keeps its `source` (file
and document index) and the document itself in `raw`, so fields tidegate does not model survive.

Loading never stops at the first problem: each bad document or field becomes a ManifestError in
`ManifestSet.errors` naming the file, document, object and field, so a user fixes everything in one
pass. Kinds tidegate does not schedule (Deployment, ConfigMap, ...) are listed in `skipped`; a kind or
apiVersion that does not exist in a group tidegate knows (kinds.py) is an error, and so is no object at all.
Resource lists, labels and annotations are checked as Kubernetes' admission checks them (names.py).

Some of those rules ratchet, as Kubernetes' validation ratcheting lets objects already stored be read back
though a rule refuses them now: rules on how a value is written that leave its meaning plain. They are
label keys and values (nodeSelectors too), annotation keys and size, a container's resources (their names,
whole extended resources, a request equal to its limit), an extended resource with a binary suffix, and the
sla-waiting-time annotation. A ratcheting load (`load_text(..., ratchet=True)`, what a store's text is read
back with) records their problems in `ManifestSet.ratcheted` and keeps the value as written (an unreadable
sla-waiting-time is none, as Volcano runs the job without one); any other problem is an error as always.
Cross-object rules (queues that exist, gang sizes, ...) live in validation.py; turning vcjobs and
bare pods into schedulable groups lives in expand.py.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple, NoReturn, TextIO, TypeVar

import yaml

from tidegate.model.errors import FieldError, ManifestError, ManifestErrors, Source
from tidegate.model.kinds import split_api_version, type_problem
from tidegate.model.names import (
    MAX_ANNOTATIONS_BYTES,
    container_resource_problem,
    is_dns1123_label,
    is_extended_resource,
    is_integer_resource,
    is_overcommit_allowed,
    label_value_problem,
    qualified_name_problem,
)
from tidegate.model.objects import (
    DEFAULT_NAMESPACE,
    DEFAULT_QUEUE,
    GPU_INDEX_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
    GROUP_NAME_ANNOTATIONS,
    HIERARCHY_ANNOTATION,
    HIERARCHY_WEIGHTS_ANNOTATION,
    NAMESPACE_NAME_LABEL,
    NAMESPACES_ANNOTATION,
    PLUGIN_SWITCHES,
    PRIORITY_ANNOTATION,
    SLA_WAITING_TIME_ANNOTATIONS,
    TASK_SPEC_ANNOTATION,
    Job,
    JobAction,
    JobEvent,
    LabelSelector,
    LabelSelectorRequirement,
    LifecyclePolicy,
    Namespace,
    Node,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PluginOption,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodGroup,
    PodGroupPhase,
    PodPhase,
    PreemptionPolicy,
    PreferredSchedulingTerm,
    PriorityClass,
    Queue,
    QueueState,
    SchedulerConfiguration,
    Taint,
    TaintEffect,
    TaskSpec,
    Tier,
    Toleration,
    preemptable_setting,
)
from tidegate.model.quantity import parse_quantity, scale_of, to_canonical
from tidegate.model.resources import EMPTY, GPU_MEMORY, GPU_NUMBER, NVIDIA_GPU, Resources

PREEMPT_LOWER_PRIORITY = PreemptionPolicy.PREEMPT_LOWER_PRIORITY
#: The C loader is several times faster on large node lists; fall back to pure Python without libyaml.
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
#: Bound on each of the module's memo tables (scalar tags, canonical quantities).
_MEMO_LIMIT = 1 << 16
_tag_memo: dict[tuple[str, Any], str] = {}


class _ManifestLoader(_SAFE_LOADER):  # type: ignore[valid-type,misc]
    """The safe loader with the implicit tag of each scalar memoised.

    Resolving a plain scalar ("126", "True", "NoSchedule") tries a list of regular expressions; node
    lists repeat the same few values thousands of times; the memo saves about a tenth of the YAML time.
    Safe because the safe loader has no path resolvers: the tag depends on the value alone.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        """A mapping that names a key twice is an error (PyYAML would keep the last silently: a missing
        `---` between two documents merges them)."""
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = key_node.value
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )
                seen.add(key)
        return dict(super().construct_mapping(node, deep=deep))

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
        if kind is not yaml.ScalarNode:
            return str(super().resolve(kind, value, implicit))
        key = (value, implicit)
        tag = _tag_memo.get(key)
        if tag is None:
            tag = str(super().resolve(kind, value, implicit))
            if len(_tag_memo) < _MEMO_LIMIT:
                _tag_memo[key] = tag
        return tag


_YAML_LOADER = _ManifestLoader
#: File endings read when a folder is given (an explicitly named file is read whatever its ending).
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
#: Priority of the class names tidegate knows without a PriorityClass object (with a warning).
BUILTIN_PRIORITIES: Mapping[str, int] = {"high": 1000, "medium": 500, "low": 100}
#: The queue a bare pod joins, as Volcano's PodGroup controller reads it.
QUEUE_NAME_ANNOTATION = "scheduling.volcano.sh/queue-name"
DEFAULT_SCHEDULER = "volcano"
REQUIRED_AFFINITY = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED_AFFINITY = "preferredDuringSchedulingIgnoredDuringExecution"
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")

T = TypeVar("T")
E = TypeVar("E", bound=Enum)

Manifest = Node | Queue | PodGroup | Job | Pod | PriorityClass | SchedulerConfiguration | Namespace


class SkippedDocument(NamedTuple):
    """A document of a kind tidegate does not schedule; it compares equal to (source, kind, name)."""

    source: Source
    kind: str
    name: str


@dataclass(slots=True)
class ManifestSet:
    """Everything read from a set of manifests, in load order, plus what went wrong."""

    nodes: list[Node] = field(default_factory=list)
    queues: list[Queue] = field(default_factory=list)
    podgroups: list[PodGroup] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    priority_classes: list[PriorityClass] = field(default_factory=list)
    configurations: list[SchedulerConfiguration] = field(default_factory=list)
    namespaces: list[Namespace] = field(default_factory=list)
    skipped: list[SkippedDocument] = field(default_factory=list)
    #: The content of each skipped document, for loaders of other kinds (simulation specs, HPAs).
    other_documents: list[tuple[Source, dict[str, Any]]] = field(default_factory=list)
    warnings: list[ManifestError] = field(default_factory=list)
    errors: list[ManifestError] = field(default_factory=list)
    #: What a ratcheting load (`load_text(..., ratchet=True)`: a store's text read back) found breaking a rule
    #: that ratchets (see the module's docstring), each value kept as written instead of an error.
    ratcheted: list[ManifestError] = field(default_factory=list)

    def add(self, obj: Manifest) -> None:
        """Append an object to the list of its kind."""
        match obj:
            case Node():
                self.nodes.append(obj)
            case Queue():
                self.queues.append(obj)
            case PodGroup():
                self.podgroups.append(obj)
            case Job():
                self.jobs.append(obj)
            case Pod():
                self.pods.append(obj)
            case PriorityClass():
                self.priority_classes.append(obj)
            case SchedulerConfiguration():
                self.configurations.append(obj)
            case Namespace():
                self.namespaces.append(obj)

    def raise_for_errors(self) -> None:
        """Raise ManifestErrors carrying every error, if there is any."""
        if self.errors:
            raise ManifestErrors(list(self.errors))


# --- public entry points -------------------------------------------------------------------------


def load_manifests(paths: Sequence[str], stdin: TextIO | None = None) -> ManifestSet:
    """Load files, folders (recursively *.yaml, *.yml, *.json, sorted) and "-" (stdin) into one set.

    Never raises for bad input: problems are collected in `errors` (and `warnings`); call
    `raise_for_errors()` or `validation.validate()` next.
    """
    session = _Session()
    for path in paths:
        if path == "-":
            session.load_text((stdin or sys.stdin).read(), "-")
        else:
            _load_path(Path(path), session)
    session.require_objects(", ".join(paths))
    return session.finish()


def load_text(text: str, file: str = "<memory>", ratchet: bool = False) -> ManifestSet:
    """Load manifests from a YAML (or JSON) string, as if read from `file`; no object in it is an error. With
    `ratchet` (text accepted before, read back), problems of the rules that ratchet are `ratcheted`, not
    errors (see the module's docstring)."""
    session = _Session(ratchet)
    session.load_text(text, file)
    session.require_objects(file)
    return session.finish()


def read_documents(
    paths: Sequence[str],
) -> tuple[list[tuple[Source, object]], list[ManifestError], list[ManifestError]]:
    """The documents of files and folders, parsed from YAML or JSON but not loaded, each with the source it
    would load from (what `load_manifests` reads, in the same order), the errors reading them (a missing
    file, bad YAML) and the warnings (a folder with no manifest). For tools that change documents before
    loading them (`load_documents`)."""
    session = _Session()
    read: list[tuple[Source, object]] = []
    session.sink = lambda doc, source: read.append((source, doc))
    for path in paths:
        _load_path(Path(path), session)
    return read, session.ms.errors, session.ms.warnings


def load_documents(docs: Iterable[tuple[Source, object]], where: str) -> ManifestSet:
    """Load documents already read (`read_documents`, perhaps changed since), each as if from its source,
    exactly as `load_manifests` loads them; no object at all is an error naming `where`."""
    session = _Session()
    for source, doc in docs:
        session.load_document(doc, source)
    session.require_objects(where)
    return session.finish()


def load_objects(docs: Iterable[object], file: str, ratchet: bool = False) -> ManifestSet:
    """Load objects already parsed from JSON (e.g. an API server's list items, each with its apiVersion and
    kind), as if document i of `file`. No object is no error here: a cluster may hold none. `ratchet` as
    `load_text`'s."""
    session = _Session(ratchet)
    for i, doc in enumerate(docs):
        session.load_document(doc, Source(file, i))
    return session.finish()


def resolve_priority(
    name: str,
    classes: Mapping[str, PriorityClass] | Iterable[PriorityClass],
    warn: Callable[[str], None] | None = None,
) -> int:
    """The integer priority a pod with priorityClassName `name` gets, like Kubernetes' admission.

    "" takes the value of the globalDefault class (0 without one). A name without a PriorityClass
    object falls back to BUILTIN_PRIORITIES (high, medium, low) and reports it through `warn`;
    any other undefined name raises FieldError, as Kubernetes rejects such a pod.
    """
    index = classes if isinstance(classes, Mapping) else {pc.name: pc for pc in classes}
    if not name:
        return next((pc.value for pc in index.values() if pc.global_default), 0)
    defined = index.get(name)
    if defined is not None:
        return defined.value
    if name in BUILTIN_PRIORITIES:
        value = BUILTIN_PRIORITIES[name]
        if warn is not None:
            warn(f"PriorityClass {name!r} is not defined; using tidegate's built-in level {value}")
        return value
    builtins = ", ".join(BUILTIN_PRIORITIES)
    raise FieldError("priorityClassName", f"PriorityClass {name!r} is not defined (built-in levels: {builtins})")


def class_of(name: str, classes: Mapping[str, PriorityClass]) -> PriorityClass | None:
    """The PriorityClass a pod with priorityClassName `name` is admitted under: that class, or for "" the
    globalDefault one (as `resolve_priority` takes it); None when there is none (a built-in level)."""
    if name:
        return classes.get(name)
    return next((pc for pc in classes.values() if pc.global_default), None)


def preemption_policy(pod: Pod, spec_prefix: str, priority_class: PriorityClass | None) -> PreemptionPolicy:
    """The pod's spec.preemptionPolicy as Kubernetes' Priority admission plugin sets it: the class's; one the
    pod spec gives that differs from it is refused (FieldError); without a class, the pod's own."""
    spec = pod.raw.get("spec")
    written = spec.get("preemptionPolicy") if isinstance(spec, Mapping) else None
    if priority_class is None:
        return pod.preemption_policy
    if written not in (None, "", priority_class.preemption_policy.value):
        raise FieldError(
            f"{spec_prefix}.preemptionPolicy",
            f"{written!r} must not be given: PriorityClass {priority_class.name} gives "
            f"{priority_class.preemption_policy.value} (Kubernetes refuses such a pod)",
        )
    return priority_class.preemption_policy


def scheduler_conf_prefix(raw: Mapping[str, Any]) -> str:
    """Where a SchedulerConfiguration document keeps actions and tiers: "", "spec", "conf" or "spec.conf"."""
    spec = raw.get("spec")
    body, prefix = (spec, "spec") if isinstance(spec, Mapping) else (raw, "")
    return _join(prefix, "conf") if body.get("conf") is not None else prefix


# --- files and documents ---------------------------------------------------------------------------


def _load_path(path: Path, session: _Session) -> None:
    """Load one file, or every manifest file under a folder in sorted order."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix.lower() in MANIFEST_SUFFIXES and p.is_file())
        if not files:
            session.ms.warnings.append(_problem(Source(str(path), 0), "", "no *.yaml, *.yml or *.json files"))
        for file in files:
            _load_file(file, session)
    elif path.exists():
        _load_file(path, session)
    else:
        session.ms.errors.append(_problem(Source(str(path), 0), "", "no such file or directory"))


def _load_file(path: Path, session: _Session) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        session.ms.errors.append(_problem(Source(str(path), 0), "", f"cannot read: {exc}"))
        return
    if path.suffix.lower() == ".json":
        session.load_json(text, str(path))
    else:
        session.load_text(text, str(path))


def _problem(source: Source, field_: str, message: str) -> ManifestError:
    return ManifestError(source, "", "", field_, message)


@dataclass(slots=True)
class _PriorityRef:
    """A priorityClassName to resolve once every PriorityClass is loaded, and where to put the value."""

    source: Source
    kind: str
    name: str
    field: str
    class_name: str
    assign: Callable[[int], None] | None
    #: Pods (and vcjob templates) of this class, with the path of their spec, whose preemptionPolicy follows it.
    pods: tuple[tuple[Pod, str], ...] = ()


class _Session:
    """One load: the growing ManifestSet and the priority references resolved at the end."""

    def __init__(self, ratchet: bool = False) -> None:
        self.ms = ManifestSet()
        #: Whether problems of the rules that ratchet are ratcheted (the value kept) rather than errors.
        self.ratchet = ratchet
        self.priority_refs: list[_PriorityRef] = []
        #: Objects read (documents that are not empty, and each item of a List).
        self.objects = 0
        #: What each document read from a file goes to: loaded, or kept as it is (`read_documents`).
        self.sink: Callable[[object, Source], None] = self.load_document

    def require_objects(self, where: str) -> None:
        """No object at all is an error, as `kubectl apply` says "no objects passed to apply" (unless
        something else already went wrong: a missing file, bad YAML)."""
        if not self.objects and not self.ms.errors:
            message = "no objects passed: the input holds no document (it is empty, or only '---' and comments)"
            self.ms.errors.append(_problem(Source(where or "-", 0), "", message))

    def load_text(self, text: str, file: str) -> None:
        """Load every document of a YAML stream; a YAML error ends the file at that document."""
        if text.lstrip()[:1] == "{":  # JSON, e.g. a client's json.dumps: its "\ud83d\ude80" escapes are not YAML
            try:
                doc = json.loads(text)
            except (ValueError, RecursionError):
                pass  # YAML's flow style, or bad JSON: YAML says where
            else:
                self.sink(doc, Source(file, 0))
                return
        index = 0
        try:
            for doc in yaml.load_all(text, Loader=_YAML_LOADER):
                self.sink(doc, Source(file, index))
                index += 1
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            self.ms.errors.append(_problem(Source(file, index), "", f"invalid YAML{where}: {exc.problem}"))
        except (yaml.YAMLError, ValueError, RecursionError) as exc:
            self.ms.errors.append(_problem(Source(file, index), "", f"invalid YAML: {exc}"))

    def load_json(self, text: str, file: str) -> None:
        """Load a JSON file holding one object (or a v1 List)."""
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as exc:
            self.ms.errors.append(_problem(Source(file, 0), "", f"invalid JSON: {exc}"))
            return
        self.sink(doc, Source(file, 0))

    def load_document(self, doc: object, source: Source) -> None:
        """Parse one document into its object, or record why it cannot be."""
        if doc is None:  # an empty document, e.g. after a trailing "---": kubectl ignores it too
            return
        if not isinstance(doc, dict):
            self.ms.errors.append(
                _problem(source, "", f"expected an object with apiVersion and kind, got {_shown(doc)}")
            )
            return
        kind, api_version, name = _string_at(doc, "kind"), _string_at(doc, "apiVersion"), _peek_name(doc)
        if not kind or not api_version:
            for key, value in (("apiVersion", api_version), ("kind", kind)):
                if not value:
                    self.ms.errors.append(ManifestError(source, kind, name, key, "is required (a non-empty string)"))
            return
        if kind == "List" and api_version == "v1":
            self._load_list(doc, source, name)
            return
        self.objects += 1
        problem = type_problem(api_version, kind)
        if problem is not None:
            self.ms.errors.append(ManifestError(source, kind, name, *problem))
            return
        parser = _PARSERS.get((split_api_version(api_version)[0], kind))
        if parser is None:
            self.ms.skipped.append(SkippedDocument(source, kind, name))
            self.ms.other_documents.append((source, doc))
            return
        obj = parser(doc, _Reader(self, source, kind, name))
        if obj.name:
            self.ms.add(obj)

    def _load_list(self, doc: dict[str, Any], source: Source, name: str) -> None:
        """A v1 List (what `kubectl get -o yaml` prints): each item is loaded with the List's source."""
        items = doc.get("items")
        if not isinstance(items, list):
            self.ms.errors.append(ManifestError(source, "List", name, "items", "expected a list of objects"))
            return
        for item in items:
            self.load_document(item, source)

    def finish(self) -> ManifestSet:
        """Resolve every recorded priorityClassName now that all PriorityClasses are known."""
        classes = {pc.name: pc for pc in self.ms.priority_classes}
        for ref in self.priority_refs:
            warnings: list[str] = []
            try:
                value = resolve_priority(ref.class_name, classes, warnings.append)
            except FieldError as exc:
                self.ms.errors.append(ManifestError(ref.source, ref.kind, ref.name, ref.field, exc.message))
                continue
            self.ms.warnings.extend(ManifestError(ref.source, ref.kind, ref.name, ref.field, w) for w in warnings)
            if ref.assign is not None:
                ref.assign(value)
            if ref.pods:
                priority_class = class_of(ref.class_name, classes)
                for pod, spec_prefix in ref.pods:
                    try:
                        pod.preemption_policy = preemption_policy(pod, spec_prefix, priority_class)
                    except FieldError as exc:
                        self.ms.errors.append(ManifestError(ref.source, ref.kind, ref.name, exc.field, exc.message))
        return self.ms


def _peek_name(doc: Mapping[str, Any]) -> str:
    """metadata.name if it is a string, for naming the object in errors before it is parsed."""
    meta = doc.get("metadata")
    return _string_at(meta, "name") if isinstance(meta, dict) else ""


def _string_at(data: Mapping[str, Any], key: str) -> str:
    value = data.get(key)
    return value if isinstance(value, str) else ""


# --- field readers ----------------------------------------------------------------------------------
# The `_as_*` functions check one value and raise FieldError naming its field; `_Reader` calls them,
# records an error and carries on with a default, so one document reports all its bad fields.


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _shown(value: object) -> str:
    """A value as an error message shows it: short, with its YAML type."""
    if isinstance(value, dict):
        return "a map"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _as_map(value: Any, field_: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FieldError(field_, f"expected a map, got {_shown(value)}")
    return value


def _as_list(value: Any, field_: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise FieldError(field_, f"expected a list, got {_shown(value)}")
    return value


def _as_str(value: Any, field_: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FieldError(field_, f"expected a string, got {_shown(value)} (quote it)")
    return value


def _as_int(value: Any, field_: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(field_, f"expected an integer, got {_shown(value)}")
    return value


def _as_bool(value: Any, field_: str) -> bool | None:
    if value is None:
        return None
    if not isinstance(value, bool):
        raise FieldError(field_, f"expected true or false, got {_shown(value)}")
    return value


def _as_str_map(value: Any, field_: str) -> dict[str, str]:
    """A map of string to string, such as labels, annotations or a nodeSelector."""
    data = _as_map(value, field_)
    for key, item in data.items():
        if not isinstance(key, str) or not isinstance(item, str):
            raise FieldError(f"{field_}.{key}", f"expected a string, got {_shown(item)} (quote it)")
    return dict(data)  # a copy: changing an object's labels must not change its raw document


def _as_choice(enum: type[E], value: Any, field_: str) -> E:
    if value is None:
        raise FieldError(field_, "is required")
    try:
        return enum(value)
    except ValueError:
        allowed = ", ".join(str(member.value) for member in enum)
        raise FieldError(field_, f"{_shown(value)} is not one of {allowed}") from None


def _raise(field_: str, message: str) -> NoReturn:
    """What refusing a value means outside a ratcheting load: an error (a FieldError for `_Reader.read`)."""
    raise FieldError(field_, message)


#: Refuses a value for breaking one of the rules that ratchet (`_raise`, or `_Reader.refuse`).
Refuse = Callable[[str, str], None]


def _as_resources(
    value: Any, field_: str, keep_zeros: bool = False, integers: bool = False, refuse: Refuse = _raise
) -> Resources | None:
    """A resource list, or None when absent or empty (Volcano reads an empty list as "no limit")."""
    if value is None or value == {}:
        return None
    return _as_resource_list(value, field_, keep_zeros, integers, refuse)


def _as_resource_list(
    value: Any, field_: str, keep_zeros: bool = False, integers: bool = False, refuse: Refuse = _raise
) -> Resources:
    """Like Resources.parse, but each (resource, quantity) pair is parsed once per process.

    Node and pod lists repeat the same quantities thousands of times; exact Fraction parsing of
    each would be the largest cost of loading after YAML itself. Each quantity is checked by
    `_check_count`; `integers` makes extended resources (and pods) whole numbers, as Kubernetes
    requires of containers and nodes and Volcano of queues; `refuse` says what breaking those rules does.
    """
    if value is None:
        return EMPTY
    data = _as_map(value, field_)
    amounts = {}
    for name, quantity in data.items():
        key = resource_field(field_, str(name))
        if type(quantity) in (str, int) and isinstance(name, str):
            amount = _canonical_cached(name, quantity, key)
        else:
            amount = to_canonical(str(name), quantity, key)
        _check_count(str(name), quantity, amount, key, integers, refuse)
        amounts[str(name)] = amount
    return Resources(amounts, keep_zeros=keep_zeros)


_BINARY_SUFFIX = re.compile(r"[0-9.]\s*[KMGTPE]i\s*$")


def _check_count(name: str, quantity: Any, amount: int, field_: str, integer: bool, refuse: Refuse) -> None:
    """An extended resource counts devices (or MiB, or thousandths of a card): a binary suffix is a unit
    mistake ("nvidia.com/gpu: 4Gi" is 4,294,967,296 GPUs to Kubernetes), and with `integer` a quantity of
    an integer resource must be whole (Kubernetes' ValidateResourceQuantityValue)."""
    if name in _PLAIN_RESOURCES:
        return
    extended = is_extended_resource(name)
    if extended and isinstance(quantity, str) and _BINARY_SUFFIX.search(quantity):
        unit = "MiB" if name == GPU_MEMORY else "whole units"
        refuse(
            field_, f"{quantity!r}: {name} is counted in {unit}, not bytes; write a plain number, without Ki, Mi, Gi..."
        )
    if integer and is_integer_resource(name):
        whole = parse_quantity(quantity, field_).denominator == 1 if scale_of(name) == 1 else amount % 1000 == 0
        if not whole:
            refuse(field_, f"{quantity!r}: must be an integer ({name} is counted in whole units)")


#: Resources no check applies to (the common ones, looked up first).
_PLAIN_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


def queue_resources(value: Any, field_: str) -> Resources:
    """A resource list read as a Queue's capability is (declared zeros kept, extended resources whole), for
    what sets one outside a Queue manifest (a budget threshold's capability); raises FieldError."""
    return _as_resource_list(value, field_, keep_zeros=True, integers=True)


def resource_field(field_: str, name: str) -> str:
    """The path of one resource in a resource list, as Kubernetes writes it: requests[nvidia.com/gpu]."""
    return f"{field_}[{name}]"


_canonical_memo: dict[tuple[str, str | int], int] = {}


def _canonical_cached(resource: str, quantity: str | int, field_: str) -> int:
    key = (resource, quantity)
    amount = _canonical_memo.get(key)
    if amount is None:
        amount = to_canonical(resource, quantity, field_)
        if len(_canonical_memo) < _MEMO_LIMIT:
            _canonical_memo[key] = amount
    return amount


def _as_timestamp(value: Any, field_: str) -> float:
    """metadata.creationTimestamp (RFC 3339) as seconds since the epoch; 0.0 when absent."""
    if value is None:
        return 0.0
    if isinstance(value, datetime):  # YAML reads an unquoted timestamp as a datetime
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise FieldError(field_, f"{_shown(value)} is not an RFC 3339 time") from None
    else:
        raise FieldError(field_, f"expected an RFC 3339 time, got {_shown(value)}")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


_DURATION = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def _as_duration(value: Any, field_: str) -> float | None:
    """A Go duration string ("90s", "1h30m") in seconds, as Volcano's policy timeout is written."""
    text = _as_str(value, field_)
    if not text:
        return None
    if text == "0":
        return 0.0
    body = text.removeprefix("-").removeprefix("+")
    if not body or _DURATION.sub("", body):
        raise FieldError(field_, f"{text!r} is not a duration (e.g. 30s, 10m, 1h30m)")
    seconds = sum(float(number) * _DURATION_SECONDS[unit] for number, unit in _DURATION.findall(body))
    return -seconds if text.startswith("-") else seconds


def go_duration(text: str, field_: str) -> float:
    """A Go duration (time.ParseDuration: "30s", "1m30s", "500ms"; "0") in seconds, for options written as
    Kubernetes' tools write them; raises FieldError naming `field_`."""
    seconds = _as_duration(text.strip(), field_)
    if seconds is None:
        raise FieldError(field_, "is empty: give a duration such as 30s or 1m")
    return seconds


#: Go's longest time.Duration (2^63 - 1 nanoseconds), in seconds: time.ParseDuration refuses more.
MAX_GO_DURATION_S = (2**63 - 1) / 1e9


def as_waiting_time(value: Any, field_: str) -> float:
    """An sla-waiting-time in seconds, read as Volcano reads it: a Go duration (time.ParseDuration: "1h2m3s",
    "90m", "1.5h"; units ns, us, µs, ms, s, m, h), which must be positive. Raises FieldError otherwise (Volcano
    logs the error and leaves the job without a waiting time)."""
    if not isinstance(value, str):
        raise FieldError(field_, f"expected a duration string such as 1h30m, got {_shown(value)}")
    seconds = _as_duration(value.strip(), field_)
    if seconds is None:
        raise FieldError(field_, "is empty: give a duration such as 30m or 1h30m")
    if seconds <= 0:
        raise FieldError(field_, f"{value!r}: a waiting time must be positive")
    if seconds > MAX_GO_DURATION_S:
        raise FieldError(field_, f"{value!r}: longer than Go's longest duration (about 2562047h)")
    return seconds


def _waiting_time(annotations: Mapping[str, str], r: _Reader, prefix: str = "metadata.annotations") -> float | None:
    """The sla-waiting-time annotation (SLA_WAITING_TIME_ANNOTATIONS, the first one given), in seconds; one that
    a ratcheting load cannot read is none, as Volcano runs the job without a waiting time."""

    def read(value: Any, field_: str) -> float | None:
        try:
            return as_waiting_time(value, field_)
        except FieldError as exc:
            r.refuse(exc.field, exc.message)
            return None

    for key in SLA_WAITING_TIME_ANNOTATIONS:
        if key in annotations:
            return r.read(read, annotations[key], f"{prefix}.{key}", None)
    return None


class _Reader:
    """Reads the fields of one document, recording each bad field and carrying on with a default."""

    __slots__ = ("kind", "name", "session", "source")

    def __init__(self, session: _Session, source: Source, kind: str, name: str) -> None:
        self.session = session
        self.source = source
        self.kind = kind
        self.name = name

    def error(self, field_: str, message: str) -> None:
        self.session.ms.errors.append(ManifestError(self.source, self.kind, self.name, field_, message))

    def warn(self, field_: str, message: str) -> None:
        self.session.ms.warnings.append(ManifestError(self.source, self.kind, self.name, field_, message))

    def refuse(self, field_: str, message: str) -> None:
        """A value breaks one of the rules that ratchet: an error (raised, inside a parse `read` calls), or in a
        ratcheting load a ratcheted problem, the value kept as written."""
        if not self.session.ratchet:
            _raise(field_, message)
        self.session.ms.ratcheted.append(ManifestError(self.source, self.kind, self.name, field_, message))

    def labels(self, value: Any, field_: str) -> dict[str, str]:
        """Labels or a nodeSelector at `field_` (see _as_labels)."""
        return self.read(lambda v, f: _as_labels(v, f, self.refuse), value, field_, {})

    def annotations(self, value: Any, field_: str) -> dict[str, str]:
        """Annotations at `field_` (see _as_annotations)."""
        return self.read(lambda v, f: _as_annotations(v, f, self.refuse), value, field_, {})

    def read(self, parse: Callable[[Any, str], T], value: Any, field_: str, default: T) -> T:
        """parse(value, field), or `default` after recording the FieldError it raised."""
        try:
            return parse(value, field_)
        except FieldError as exc:
            self.error(exc.field, exc.message)
            return default

    def mapping(self, data: Mapping[str, Any], prefix: str, key: str) -> dict[str, Any]:
        return self.read(_as_map, data.get(key), _join(prefix, key), {})

    def items(self, data: Mapping[str, Any], prefix: str, key: str) -> list[Any]:
        return self.read(_as_list, data.get(key), _join(prefix, key), [])

    def text(self, data: Mapping[str, Any], prefix: str, key: str) -> str:
        return self.read(_as_str, data.get(key), _join(prefix, key), "")

    def integer(self, data: Mapping[str, Any], prefix: str, key: str, default: int) -> int:
        value = self.read(_as_int, data.get(key), _join(prefix, key), None)
        return default if value is None else value

    def optional_integer(self, data: Mapping[str, Any], prefix: str, key: str) -> int | None:
        return self.read(_as_int, data.get(key), _join(prefix, key), None)

    def flag(self, data: Mapping[str, Any], prefix: str, key: str, default: bool) -> bool:
        value = self.read(_as_bool, data.get(key), _join(prefix, key), None)
        return default if value is None else value

    def resources(
        self, data: Mapping[str, Any], prefix: str, key: str, keep_zeros: bool = False, integers: bool = False
    ) -> Resources | None:
        """The resource list at data[key] (see _as_resources); keep_zeros keeps declared zero quantities,
        integers requires whole extended resources."""
        return self.read(
            lambda v, f: _as_resources(v, f, keep_zeros, integers, self.refuse), data.get(key), _join(prefix, key), None
        )

    def choice(self, data: Mapping[str, Any], prefix: str, key: str, enum: type[E], default: E) -> E:
        value = data.get(key)
        if value is None or value == "":
            return default
        return self.read(lambda v, f: _as_choice(enum, v, f), value, _join(prefix, key), default)

    def priority(
        self,
        field_: str,
        class_name: str,
        assign: Callable[[int], None] | None,
        pods: tuple[tuple[Pod, str], ...] = (),
    ) -> None:
        """Resolve `class_name` once all PriorityClasses are loaded and pass the value to `assign`; the `pods`
        (each with its spec's path) take the class's preemptionPolicy, as Kubernetes' admission gives it."""
        ref = _PriorityRef(self.source, self.kind, self.name, field_, class_name, assign, pods)
        self.session.priority_refs.append(ref)


# --- metadata ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Meta:
    name: str
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    created: float


def _metadata(doc: Mapping[str, Any], r: _Reader, default_name: str = "") -> _Meta:
    """metadata.name (required unless a default is given), namespace, labels, annotations, creation time."""
    meta = r.mapping(doc, "", "metadata")
    name = r.text(meta, "metadata", "name") or default_name
    if not name:
        r.error("metadata.name", "is required")
    return _Meta(
        name=name,
        namespace=r.text(meta, "metadata", "namespace") or DEFAULT_NAMESPACE,
        labels=r.labels(meta.get("labels"), "metadata.labels"),
        annotations=r.annotations(meta.get("annotations"), "metadata.annotations"),
        created=r.read(_as_timestamp, meta.get("creationTimestamp"), "metadata.creationTimestamp", 0.0),
    )


def _as_labels(value: Any, field_: str, refuse: Refuse) -> dict[str, str]:
    """metadata.labels as Kubernetes' ValidateLabels checks them: qualified-name keys, label values."""
    labels = _as_str_map(value, field_)
    for key, item in labels.items():
        problem = qualified_name_problem(key)
        if problem:
            refuse(field_, f"key {key[:80]!r}: {problem}")
        problem = label_value_problem(item)
        if problem:
            refuse(field_, f"value {item[:80]!r} of {key!r}: {problem}")
    return labels


def _as_annotations(value: Any, field_: str, refuse: Refuse) -> dict[str, str]:
    """metadata.annotations as Kubernetes' ValidateAnnotations checks them: qualified-name keys, at most
    256 KiB in all (keys and values, in bytes)."""
    annotations = _as_str_map(value, field_)
    for key in annotations:
        problem = qualified_name_problem(key)
        if problem:
            refuse(field_, f"key {key[:80]!r}: {problem}")
    size = sum(len(key.encode()) + len(item.encode()) for key, item in annotations.items())
    if size > MAX_ANNOTATIONS_BYTES:
        refuse(
            field_, f"{size:,} bytes: annotations may hold at most {MAX_ANNOTATIONS_BYTES:,} (256 KiB, keys and values)"
        )
    return annotations


# --- Node -------------------------------------------------------------------------------------------


def _parse_node(doc: dict[str, Any], r: _Reader) -> Node:
    """A v1 Node: allocatable defaults to capacity; GPU cards come from the allocatable GPU resources."""
    meta = _metadata(doc, r)
    spec, status = r.mapping(doc, "", "spec"), r.mapping(doc, "", "status")
    capacity = r.resources(status, "status", "capacity", integers=True) or EMPTY
    allocatable = r.resources(status, "status", "allocatable", integers=True) if "allocatable" in status else capacity
    allocatable = allocatable or EMPTY
    taints: tuple[Taint, ...] = r.read(_as_taints, spec.get("taints"), "spec.taints", ())
    return Node(
        name=meta.name,
        allocatable=allocatable,
        labels=meta.labels,
        annotations=meta.annotations,
        taints=taints,
        capacity=capacity,
        unschedulable=r.flag(spec, "spec", "unschedulable", False),
        ready=r.read(_as_ready, status.get("conditions"), "status.conditions", True),
        gpu_memory_mib=_gpu_cards(allocatable, r),
        source=r.source,
        raw=doc,
    )


def _as_taints(value: Any, field_: str) -> tuple[Taint, ...]:
    taints = []
    for i, item in enumerate(_as_list(value, field_)):
        path = f"{field_}[{i}]"
        data = _as_map(item, path)
        key = _as_str(data.get("key"), f"{path}.key")
        if not key:
            raise FieldError(f"{path}.key", "is required")
        effect = _as_choice(TaintEffect, data.get("effect"), f"{path}.effect")
        taints.append(Taint(key, _as_str(data.get("value"), f"{path}.value"), effect))
    return tuple(taints)


def _as_ready(value: Any, field_: str) -> bool:
    """The Ready condition's status; a node without conditions (hand-written) counts as ready."""
    for i, item in enumerate(_as_list(value, field_)):
        condition = _as_map(item, f"{field_}[{i}]")
        if condition.get("type") == "Ready":
            return condition.get("status") == "True"
    return True


#: GPU cards one node may have: the scheduler tracks each card (largest machines today have 8 to 16).
MAX_GPU_CARDS = 256
#: Pods one vcjob may create, over all its tasks: each is built and tracked (the largest training jobs run
#: a few thousand).
MAX_JOB_PODS = 10_000


def _gpu_cards(allocatable: Resources, r: _Reader) -> tuple[int, ...]:
    """Memory of each GPU card in MiB: volcano.sh/gpu-memory shared evenly over the card count.

    The count is volcano.sh/gpu-number, else nvidia.com/gpu. Cards known only from nvidia.com/gpu
    get 0 MiB: they are used whole, never shared.
    """
    for resource in (GPU_NUMBER, NVIDIA_GPU):
        if allocatable[resource] > MAX_GPU_CARDS * 1000:
            r.error(
                resource_field("status.allocatable", resource),
                f"{allocatable[resource] // 1000} cards: a node has at most {MAX_GPU_CARDS} (each is tracked)",
            )
            return ()
    count_milli = allocatable[GPU_NUMBER] or allocatable[NVIDIA_GPU]
    count_resource = GPU_NUMBER if allocatable[GPU_NUMBER] else NVIDIA_GPU
    if count_milli % 1000:
        r.error(resource_field("status.allocatable", count_resource), "a GPU card count must be a whole number")
        return ()
    count, memory_mib = count_milli // 1000, allocatable[GPU_MEMORY] // 1000
    if memory_mib and not count:
        r.warn(
            resource_field("status.allocatable", GPU_MEMORY),
            f"without {GPU_NUMBER} or {NVIDIA_GPU} the number of cards is unknown; GPU sharing is off here",
        )
        return ()
    return (memory_mib // count,) * count if count else ()


# --- Pod and pod templates --------------------------------------------------------------------------


def _parse_pod(doc: dict[str, Any], r: _Reader) -> Pod:
    """A v1 Pod: requests summed like Kubernetes, group and task from Volcano's annotations."""
    meta = _metadata(doc, r)
    spec, status = r.mapping(doc, "", "spec"), r.mapping(doc, "", "status")
    pod = _pod_from_spec(meta, spec, "spec", r, DEFAULT_SCHEDULER)
    annotations = meta.annotations
    pod.node_name = r.text(spec, "spec", "nodeName")
    pod.phase = r.choice(status, "status", "phase", PodPhase, PodPhase.PENDING)
    pod.nominated_node_name = r.text(status, "status", "nominatedNodeName")
    pod.deleting = bool(r.mapping(doc, "", "metadata").get("deletionTimestamp"))
    pod.group = next((annotations[key] for key in GROUP_NAME_ANNOTATIONS if annotations.get(key)), "")
    pod.task = annotations.get(TASK_SPEC_ANNOTATION, "")
    pod.gpu_indices = r.read(
        _as_gpu_indices, annotations.get(GPU_INDEX_ANNOTATION), f"metadata.annotations.{GPU_INDEX_ANNOTATION}", ()
    )
    pod.raw = doc
    r.priority(_priority_field(spec, "spec"), pod.priority_class_name, _setter(pod), ((pod, "spec"),))
    return pod


def _setter(obj: Pod | PodGroup) -> Callable[[int], None]:
    def assign(value: int) -> None:
        obj.priority = value

    return assign


def _priority_field(spec: Mapping[str, Any], prefix: str) -> str:
    """The field a pod's priority class came from: spec.priorityClassName or the volcano.sh/priority annotation."""
    if spec.get("priorityClassName"):
        return f"{prefix}.priorityClassName"
    return _annotation_field(prefix, PRIORITY_ANNOTATION)


def _annotation_field(spec_prefix: str, annotation: str) -> str:
    """The path of an annotation next to a pod spec: metadata.annotations.<a> or <task>.template.metadata..."""
    return _join(spec_prefix.removesuffix("spec").removesuffix("."), f"metadata.annotations.{annotation}")


def gpu_index(cards: Sequence[int]) -> str | None:
    """Card indices as Volcano's volcano.sh/gpu-index annotation writes them ("0", "0,1"), None for none:
    what `_as_gpu_indices` reads back."""
    return ",".join(map(str, cards)) or None


def _as_gpu_indices(value: Any, field_: str) -> tuple[int, ...]:
    text = _as_str(value, field_)
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise FieldError(field_, f"{text!r} is not a comma-separated list of card indices") from None


def _pod_from_spec(meta: _Meta, spec: Mapping[str, Any], prefix: str, r: _Reader, scheduler: str) -> Pod:
    """The scheduling-relevant part of a pod spec, shared by Pods and vcjob task templates."""
    annotations = meta.annotations
    requests = r.read(lambda v, f: _as_pod_requests(v, f, r.refuse), spec, prefix, EMPTY)
    if GPU_MEMORY not in requests and annotations.get(GPU_MEMORY_ANNOTATION):
        field_ = _annotation_field(prefix, GPU_MEMORY_ANNOTATION)
        amount = r.read(lambda v, f: to_canonical(GPU_MEMORY, v, f), annotations[GPU_MEMORY_ANNOTATION], field_, 0)
        requests = requests + {GPU_MEMORY: amount}
    return Pod(
        name=meta.name,
        namespace=meta.namespace,
        requests=requests,
        labels=meta.labels,
        annotations=annotations,
        node_selector=r.labels(spec.get("nodeSelector"), f"{prefix}.nodeSelector"),
        affinity=_read_affinity(spec, prefix, r),
        pod_affinity=_read_pod_affinity(spec, prefix, r),
        tolerations=r.read(_as_tolerations, spec.get("tolerations"), f"{prefix}.tolerations", ()),
        priority_class_name=r.text(spec, prefix, "priorityClassName") or annotations.get(PRIORITY_ANNOTATION, ""),
        preemption_policy=_given_preemption_policy(spec, prefix, r) or PREEMPT_LOWER_PRIORITY,
        preemptable=_read_preemptable(meta, _metadata_prefix(prefix), r) is not False,
        scheduler_name=r.text(spec, prefix, "schedulerName") or scheduler,
        created=meta.created,
        source=r.source,
    )


def _metadata_prefix(spec_prefix: str) -> str:
    """Where the metadata next to a pod spec is: "" for a Pod, "<task>.template." for a vcjob's template."""
    base = spec_prefix.removesuffix("spec").removesuffix(".")
    return f"{base}." if base else ""


def _given_preemption_policy(spec: Mapping[str, Any], prefix: str, r: _Reader) -> PreemptionPolicy | None:
    """spec.preemptionPolicy as written (None when it is not)."""
    if spec.get("preemptionPolicy") in (None, ""):
        return None
    return r.choice(spec, prefix, "preemptionPolicy", PreemptionPolicy, PREEMPT_LOWER_PRIORITY)


def _read_preemptable(meta: _Meta, prefix: str, r: _Reader) -> bool | None:
    """volcano.sh/preemptable on an object (None when not set); a value Volcano cannot read counts as false,
    as it does, with a warning."""
    value, bad = preemptable_setting(meta.annotations, meta.labels)
    if bad:
        r.warn(f"{prefix}{bad}", "not true or false (Go's ParseBool): read as false, as Volcano does")
    return value


def _as_pod_requests(spec: Mapping[str, Any], prefix: str, refuse: Refuse) -> Resources:
    """A pod's effective request, as Kubernetes computes it.

    max(sum of containers + restartable (sidecar) init containers, the peak of the init phase), where
    a container's request for a resource falls back to its limit when only the limit is given.
    """
    total = EMPTY
    for i, container in enumerate(_as_list(spec.get("containers"), f"{prefix}.containers")):
        total = total + _as_container_requests(container, f"{prefix}.containers[{i}]", refuse)
    sidecars, init_peak = EMPTY, EMPTY
    for i, container in enumerate(_as_list(spec.get("initContainers"), f"{prefix}.initContainers")):
        field_ = f"{prefix}.initContainers[{i}]"
        request = _as_container_requests(container, field_, refuse)
        if container.get("restartPolicy") == "Always":
            sidecars = sidecars + request
            init_peak = _peak(init_peak, sidecars)
        else:
            init_peak = _peak(init_peak, request + sidecars)
    return _peak(total + sidecars, init_peak)


def _as_container_requests(value: Any, field_: str, refuse: Refuse) -> Resources:
    """A container's requests, checked as Kubernetes' ValidateResourceRequirements checks them: resource
    names a container may ask, whole extended resources, a request at most its limit (equal to it for an
    extended resource or huge pages); a limit without a request is also the request."""
    container = _as_map(value, field_)
    resources = _as_map(container.get("resources"), f"{field_}.resources")
    paths = {key: f"{field_}.resources.{key}" for key in ("requests", "limits")}
    raw = {key: _as_map(resources.get(key), path) for key, path in paths.items()}
    for key, listed in raw.items():
        for name in listed:
            problem = container_resource_problem(str(name))
            if problem:
                refuse(resource_field(paths[key], str(name)), problem)
    requests = _as_resource_list(raw["requests"], paths["requests"], integers=True, refuse=refuse)
    limits = _as_resource_list(raw["limits"], paths["limits"], integers=True, refuse=refuse)
    for name in raw["requests"].keys() & raw["limits"].keys():
        limit = raw["limits"][name]
        if requests[name] != limits[name] and not is_overcommit_allowed(name):
            refuse(resource_field(paths["requests"], name), f"must be equal to {name} limit of {limit}")
        elif requests[name] > limits[name]:
            refuse(resource_field(paths["requests"], name), f"must be less than or equal to {name} limit of {limit}")
    return Resources({**{k: v for k, v in limits.items() if k not in raw["requests"]}, **requests})


def _peak(a: Resources, b: Resources) -> Resources:
    """Element-wise maximum of two resource vectors."""
    return Resources({name: max(a[name], b[name]) for name in {*a, *b}})


def _as_tolerations(value: Any, field_: str) -> tuple[Toleration, ...]:
    tolerations = []
    for i, item in enumerate(_as_list(value, field_)):
        path = f"{field_}[{i}]"
        data = _as_map(item, path)
        key = _as_str(data.get("key"), f"{path}.key")
        operator = _as_str(data.get("operator"), f"{path}.operator") or "Equal"
        value_ = _as_str(data.get("value"), f"{path}.value")
        if operator not in ("Equal", "Exists"):
            raise FieldError(f"{path}.operator", f"{operator!r} is not one of Equal, Exists")
        if operator == "Exists" and value_:
            raise FieldError(f"{path}.value", "must be empty when operator is Exists")
        if not key and operator != "Exists":
            raise FieldError(f"{path}.operator", "must be Exists when key is empty")
        effect = _as_choice(TaintEffect, data["effect"], f"{path}.effect") if data.get("effect") else None
        tolerations.append(Toleration(key, operator, value_, effect))
    return tuple(tolerations)


def _read_affinity(spec: Mapping[str, Any], prefix: str, r: _Reader) -> NodeAffinity | None:
    """spec.affinity.nodeAffinity (pod (anti-)affinity: `_read_pod_affinity`)."""
    affinity = r.mapping(spec, prefix, "affinity")
    if affinity.get("nodeAffinity") is None:
        return None
    return r.read(_as_node_affinity, affinity["nodeAffinity"], f"{prefix}.affinity.nodeAffinity", None)


def _read_pod_affinity(spec: Mapping[str, Any], prefix: str, r: _Reader) -> PodAffinity | None:
    """spec.affinity.podAffinity and podAntiAffinity: their required terms, checked as the API server checks
    them; preferred terms are kept in the document but not scheduled on (a warning says so)."""
    affinity = r.mapping(spec, prefix, "affinity")
    terms: dict[str, tuple[PodAffinityTerm, ...]] = {}
    for kind, attribute in (("podAffinity", "affinity"), ("podAntiAffinity", "anti_affinity")):
        field_ = f"{prefix}.affinity.{kind}"
        data = r.mapping(affinity, f"{prefix}.affinity", kind)
        if data.get(PREFERRED_AFFINITY):
            r.warn(f"{field_}.{PREFERRED_AFFINITY}", "preferred pod (anti-)affinity is not scheduled on; ignored")
        path = f"{field_}.{REQUIRED_AFFINITY}"
        items = r.items(data, field_, REQUIRED_AFFINITY)
        terms[attribute] = r.read(
            lambda value, f: tuple(_as_pod_affinity_term(item, f"{f}[{i}]") for i, item in enumerate(value)),
            items,
            path,
            (),
        )
    if not terms["affinity"] and not terms["anti_affinity"]:
        return None
    return PodAffinity(terms["affinity"], terms["anti_affinity"])


_LABEL_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_LABEL_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
POD_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _as_label_key(value: Any, field_: str) -> str:
    """A label key: an optional DNS-subdomain prefix and '/', then up to 63 letters, digits, '-', '_' or '.'."""
    key = _as_str(value, field_)
    prefix, _, name = key.rpartition("/")
    if (
        not name
        or len(name) > 63
        or not _LABEL_NAME.fullmatch(name)
        or ("/" in key and (not prefix or len(prefix) > 253 or not _LABEL_PREFIX.fullmatch(prefix)))
    ):
        raise FieldError(field_, f"{key!r} is not a label key (an optional DNS-subdomain prefix and '/', then a name)")
    return key


def _as_label_value(value: Any, field_: str) -> str:
    text = _as_str(value, field_)
    if len(text) > 63 or not _LABEL_NAME.fullmatch(text):
        raise FieldError(field_, f"{text!r} is not a label value (up to 63 letters, digits, '-', '_' and '.')")
    return text


def _as_label_selector(value: Any, field_: str) -> LabelSelector:
    """A metav1.LabelSelector, checked as the API server checks one."""
    data = _as_map(value, field_)
    labels = _as_map(data.get("matchLabels"), f"{field_}.matchLabels")
    match_labels = tuple(
        sorted(
            (_as_label_key(key, f"{field_}.matchLabels"), _as_label_value(item, f"{field_}.matchLabels.{key}"))
            for key, item in labels.items()
        )
    )
    expressions = []
    for i, item in enumerate(_as_list(data.get("matchExpressions"), f"{field_}.matchExpressions")):
        path = f"{field_}.matchExpressions[{i}]"
        entry = _as_map(item, path)
        key = _as_label_key(entry.get("key"), f"{path}.key")
        operator = _as_str(entry.get("operator"), f"{path}.operator")
        if operator not in POD_SELECTOR_OPERATORS:
            raise FieldError(f"{path}.operator", f"{operator!r} is not one of {', '.join(POD_SELECTOR_OPERATORS)}")
        values = tuple(
            _as_label_value(v, f"{path}.values[{j}]")
            for j, v in enumerate(_as_list(entry.get("values"), f"{path}.values"))
        )
        if operator in ("In", "NotIn") and not values:
            raise FieldError(f"{path}.values", f"{operator} needs at least one value")
        if operator in ("Exists", "DoesNotExist") and values:
            raise FieldError(f"{path}.values", f"{operator} takes no values")
        expressions.append(LabelSelectorRequirement(key, operator, values))
    return LabelSelector(match_labels, tuple(expressions))


def _as_pod_affinity_term(value: Any, field_: str) -> PodAffinityTerm:
    """One required term of podAffinity or podAntiAffinity, checked as the API server checks it."""
    data = _as_map(value, field_)
    topology_key = _as_str(data.get("topologyKey"), f"{field_}.topologyKey")
    if not topology_key:
        raise FieldError(f"{field_}.topologyKey", "is required (the node label whose values are the domains)")
    _as_label_key(topology_key, f"{field_}.topologyKey")
    selector = (
        None
        if data.get("labelSelector") is None
        else _as_label_selector(data["labelSelector"], f"{field_}.labelSelector")
    )
    namespaces = []
    for i, item in enumerate(_as_list(data.get("namespaces"), f"{field_}.namespaces")):
        name = _as_str(item, f"{field_}.namespaces[{i}]")
        if not is_dns1123_label(name):
            raise FieldError(f"{field_}.namespaces[{i}]", f"{name!r} is not a namespace name")
        namespaces.append(name)
    namespace_selector = (
        None
        if data.get("namespaceSelector") is None
        else _as_label_selector(data["namespaceSelector"], f"{field_}.namespaceSelector")
    )
    keys: dict[str, tuple[str, ...]] = {}
    for name in ("matchLabelKeys", "mismatchLabelKeys"):
        items = _as_list(data.get(name), f"{field_}.{name}")
        keys[name] = tuple(_as_label_key(item, f"{field_}.{name}[{i}]") for i, item in enumerate(items))
        if keys[name] and selector is None:
            raise FieldError(f"{field_}.{name}", "needs a labelSelector")
    both = set(keys["matchLabelKeys"]) & set(keys["mismatchLabelKeys"])
    if both:
        raise FieldError(f"{field_}.mismatchLabelKeys", f"{', '.join(sorted(both))}: also in matchLabelKeys")
    return PodAffinityTerm(
        selector,
        topology_key,
        tuple(dict.fromkeys(namespaces)),
        namespace_selector,
        keys["matchLabelKeys"],
        keys["mismatchLabelKeys"],
    )


def _as_node_affinity(value: Any, field_: str) -> NodeAffinity:
    data = _as_map(value, field_)
    required = None
    if data.get(REQUIRED_AFFINITY) is not None:
        path = f"{field_}.{REQUIRED_AFFINITY}.nodeSelectorTerms"
        terms = _as_list(
            _as_map(data[REQUIRED_AFFINITY], f"{field_}.{REQUIRED_AFFINITY}").get("nodeSelectorTerms"), path
        )
        if not terms:
            raise FieldError(path, "needs at least one term")
        required = tuple(_as_selector_term(term, f"{path}[{i}]") for i, term in enumerate(terms))
    preferred = []
    for i, item in enumerate(_as_list(data.get(PREFERRED_AFFINITY), f"{field_}.{PREFERRED_AFFINITY}")):
        path = f"{field_}.{PREFERRED_AFFINITY}[{i}]"
        term = _as_map(item, path)
        weight = _as_int(term.get("weight"), f"{path}.weight")
        if weight is None or not 1 <= weight <= 100:
            raise FieldError(f"{path}.weight", "must be an integer from 1 to 100")
        preference = _as_selector_term(term.get("preference"), f"{path}.preference", allow_empty=True)
        if preference.match_expressions:  # an empty preference is a no-op in Kubernetes
            preferred.append(PreferredSchedulingTerm(weight, preference))
    return NodeAffinity(required, tuple(preferred))


def _as_selector_term(value: Any, field_: str, allow_empty: bool = False) -> NodeSelectorTerm:
    data = _as_map(value, field_)
    if data.get("matchFields"):
        raise FieldError(f"{field_}.matchFields", "is not supported; use matchExpressions on kubernetes.io/hostname")
    expressions = _as_list(data.get("matchExpressions"), f"{field_}.matchExpressions")
    if not expressions and not allow_empty:
        raise FieldError(f"{field_}.matchExpressions", "an empty required term matches no node; give at least one")
    return NodeSelectorTerm(
        tuple(_as_requirement(item, f"{field_}.matchExpressions[{i}]") for i, item in enumerate(expressions))
    )


def _as_requirement(value: Any, field_: str) -> NodeSelectorRequirement:
    """One matchExpressions entry, checked the way the Kubernetes API server checks it."""
    data = _as_map(value, field_)
    key = _as_str(data.get("key"), f"{field_}.key")
    if not key:
        raise FieldError(f"{field_}.key", "is required")
    operator = _as_str(data.get("operator"), f"{field_}.operator")
    if operator not in SELECTOR_OPERATORS:
        raise FieldError(f"{field_}.operator", f"{operator!r} is not one of {', '.join(SELECTOR_OPERATORS)}")
    raw_values = _as_list(data.get("values"), f"{field_}.values")
    values = tuple(_as_str(item, f"{field_}.values[{i}]") for i, item in enumerate(raw_values))
    if operator in ("In", "NotIn") and not values:
        raise FieldError(f"{field_}.values", f"{operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise FieldError(f"{field_}.values", f"{operator} takes no values")
    if operator in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
        raise FieldError(f"{field_}.values", f"{operator} needs exactly one integer value")
    return NodeSelectorRequirement(key, operator, values)


# --- Queue, PodGroup, PriorityClass -----------------------------------------------------------------


def _parse_namespace(doc: dict[str, Any], r: _Reader) -> Namespace:
    """A v1 Namespace: its labels, for pod (anti-)affinity's namespaceSelector (with the label Kubernetes gives
    every namespace, its name under kubernetes.io/metadata.name)."""
    meta = _metadata(doc, r)
    return Namespace(meta.name, {**meta.labels, NAMESPACE_NAME_LABEL: meta.name}, r.source, doc)


def _parse_queue(doc: dict[str, Any], r: _Reader) -> Queue:
    """A Volcano Queue; the state comes from status.state, else spec.state, else Open."""
    meta = _metadata(doc, r)
    spec, status = r.mapping(doc, "", "spec"), r.mapping(doc, "", "status")
    guarantee = r.mapping(spec, "spec", "guarantee")
    state_from = ("status", status) if status.get("state") else ("spec", spec)
    return Queue(
        name=meta.name,
        weight=r.integer(spec, "spec", "weight", 1),
        # A declared zero caps that resource at 0 (see Queue.capability_limits), so it is kept. Extended
        # resources are whole numbers, as Volcano's queue webhook checks them.
        capability=r.resources(spec, "spec", "capability", keep_zeros=True, integers=True),
        deserved=r.resources(spec, "spec", "deserved", integers=True),
        guarantee=r.resources(guarantee, "spec.guarantee", "resource", integers=True) or EMPTY,
        reclaimable=r.flag(spec, "spec", "reclaimable", True),
        parent=r.text(spec, "spec", "parent"),
        priority=r.integer(spec, "spec", "priority", 0),
        state=r.choice(state_from[1], state_from[0], "state", QueueState, QueueState.OPEN),
        namespaces=r.read(
            _as_namespaces,
            meta.annotations.get(NAMESPACES_ANNOTATION),
            f"metadata.annotations.{NAMESPACES_ANNOTATION}",
            (),
        ),
        **r.read(_as_hierarchy, meta.annotations, "metadata.annotations", _NO_HIERARCHY),
        source=r.source,
        raw=doc,
    )


def _as_namespaces(value: Any, field_: str) -> tuple[str, ...]:
    """A comma-separated list of namespace names (DNS-1123 labels, as Kubernetes names namespaces)."""
    if value is None:
        return ()
    names = tuple(name.strip() for name in _as_str(value, field_).split(","))
    bad = [name for name in names if not is_dns1123_label(name)]
    if bad:
        shown = ", ".join(map(repr, bad))
        raise FieldError(field_, f"{shown}: not a namespace name (up to 63 lowercase letters, digits and '-')")
    return tuple(dict.fromkeys(names))


_NO_HIERARCHY: dict[str, Any] = {}


def _as_hierarchy(annotations: Mapping[str, str], field_: str) -> dict[str, Any]:
    """A queue's place in hdrf's tree, as Volcano's queue webhooks take it: volcano.sh/hierarchy and
    volcano.sh/hierarchy-weights given together, as many weights as levels, each a number above 0; a path not
    starting with "root" is put under it (weight 1), as the mutating webhook does."""
    path, weights = annotations.get(HIERARCHY_ANNOTATION, ""), annotations.get(HIERARCHY_WEIGHTS_ANNOTATION, "")
    if not path and not weights:
        return {}
    where = f"{field_}.{HIERARCHY_ANNOTATION}" if path else f"{field_}.{HIERARCHY_WEIGHTS_ANNOTATION}"
    names, numbers = path.split("/"), weights.split("/")
    if len(names) != len(numbers):
        raise FieldError(
            where,
            f"{path!r} has {len(names)} level(s) but {HIERARCHY_WEIGHTS_ANNOTATION} {weights!r} has {len(numbers)}: "
            "give one weight per level",
        )
    values = []
    for number in numbers:
        try:
            value = float(number)
        except ValueError:
            value = math.nan
        if not value > 0 or not math.isfinite(value):
            raise FieldError(
                f"{field_}.{HIERARCHY_WEIGHTS_ANNOTATION}", f"{number!r} in {weights!r}: a weight is a number above 0"
            )
        values.append(value)
    if any(not name for name in names[1:]):
        raise FieldError(f"{field_}.{HIERARCHY_ANNOTATION}", f"{path!r}: a level has no name")
    if not path.startswith("root"):
        names, values = ["root", *names], [1.0, *values]
    return {"hierarchy": tuple(names), "hierarchy_weights": tuple(values)}


def _parse_podgroup(doc: dict[str, Any], r: _Reader) -> PodGroup:
    """A Volcano PodGroup, plus tidegate's spec.affinity extension (with a warning)."""
    meta = _metadata(doc, r)
    spec, status = r.mapping(doc, "", "spec"), r.mapping(doc, "", "status")
    affinity = _read_affinity(spec, "spec", r)
    if affinity is not None:
        r.warn(
            "spec.affinity",
            "stock Volcano ignores affinity on a PodGroup; tidegate applies it to the group's pods "
            "(a pod's own required terms win, preferred terms are added)",
        )
    group = PodGroup(
        name=meta.name,
        namespace=meta.namespace,
        queue=r.text(spec, "spec", "queue") or DEFAULT_QUEUE,
        min_member=r.integer(spec, "spec", "minMember", 1),
        # Not integers: Volcano's PodGroup webhook does not check minResources.
        min_resources=r.resources(spec, "spec", "minResources") or EMPTY,
        min_task_member=r.read(_as_int_map, spec.get("minTaskMember"), "spec.minTaskMember", {}),
        priority_class_name=r.text(spec, "spec", "priorityClassName"),
        phase=r.choice(status, "status", "phase", PodGroupPhase, PodGroupPhase.PENDING),
        affinity=affinity,
        preemptable=_read_preemptable(meta, "", r),
        created=meta.created,
        waiting_time=_waiting_time(meta.annotations, r),
        source=r.source,
        raw=doc,
    )
    r.priority("spec.priorityClassName", group.priority_class_name, _setter(group))
    return group


def _as_int_map(value: Any, field_: str) -> dict[str, int]:
    out = {}
    for key, item in _as_map(value, field_).items():
        number = _as_int(item, f"{field_}.{key}")
        if number is None:
            raise FieldError(f"{field_}.{key}", "expected an integer")
        out[str(key)] = number
    return out


def _parse_priority_class(doc: dict[str, Any], r: _Reader) -> PriorityClass:
    """A scheduling.k8s.io PriorityClass; `value` is required, as in Kubernetes."""
    meta = _metadata(doc, r)
    value = r.optional_integer(doc, "", "value")
    if value is None and "value" not in doc:
        r.error("value", "is required")
    return PriorityClass(
        name=meta.name,
        value=value or 0,
        global_default=r.flag(doc, "", "globalDefault", False),
        preemption_policy=r.choice(doc, "", "preemptionPolicy", PreemptionPolicy, PREEMPT_LOWER_PRIORITY),
        source=r.source,
        raw=doc,
    )


# --- vcjob ------------------------------------------------------------------------------------------


def _parse_job(doc: dict[str, Any], r: _Reader) -> Job:
    """A Volcano batch.volcano.sh Job with its tasks, pod templates and lifecycle policies."""
    meta = _metadata(doc, r)
    spec = r.mapping(doc, "", "spec")
    scheduler = r.text(spec, "spec", "schedulerName") or DEFAULT_SCHEDULER
    priority_class = r.text(spec, "spec", "priorityClassName")
    tasks = tuple(_parse_task(item, i, meta, scheduler, r) for i, item in enumerate(r.items(spec, "spec", "tasks")))
    total = sum(task.replicas for task in tasks)
    if total > MAX_JOB_PODS:
        r.error("spec.tasks", f"{total:,} replicas in all: a Job has at most {MAX_JOB_PODS:,} pods")
        tasks = tuple(replace(task, replicas=0) for task in tasks)  # nothing to expand
    _inherit_priority_class(tasks, priority_class, r)
    _read_preemptable(meta, "", r)  # its pods take it (expand.py); warned here when Volcano cannot read it
    return Job(
        name=meta.name,
        namespace=meta.namespace,
        queue=r.text(spec, "spec", "queue") or DEFAULT_QUEUE,
        tasks=tasks,
        min_available=r.optional_integer(spec, "spec", "minAvailable"),
        max_retry=_read_max_retry(spec, r),
        priority_class_name=priority_class,
        policies=r.read(_as_policies, spec.get("policies"), "spec.policies", ()),
        plugins=r.read(_as_job_plugins, spec.get("plugins"), "spec.plugins", {}),
        scheduler_name=scheduler,
        labels=meta.labels,
        annotations=meta.annotations,
        created=meta.created,
        waiting_time=_waiting_time(meta.annotations, r),
        source=r.source,
        raw=doc,
    )


def _read_max_retry(spec: Mapping[str, Any], r: _Reader) -> int:
    """spec.maxRetry (retryLimit accepted as an alias); 0 or absent means Volcano's default of 3."""
    if "retryLimit" in spec:
        r.warn("spec.retryLimit", "Volcano calls this field maxRetry; read as maxRetry")
    if "maxRetry" in spec and "retryLimit" in spec:
        r.warn("spec.retryLimit", "both maxRetry and retryLimit are given; maxRetry wins")
    key = "maxRetry" if "maxRetry" in spec else "retryLimit"
    value = r.optional_integer(spec, "spec", key)
    if value == 0:
        r.warn(f"spec.{key}", "0 means the default (3) in Volcano, not 'never retry'")
    return value or 3


def _inherit_priority_class(tasks: Sequence[TaskSpec], class_name: str, r: _Reader) -> None:
    """Templates without a priority class take the job's, as Volcano's job controller does for its pods (and
    its preemptionPolicy, as the API server then admits them)."""
    inheriting = [(i, task.template) for i, task in enumerate(tasks) if not task.template.priority_class_name]
    for _, template in inheriting:
        template.priority_class_name = class_name

    def assign(value: int) -> None:
        for _, template in inheriting:
            template.priority = value

    if inheriting or class_name:
        pods = tuple((template, f"spec.tasks[{i}].template.spec") for i, template in inheriting)
        r.priority("spec.priorityClassName", class_name, assign, pods)


def _parse_task(value: Any, index: int, job: _Meta, scheduler: str, r: _Reader) -> TaskSpec:
    """One entry of spec.tasks; its template becomes a Pod named <job>-<task> (expand.py names replicas)."""
    prefix = f"spec.tasks[{index}]"
    task: dict[str, Any] = r.read(_as_map, value, prefix, {})
    name = r.text(task, prefix, "name") or f"default{index}"  # Volcano's mutating webhook names it so
    template = r.mapping(task, prefix, "template")
    template_meta = r.mapping(template, f"{prefix}.template", "metadata")
    meta = _Meta(
        name=f"{job.name}-{name}",
        namespace=job.namespace,
        labels=r.labels(template_meta.get("labels"), f"{prefix}.template.metadata.labels"),
        annotations=r.annotations(template_meta.get("annotations"), f"{prefix}.template.metadata.annotations"),
        created=job.created,
    )
    spec_prefix = f"{prefix}.template.spec"
    template_spec = r.mapping(template, f"{prefix}.template", "spec")
    pod = _pod_from_spec(meta, template_spec, spec_prefix, r, scheduler)
    pod.task, pod.group, pod.created, pod.raw = name, job.name, job.created, template
    if pod.priority_class_name:
        field_ = _priority_field(template_spec, spec_prefix)
        r.priority(field_, pod.priority_class_name, _setter(pod), ((pod, spec_prefix),))
    if "replicas" not in task:
        r.warn(f"{prefix}.replicas", "not set: Volcano reads it as 0, so this task creates no pods")
    replicas = r.integer(task, prefix, "replicas", 0)
    if replicas > MAX_JOB_PODS:
        r.error(f"{prefix}.replicas", f"{replicas:,}: a Job has at most {MAX_JOB_PODS:,} pods")
        replicas = 0  # nothing to expand
    return TaskSpec(
        name=name,
        replicas=replicas,
        template=pod,
        policies=r.read(_as_policies, task.get("policies"), f"{prefix}.policies", ()),
        min_available=r.optional_integer(task, prefix, "minAvailable"),
    )


def _as_policies(value: Any, field_: str) -> tuple[LifecyclePolicy, ...]:
    return tuple(_as_policy(item, f"{field_}[{i}]") for i, item in enumerate(_as_list(value, field_)))


def _as_policy(value: Any, field_: str) -> LifecyclePolicy:
    """One lifecycle policy: `event` and/or `events` (duplicates inside one policy merged), or exitCode."""
    data = _as_map(value, field_)
    events = [_as_choice(JobEvent, data["event"], f"{field_}.event")] if data.get("event") else []
    for i, item in enumerate(_as_list(data.get("events"), f"{field_}.events")):
        events.append(_as_choice(JobEvent, item, f"{field_}.events[{i}]"))
    return LifecyclePolicy(
        action=_as_choice(JobAction, data.get("action"), f"{field_}.action"),
        events=tuple(dict.fromkeys(events)),
        exit_code=_as_int(data.get("exitCode"), f"{field_}.exitCode"),
        timeout_s=_as_duration(data.get("timeout"), f"{field_}.timeout"),
    )


def _as_job_plugins(value: Any, field_: str) -> dict[str, list[str]]:
    """spec.plugins: job plugin name (ssh, svc, env, ...) to its argument strings."""
    plugins = {}
    for name, arguments in _as_map(value, field_).items():
        items = _as_list(arguments, f"{field_}.{name}")
        plugins[str(name)] = [_as_str(item, f"{field_}.{name}[{i}]") for i, item in enumerate(items)]
    return plugins


# --- SchedulerConfiguration -------------------------------------------------------------------------


def _parse_configuration(doc: dict[str, Any], r: _Reader) -> SchedulerConfiguration:
    """volcano-scheduler.conf carried in a tidegate.io SchedulerConfiguration.

    `actions` and `tiers` sit at the top level or under `spec`; or `conf` / `spec.conf` holds the
    text of a volcano-scheduler.conf. Missing actions or tiers take Volcano's defaults.
    """
    meta = _metadata(doc, r, default_name="default")
    if doc.get("spec") is not None and not isinstance(doc["spec"], dict):
        r.error("spec", f"expected a map, got {_shown(doc['spec'])}")
    prefix = scheduler_conf_prefix(doc)
    body: Mapping[str, Any] = doc["spec"] if prefix.startswith("spec") else doc
    if prefix.endswith("conf"):
        if "actions" in body or "tiers" in body:
            r.warn(prefix, "conf is given, so actions and tiers next to it are ignored")
        body = r.read(_as_conf_text, body.get("conf"), prefix, {})
    actions = r.read(_as_actions, body["actions"], _join(prefix, "actions"), None) if "actions" in body else None
    tiers = r.read(_as_tiers, body["tiers"], _join(prefix, "tiers"), None) if "tiers" in body else None
    configuration = SchedulerConfiguration(name=meta.name, source=r.source, raw=doc)
    if actions is not None:
        configuration.actions = actions
    if tiers is not None:
        configuration.tiers = tiers
    return configuration


def _as_conf_text(value: Any, field_: str) -> dict[str, Any]:
    text = _as_str(value, field_)
    try:
        conf = yaml.load(text, Loader=_YAML_LOADER)
    except yaml.YAMLError as exc:
        raise FieldError(field_, f"invalid volcano-scheduler.conf YAML: {exc}") from None
    return _as_map(conf, field_)


def _as_actions(value: Any, field_: str) -> tuple[str, ...]:
    """`actions: "enqueue, allocate, backfill"`: a comma-separated string (a list is accepted too)."""
    if isinstance(value, list):
        return tuple(_as_str(item, f"{field_}[{i}]").strip() for i, item in enumerate(value))
    return tuple(part.strip() for part in _as_str(value, field_).split(",") if part.strip())


def _as_tiers(value: Any, field_: str) -> tuple[Tier, ...]:
    tiers = []
    for i, item in enumerate(_as_list(value, field_)):
        path = f"{field_}[{i}].plugins"
        plugins = []
        for j, plugin in enumerate(_as_list(_as_map(item, f"{field_}[{i}]").get("plugins"), path)):
            data = _as_map(plugin, f"{path}[{j}]")
            name = _as_str(data.get("name"), f"{path}[{j}].name")
            if not name:
                raise FieldError(f"{path}[{j}].name", "is required")
            arguments = _as_map(data.get("arguments"), f"{path}[{j}].arguments")
            plugins.append(PluginOption(name, arguments, _as_switches(data, f"{path}[{j}]")))
        tiers.append(Tier(tuple(plugins)))
    return tuple(tiers)


def _as_switches(data: Mapping[str, Any], field_: str) -> dict[str, bool]:
    """A tier entry's switches (Volcano's PluginOption: enableJobOrder: false ...), each true or false; any
    key besides name, arguments and the switches is an error (Volcano's YAML reader would drop it silently)."""
    switches = {}
    for key, value in data.items():
        if key in ("name", "arguments"):
            continue
        if key not in PLUGIN_SWITCHES:
            raise FieldError(f"{field_}.{key}", _unknown_switch(str(key)))
        if not isinstance(value, bool):
            raise FieldError(f"{field_}.{key}", f"expected true or false, got {_shown(value)}")
        switches[key] = value
    return switches


def _unknown_switch(key: str) -> str:
    """Why a key is not a plugin option, naming Volcano's spelling when it is one letter off (Volcano spells
    some switches enable..., others enabled...)."""
    other = key.replace("enabled", "enable", 1) if key.startswith("enabled") else key.replace("enable", "enabled", 1)
    if other in PLUGIN_SWITCHES:
        return f"unknown plugin option: Volcano spells it {other} (and ignores {key})"
    known = ", ".join(PLUGIN_SWITCHES)
    return f"unknown plugin option (a plugin takes name, arguments and Volcano's switches: {known})"


#: Parsers by (API group, kind); the version was checked against kinds.GROUPS before.
_PARSERS: dict[tuple[str, str], Callable[[dict[str, Any], _Reader], Manifest]] = {
    ("", "Node"): _parse_node,
    ("", "Namespace"): _parse_namespace,
    ("", "Pod"): _parse_pod,
    ("scheduling.volcano.sh", "Queue"): _parse_queue,
    ("scheduling.volcano.sh", "PodGroup"): _parse_podgroup,
    ("batch.volcano.sh", "Job"): _parse_job,
    ("scheduling.k8s.io", "PriorityClass"): _parse_priority_class,
    ("tidegate.io", "SchedulerConfiguration"): _parse_configuration,
}
