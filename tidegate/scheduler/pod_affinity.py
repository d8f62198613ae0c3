"""Required inter-pod affinity and anti-affinity, as Kubernetes' InterPodAffinity filter decides them.

A term selects pods by labels (labelSelector; none: no pod) in some namespaces (`namespaces`, or those
`namespaceSelector` picks by their labels; neither: the term's own pod's namespace), and a topology key: nodes
with the same value of that node label form one domain. A pod may go to a node when:

- podAffinity: the node has every term's topology key and, for each term, its domain holds a pod matching all
  the pod's terms; or no pod anywhere matches all of them and the pod matches them itself (the first of a group
  of pods that want to be together);
- podAntiAffinity: for no term does the node's domain hold a pod the term selects;
- existing pods' anti-affinity (the symmetric check): no pod with a required anti-affinity term selecting this
  pod sits in the node's domain of that term's key.

"Pods" are the ones holding a node in the session: bound, placed in this cycle (a gang's earlier members
included, until a statement's discard takes them back), nominated to a node, or leaving it. The index keeps, per
term, how many such pods it selects in each domain, updated as pods are placed or leave (allocate/deallocate
handlers), and each pod's mask over all nodes, kept until a count it reads moves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tidegate.model.objects import (
    NAMESPACE_NAME_LABEL,
    LabelSelector,
    LabelSelectorRequirement,
    Pod,
    PodAffinityTerm,
)
from tidegate.scheduler.info import TaskInfo, TaskStatus
from tidegate.scheduler.node_table import BoolArray, IntArray

#: What the filters say when they leave a node out (after Kubernetes' messages).
AFFINITY_REASON = "didn't match pod affinity rules"
ANTI_AFFINITY_REASON = "didn't match pod anti-affinity rules"
EXISTING_REASON = "didn't satisfy existing pods' anti-affinity rules"
#: Statuses in which a pod holds a node, so counts for the pods around it.
HOLDING = frozenset({TaskStatus.ALLOCATED, TaskStatus.RUNNING, TaskStatus.RELEASING, TaskStatus.PIPELINED})


@dataclass(frozen=True, slots=True)
class Term:
    """A required term made for its pod: the pods it selects, where, and the domains' node label."""

    selector: LabelSelector | None
    namespaces: frozenset[str]
    namespace_selector: LabelSelector | None
    topology_key: str

    def selects(self, pod: Pod, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        """Kubernetes' AffinityTerm.Matches."""
        if self.selector is None:
            return False
        if pod.namespace not in self.namespaces:
            if self.namespace_selector is None:
                return False
            if not self.namespace_selector.matches(dict(labels_of(pod.namespace, namespace_labels))):
                return False
        return self.selector.matches(pod.labels)


def labels_of(namespace: str, namespace_labels: Mapping[str, Mapping[str, str]]) -> Mapping[str, str]:
    """A namespace's labels: its Namespace object's, else the one Kubernetes gives every namespace (its name)."""
    return namespace_labels.get(namespace) or {NAMESPACE_NAME_LABEL: namespace}


def make_term(term: PodAffinityTerm, pod: Pod) -> Term:
    """The term as the scheduler reads it for `pod`: its own namespace when it names none and has no namespace
    selector; matchLabelKeys and mismatchLabelKeys merged into the selector with the pod's label values (what the
    API server does when it creates the pod)."""
    selector = term.label_selector
    if selector is not None and (term.match_label_keys or term.mismatch_label_keys):
        labels = pod.labels
        extra = [LabelSelectorRequirement(k, "In", (labels[k],)) for k in term.match_label_keys if k in labels]
        extra += [LabelSelectorRequirement(k, "NotIn", (labels[k],)) for k in term.mismatch_label_keys if k in labels]
        selector = LabelSelector(selector.match_labels, selector.match_expressions + tuple(extra))
    own = not term.namespaces and term.namespace_selector is None
    namespaces = frozenset({pod.namespace}) if own else frozenset(term.namespaces)
    return Term(selector, namespaces, term.namespace_selector, term.topology_key)


def terms_of(pod: Pod) -> tuple[tuple[Term, ...], tuple[Term, ...]]:
    """The pod's required affinity and anti-affinity terms, made for it."""
    affinity = pod.pod_affinity
    if affinity is None:
        return (), ()
    return tuple(make_term(t, pod) for t in affinity.affinity), tuple(make_term(t, pod) for t in affinity.anti_affinity)


@dataclass(eq=False, slots=True)
class _Asker:
    """What a pending pod's mask reads: its terms, and the existing anti-affinity terms that select it."""

    pod: Pod
    affinity: tuple[Term, ...]
    anti: tuple[Term, ...]
    #: It matches all its own affinity terms (may be the first of its group).
    self_affine: bool
    mask: BoolArray | None = None
    version: int = -1


class PodAffinityIndex:
    """Per session: where the pods holding nodes are, counted per term and domain, and the masks they give."""

    def __init__(
        self,
        size: int,
        column: Callable[[str], tuple[IntArray, dict[str, int]]],
        namespace_labels: Mapping[str, Mapping[str, str]],
    ) -> None:
        self._column = column  # LabelIndex.column: per label key, (codes per node, value -> code)
        self.size = size
        self.reset(namespace_labels, ())

    def reset(self, namespace_labels: Mapping[str, Mapping[str, str]], holding: Iterable[TaskInfo]) -> None:
        """Count afresh, with these namespace labels, the tasks that hold a node."""
        self.namespace_labels = namespace_labels
        #: Anti-affinity terms of pods holding nodes: domain code -> how many such pods there.
        self.existing: dict[Term, Counter[int]] = {}
        #: Pending pods' anti-affinity terms: domain code -> pods holding nodes there that the term selects.
        self.selected: dict[Term, Counter[int]] = {}
        #: Pending pods' affinity term sets: (topology key, code) -> pods there that match every term of the set.
        self.together: dict[tuple[Term, ...], Counter[tuple[str, int]]] = {}
        #: Pods counted: the node they hold, and where they were counted.
        self.counted: dict[TaskInfo, tuple[int, list[tuple[Counter[Any], Any]]]] = {}
        self._askers: dict[TaskInfo, _Asker | None] = {}
        self._made: dict[TaskInfo, tuple[tuple[Term, ...], tuple[Term, ...]]] = {}
        #: Bumped whenever a count moves (a mask computed at an older version is stale).
        self.version = getattr(self, "version", 0) + 1
        #: Bumped when a pod counts towards an affinity term set (room appears for a pod that wants company).
        self.grown = 0
        for task in holding:
            self.place(task)

    def codes(self, key: str) -> IntArray:
        return self._column(key)[0]

    def _terms(self, task: TaskInfo) -> tuple[tuple[Term, ...], tuple[Term, ...]]:
        found = self._made.get(task)
        if found is None:
            found = self._made[task] = terms_of(task.pod)
        return found

    # -- pods holding nodes -----------------------------------------------------------------------------
    def place(self, task: TaskInfo, gone: bool = False) -> None:
        """Count the task where it is now (a status that holds a node), or stop counting it (or when `gone`)."""
        row = task.node if task.status in HOLDING and not gone else -1
        held = self.counted.get(task)
        if held is not None:
            if held[0] == row:
                return
            self._uncount(task, held[1])
        if row >= 0:
            contributions: list[tuple[Counter[Any], Any]] = []
            self.counted[task] = (row, contributions)
            self._count_existing(task, row, contributions)
            for term in self.selected:
                self._count_selected(term, task, row, contributions)
            for terms in self.together:
                self._count_together(terms, task, row, contributions)

    def _uncount(self, task: TaskInfo, contributions: list[tuple[Counter[Any], Any]]) -> None:
        del self.counted[task]
        for counts, key in contributions:
            counts[key] -= 1
            if not counts[key]:
                del counts[key]
        if contributions:
            self.version += 1

    def _add(self, counts: Counter[Any], key: Any, contributions: list[tuple[Counter[Any], Any]]) -> None:
        counts[key] += 1
        contributions.append((counts, key))
        self.version += 1

    def _count_existing(self, task: TaskInfo, row: int, contributions: list[tuple[Counter[Any], Any]]) -> None:
        _, anti = self._terms(task)
        for term in anti:
            code = int(self.codes(term.topology_key)[row])
            if code >= 0:
                self._add(self.existing.setdefault(term, Counter()), code, contributions)

    def _count_selected(
        self, term: Term, task: TaskInfo, row: int, contributions: list[tuple[Counter[Any], Any]]
    ) -> None:
        if term.selects(task.pod, self.namespace_labels):
            code = int(self.codes(term.topology_key)[row])
            if code >= 0:
                self._add(self.selected[term], code, contributions)

    def _count_together(
        self, terms: tuple[Term, ...], task: TaskInfo, row: int, contributions: list[tuple[Counter[Any], Any]]
    ) -> None:
        if all(term.selects(task.pod, self.namespace_labels) for term in terms):
            for term in terms:
                code = int(self.codes(term.topology_key)[row])
                if code >= 0:
                    self._add(self.together[terms], (term.topology_key, code), contributions)
                    self.grown += 1

    def _learn(self, anti: tuple[Term, ...], affinity: tuple[Term, ...]) -> None:
        """Start counting for terms no pending pod asked before: every pod holding a node is looked at once."""
        new_terms = [term for term in anti if term not in self.selected]
        new_set = bool(affinity) and affinity not in self.together
        if not new_terms and not new_set:
            return
        for term in new_terms:
            self.selected[term] = Counter()
        if new_set:
            self.together[affinity] = Counter()
        for task, (row, contributions) in self.counted.items():
            for term in new_terms:
                self._count_selected(term, task, row, contributions)
            if new_set:
                self._count_together(affinity, task, row, contributions)

    # -- a pending pod's nodes ----------------------------------------------------------------------------
    def _asker(self, task: TaskInfo) -> _Asker | None:
        if task in self._askers:
            return self._askers[task]
        affinity, anti = self._terms(task)
        found = None
        if affinity or anti or self.existing:
            self._learn(anti, affinity)
            self_affine = bool(affinity) and all(t.selects(task.pod, self.namespace_labels) for t in affinity)
            found = _Asker(task.pod, affinity, anti, self_affine)
        self._askers[task] = found
        return found

    def mask(self, task: TaskInfo) -> BoolArray | None:
        """The nodes the task may go to as the pods holding nodes stand now; None when nothing constrains it."""
        asker = self._asker(task)
        if asker is None and not self.existing:
            return None
        if asker is None:  # a pod without terms, asked about before any existing anti-affinity term appeared
            self._askers.pop(task, None)
            asker = self._asker(task)
            assert asker is not None
        if asker.version != self.version:
            asker.mask = self._compute(asker)
            asker.version = self.version
        return asker.mask

    def _compute(self, asker: _Asker) -> BoolArray | None:
        """Every reason's mask ANDed, or None when no node is left out."""
        parts = [mask for _, mask in self.explain_asker(asker)]
        if not parts:
            return None
        out = parts[0].copy()
        for part in parts[1:]:
            out &= part
        return out

    def explain(self, task: TaskInfo) -> list[tuple[str, BoolArray]]:
        asker = self._asker(task)
        if asker is None:
            if not self.existing:
                return []
            self._askers.pop(task, None)
            asker = self._asker(task)
            assert asker is not None
        return self.explain_asker(asker)

    def explain_asker(self, asker: _Asker) -> list[tuple[str, BoolArray]]:
        """(reason, nodes that pass) for each of the three checks that leaves a node out."""
        out: list[tuple[str, BoolArray]] = []
        if asker.affinity:
            counts = self.together[asker.affinity]
            has_keys = np.ones(self.size, dtype=bool)
            company = np.ones(self.size, dtype=bool)
            for term in asker.affinity:
                codes = self.codes(term.topology_key)
                has_keys &= codes >= 0
                there = {code for (key, code), n in counts.items() if key == term.topology_key and n > 0}
                company &= self._in_domains(codes, there)
            alone = asker.self_affine and not any(n > 0 for n in counts.values())  # the first of its group
            passing = has_keys if alone else has_keys & company
            if not passing.all():
                out.append((AFFINITY_REASON, passing))
        anti_passing: BoolArray | None = None
        for term in asker.anti:
            occupied = {code for code, n in self.selected[term].items() if n > 0}
            if occupied:
                left = ~self._in_domains(self.codes(term.topology_key), occupied)
                anti_passing = left if anti_passing is None else anti_passing & left
        if anti_passing is not None and not anti_passing.all():
            out.append((ANTI_AFFINITY_REASON, anti_passing))
        existing_passing: BoolArray | None = None
        for term, domains in self.existing.items():
            occupied = {code for code, n in domains.items() if n > 0}
            if occupied and term.selects(asker.pod, self.namespace_labels):
                left = ~self._in_domains(self.codes(term.topology_key), occupied)
                existing_passing = left if existing_passing is None else existing_passing & left
        if existing_passing is not None and not existing_passing.all():
            out.append((EXISTING_REASON, existing_passing))
        return out

    def forget_askers(self) -> None:
        """Pending pods come and go between the cycles of a long-lived session: their masks are made afresh."""
        self._askers = {}
        self._made = {task: made for task, made in self._made.items() if task in self.counted}

    @staticmethod
    def _in_domains(codes: IntArray, domains: set[int]) -> BoolArray:
        if not domains:
            return np.zeros(len(codes), dtype=bool)
        if len(domains) == 1:
            (code,) = domains
            same: BoolArray = codes == code
            return same
        found: BoolArray = np.isin(codes, list(domains))
        return found
