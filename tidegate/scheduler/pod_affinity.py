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
handlers), and each pod's mask over all nodes, kept until a count it reads moves. Terms are filed under a label
a pod must have to be selected (a matchLabels pair, an In expression's values), and pods holding nodes under
their labels, so a placement looks only at the terms that may select it, and a new term only at the pods it may
select: thousands of jobs each spreading its own pods cost what they touch.
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
from tidegate.scheduler.labels import member
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


Label = tuple[str, str]
Contributions = list[tuple["_Counts", Any]]


def anchors(selector: LabelSelector | None) -> tuple[Label, ...] | None:
    """Labels one of which a pod must carry for the selector to select it: () when it selects no pod, None when no
    such label is known (an empty selector, or only NotIn, Exists, DoesNotExist)."""
    if selector is None:
        return ()
    if selector.match_labels:
        return (selector.match_labels[0],)
    for req in selector.match_expressions:
        if req.operator == "In":
            return tuple((req.key, value) for value in req.values)
    return None


@dataclass(eq=False, slots=True)
class _Counts:
    """Pods holding nodes, counted by domain (or by (topology key, domain)); `version` moves with every count."""

    counts: Counter[Any]
    version: int = 0


class _Filed:
    """Terms (or sets of terms) filed under the labels a pod needs to be selected (`anchors`)."""

    def __init__(self) -> None:
        self.by_label: dict[Label, list[Any]] = {}
        self.loose: list[Any] = []

    def add(self, item: Any, labels: tuple[Label, ...] | None) -> None:
        if labels is None:
            self.loose.append(item)
        for label in labels or ():
            self.by_label.setdefault(label, []).append(item)

    def candidates(self, pod: Pod) -> list[Any]:
        """The items that may select the pod (each once: a pod has one value per key)."""
        out = list(self.loose)
        by_label = self.by_label
        if by_label:
            for label in pod.labels.items():
                found = by_label.get(label)
                if found:
                    out.extend(found)
        return out


@dataclass(eq=False, slots=True)
class _Asker:
    """What a pending pod's mask reads: its terms' counts, and those of the existing anti-affinity terms that select
    it (looked for again when such terms appear), with the versions its mask was made at."""

    pod: Pod
    affinity: tuple[Term, ...]
    anti: tuple[Term, ...]
    #: It matches all its own affinity terms (may be the first of its group).
    self_affine: bool
    reads: list[_Counts]
    existing: list[tuple[Term, _Counts]]
    epoch: int = -1
    seen: tuple[int, ...] | None = None
    mask: BoolArray | None = None


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
        #: Anti-affinity terms of pods holding nodes: how many such pods in each domain.
        self.existing: dict[Term, _Counts] = {}
        self._existing_filed = _Filed()
        self._epoch = 0  # bumped when an existing term appears: askers look again for the ones selecting them
        #: Pending pods' anti-affinity terms: pods holding nodes that the term selects, by domain.
        self.selected: dict[Term, _Counts] = {}
        self._selected_filed = _Filed()
        #: Pending pods' affinity term sets: pods matching every term of the set, by (topology key, domain).
        self.together: dict[tuple[Term, ...], _Counts] = {}
        self._together_filed = _Filed()
        #: Pods counted: the node they hold, and where they were counted; and the same pods by label.
        self.counted: dict[TaskInfo, tuple[int, Contributions]] = {}
        self._holding_by_label: dict[Label, dict[TaskInfo, None]] = {}
        self._askers: dict[TaskInfo, _Asker] = {}
        self._made: dict[TaskInfo, tuple[tuple[Term, ...], tuple[Term, ...]]] = {}
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

    def _code(self, key: str, row: int) -> int:
        return int(self.codes(key)[row])

    # -- pods holding nodes -----------------------------------------------------------------------------
    def place(self, task: TaskInfo, gone: bool = False) -> None:
        """Count the task where it is now (a status that holds a node), or stop counting it (or when `gone`)."""
        row = task.node if task.status in HOLDING and not gone else -1
        held = self.counted.get(task)
        if held is not None:
            if held[0] == row:
                return
            self._uncount(task, held[1])
        if row < 0:
            return
        contributions: Contributions = []
        self.counted[task] = (row, contributions)
        pod = task.pod
        for label in pod.labels.items():
            self._holding_by_label.setdefault(label, {})[task] = None
        _, anti = self._terms(task)
        for term in anti:
            code = self._code(term.topology_key, row)
            if code >= 0:
                counts = self.existing.get(term)
                if counts is None:
                    counts = self.existing[term] = _Counts(Counter())
                    self._existing_filed.add(term, anchors(term.selector))
                    self._epoch += 1
                self._add(counts, code, contributions)
        for term in self._selected_filed.candidates(pod):
            self._count_selected(term, task, row, contributions)
        for terms in self._together_filed.candidates(pod):
            self._count_together(terms, task, row, contributions)

    def _uncount(self, task: TaskInfo, contributions: Contributions) -> None:
        del self.counted[task]
        for label in task.pod.labels.items():
            holders = self._holding_by_label.get(label)
            if holders is not None:
                holders.pop(task, None)
        for counts, key in contributions:
            counts.counts[key] -= 1
            if not counts.counts[key]:
                del counts.counts[key]
            counts.version += 1

    @staticmethod
    def _add(counts: _Counts, key: Any, contributions: Contributions) -> None:
        counts.counts[key] += 1
        counts.version += 1
        contributions.append((counts, key))

    def _count_selected(self, term: Term, task: TaskInfo, row: int, contributions: Contributions) -> None:
        if term.selects(task.pod, self.namespace_labels):
            code = self._code(term.topology_key, row)
            if code >= 0:
                self._add(self.selected[term], code, contributions)

    def _count_together(self, terms: tuple[Term, ...], task: TaskInfo, row: int, contributions: Contributions) -> None:
        if all(term.selects(task.pod, self.namespace_labels) for term in terms):
            for term in terms:
                code = self._code(term.topology_key, row)
                if code >= 0:
                    self._add(self.together[terms], (term.topology_key, code), contributions)
                    self.grown += 1

    def _holding(self, labels: tuple[Label, ...] | None) -> Iterable[TaskInfo]:
        """The pods holding nodes that carry one of the labels (all of them for None)."""
        if labels is None:
            return list(self.counted)
        found: dict[TaskInfo, None] = {}
        for label in labels:
            found.update(self._holding_by_label.get(label, {}))
        return list(found)

    def _learn(self, anti: tuple[Term, ...], affinity: tuple[Term, ...]) -> None:
        """Start counting for terms no pending pod asked before: the pods holding nodes they may select."""
        for term in anti:
            if term in self.selected:
                continue
            self.selected[term] = _Counts(Counter())
            labels = anchors(term.selector)
            self._selected_filed.add(term, labels)
            for task in self._holding(labels):
                row, contributions = self.counted[task]
                self._count_selected(term, task, row, contributions)
        if affinity and affinity not in self.together:
            self.together[affinity] = _Counts(Counter())
            labels = anchors(affinity[0].selector)
            self._together_filed.add(affinity, labels)
            for task in self._holding(labels):
                row, contributions = self.counted[task]
                self._count_together(affinity, task, row, contributions)

    # -- a pending pod's nodes ----------------------------------------------------------------------------
    def _asker(self, task: TaskInfo) -> _Asker:
        asker = self._askers.get(task)
        if asker is None:
            affinity, anti = self._terms(task)
            self._learn(anti, affinity)
            self_affine = bool(affinity) and all(t.selects(task.pod, self.namespace_labels) for t in affinity)
            reads = [self.selected[t] for t in anti] + ([self.together[affinity]] if affinity else [])
            asker = self._askers[task] = _Asker(task.pod, affinity, anti, self_affine, reads, [])
        if asker.epoch != self._epoch:  # existing anti-affinity terms appeared: which select this pod?
            asker.existing = [
                (term, self.existing[term])
                for term in self._existing_filed.candidates(asker.pod)
                if term.selects(asker.pod, self.namespace_labels)
            ]
            asker.epoch, asker.seen = self._epoch, None
        return asker

    def mask(self, task: TaskInfo) -> BoolArray | None:
        """The nodes the task may go to as the pods holding nodes stand now; None when nothing constrains it."""
        asker = self._asker(task)
        if not asker.reads and not asker.existing:
            return None
        seen = (*[counts.version for counts in asker.reads], *[counts.version for _, counts in asker.existing])
        if seen != asker.seen:
            parts = [passing for _, passing in self._explain(asker)]
            mask = None
            if parts:
                mask = parts[0].copy()
                for part in parts[1:]:
                    mask &= part
            asker.mask, asker.seen = mask, seen
        return asker.mask

    def explain(self, task: TaskInfo) -> list[tuple[str, BoolArray]]:
        return self._explain(self._asker(task))

    def _explain(self, asker: _Asker) -> list[tuple[str, BoolArray]]:
        """(reason, nodes that pass) for each of the three checks that leaves a node out."""
        out: list[tuple[str, BoolArray]] = []
        if asker.affinity:
            counts = self.together[asker.affinity].counts
            has_keys = np.ones(self.size, dtype=bool)
            company = np.ones(self.size, dtype=bool)
            for term in asker.affinity:
                codes = self.codes(term.topology_key)
                has_keys &= codes >= 0
                there = {code for (key, code), n in counts.items() if key == term.topology_key and n > 0}
                company &= member(codes, there)
            alone = asker.self_affine and not any(n > 0 for n in counts.values())  # the first of its group
            passing = has_keys if alone else has_keys & company
            if not passing.all():
                out.append((AFFINITY_REASON, passing))
        for reason, terms in (
            (ANTI_AFFINITY_REASON, [(term, self.selected[term]) for term in asker.anti]),
            (EXISTING_REASON, asker.existing),
        ):
            allowed: BoolArray | None = None
            for term, held in terms:
                occupied = {code for code, n in held.counts.items() if n > 0}
                if occupied:
                    left = ~member(self.codes(term.topology_key), occupied)
                    allowed = left if allowed is None else allowed & left
            if allowed is not None and not allowed.all():
                out.append((reason, allowed))
        return out

    def forget_askers(self) -> None:
        """Pending pods come and go between the cycles of a long-lived session: their masks are made afresh."""
        self._askers = {}
        self._made = {task: made for task, made in self._made.items() if task in self.counted}
