"""Why a job waits, typed: the message users read, with a code beside it that programs read.

A plugin's vote that refuses returns a `Refusal`; the code travels with the message wherever the scheduler
keeps or combines it (a gang's reason keeps the code of what stopped its pods), so a host deciding on a
waiting job (cloud burst moves a job whose queue is at its capability) reads `refusal_code(reason)` instead
of searching the message for words, as Kueue's admission reports a mode beside its reasons.

`Refusal` is a `str`: every place that shows, stores or compares reasons keeps working on the message.
"""

from __future__ import annotations

from enum import StrEnum


class RefusalCode(StrEnum):
    """What kind of refusal a reason is ("" for reasons no plugin typed, such as no node fitting)."""

    UNSPECIFIED = ""
    #: The job's queue, or an ancestor, would exceed its capability (its hard, local cap): what burst reads.
    AT_CAPABILITY = "AtCapability"
    #: The queue holds its deserved share and lends no more (proportion).
    AT_DESERVED = "AtDeservedShare"
    #: The whole cluster is allocated to the queue's share (proportion).
    CLUSTER_FULL = "ClusterFull"
    #: The queue's allocation reached its deserved share (proportion's overused vote).
    OVERUSED = "Overused"
    #: The queue is Closing or Closed.
    QUEUE_NOT_OPEN = "QueueNotOpen"
    #: The queue has children (only leaf queues take jobs) or is not in the queue tree.
    NOT_A_LEAF = "NotALeafQueue"
    #: The queue, or an ancestor, does not take work from the job's namespace.
    NAMESPACE = "NamespaceNotTaken"
    #: Fewer pods exist than the gang needs.
    GANG_INCOMPLETE = "GangIncomplete"


class Refusal(str):
    """A refusal's message, carrying its code (`refusal_code`)."""

    code: RefusalCode

    def __new__(cls, message: str, code: RefusalCode = RefusalCode.UNSPECIFIED) -> Refusal:
        refusal = super().__new__(cls, message)
        refusal.code = code
        return refusal

    def __reduce__(self) -> tuple[type[Refusal], tuple[str, RefusalCode]]:
        return Refusal, (str(self), self.code)

    def within(self, message: str) -> Refusal:
        """Another message (one that wraps this one) with this refusal's code."""
        return Refusal(message, self.code)


def refusal_code(reason: str) -> RefusalCode:
    """The code of a reason (UNSPECIFIED for a plain message)."""
    return reason.code if isinstance(reason, Refusal) else RefusalCode.UNSPECIFIED
