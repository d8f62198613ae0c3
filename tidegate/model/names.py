"""Kubernetes' rules for names, as its API server applies them at admission.

DNS-1123 labels and subdomains (object names, namespaces), qualified names (label and annotation keys,
resource names), label values (apimachinery's pkg/util/validation), and which resource names are
extended resources (k8s.io/kubernetes pkg/apis/core/helper: IsExtendedResourceName, IsNativeResource,
IsOvercommitAllowed, IsIntegerResourceName). Each `*_problem` function returns "" for a good name, else
the reason, worded as Kubernetes words it.
"""

from __future__ import annotations

import re
from functools import lru_cache

_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
#: Longest DNS-1123 label, qualified name part and label value.
MAX_LABEL_LENGTH = 63
#: Longest DNS-1123 subdomain.
MAX_SUBDOMAIN_LENGTH = 253
#: Kubernetes' TotalAnnotationSizeLimitB: an object's annotations, keys and values, in bytes.
MAX_ANNOTATIONS_BYTES = 256 * 1024
DNS1123_LABEL_RULE = "lowercase letters, digits and '-', at most 63"
DNS1123_SUBDOMAIN_RULE = "lowercase letters, digits, '-' and '.', at most 253"
_QUALIFIED_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
#: Resources a container may ask without a domain prefix (IsStandardContainerResourceName).
STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
HUGEPAGES_PREFIX = "hugepages-"
#: Resources without a domain that count whole things (IsIntegerResourceName; the others are quota names).
INTEGER_RESOURCES = frozenset({"pods"})


def is_dns1123_label(name: str) -> bool:
    return len(name) <= MAX_LABEL_LENGTH and _DNS1123_LABEL.fullmatch(name) is not None


def is_dns1123_subdomain(name: str) -> bool:
    return len(name) <= MAX_SUBDOMAIN_LENGTH and _DNS1123_SUBDOMAIN.fullmatch(name) is not None


@lru_cache(maxsize=4096)
def qualified_name_problem(name: str) -> str:
    """Why `name` is not a qualified name (IsQualifiedName): an optional DNS-1123 subdomain prefix and
    '/', then at most 63 alphanumeric characters, '-', '_' or '.' ("example.com/MyName")."""
    prefix, slash, short = name.rpartition("/")
    if slash and "/" in prefix:
        return "a qualified name has at most one '/' (an optional DNS subdomain prefix and a name)"
    if slash and not prefix:
        return "prefix part must be non-empty"
    if prefix and not is_dns1123_subdomain(prefix):
        return f"prefix part {prefix[:80]!r} must be a DNS-1123 subdomain ({DNS1123_SUBDOMAIN_RULE})"
    if not short:
        return "name part must be non-empty"
    if len(short) > MAX_LABEL_LENGTH:
        return f"name part must be no more than {MAX_LABEL_LENGTH} characters"
    if not _QUALIFIED_NAME.fullmatch(short):
        return f"name part {_QUALIFIED_RULE} (e.g. 'MyName', 'my.name' or '123-abc')"
    return ""


@lru_cache(maxsize=4096)
def label_value_problem(value: str) -> str:
    """Why `value` is not a label value (IsValidLabelValue): empty, or at most 63 alphanumeric characters,
    '-', '_' or '.' starting and ending with an alphanumeric one."""
    if len(value) > MAX_LABEL_LENGTH:
        return f"must be no more than {MAX_LABEL_LENGTH} characters"
    if value and not _QUALIFIED_NAME.fullmatch(value):
        return f"a label value {_QUALIFIED_RULE}"
    return ""


def is_native_resource(name: str) -> bool:
    """Kubernetes' own resources: no domain prefix (cpu, memory, pods), or one in kubernetes.io."""
    return "/" not in name or "kubernetes.io/" in name


@lru_cache(maxsize=1024)
def is_extended_resource(name: str) -> bool:
    """A resource outside kubernetes.io with a qualified name (nvidia.com/gpu, volcano.sh/gpu-memory,
    tidegate.io/gpu-milli): counted in whole units, never overcommitted."""
    if is_native_resource(name) or name.startswith("requests."):
        return False
    return not qualified_name_problem(f"requests.{name}")


def is_overcommit_allowed(name: str) -> bool:
    """Whether a container's request may be below its limit: native resources other than huge pages."""
    return is_native_resource(name) and not name.startswith(HUGEPAGES_PREFIX)


def is_integer_resource(name: str) -> bool:
    """Whether a quantity of `name` must be a whole number: extended resources and pods."""
    return name in INTEGER_RESOURCES or is_extended_resource(name)


def container_resource_problem(name: str) -> str:
    """Why a container may not ask `name` (validateContainerResourceName)."""
    problem = qualified_name_problem(name)
    if problem:
        return f"not a resource name: {problem}"
    if "/" not in name:
        if name in STANDARD_CONTAINER_RESOURCES or name.startswith(HUGEPAGES_PREFIX):
            return ""
        return (
            f"must be a standard resource for containers ({', '.join(STANDARD_CONTAINER_RESOURCES)}, "
            f"{HUGEPAGES_PREFIX}<size>) or an extended resource with a domain (nvidia.com/gpu)"
        )
    if not is_native_resource(name) and not is_extended_resource(name):
        return "doesn't follow extended resource name standard"
    return ""
