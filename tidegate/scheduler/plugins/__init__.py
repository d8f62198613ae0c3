"""The built-in plugins, registered explicitly (no import-time side effects)."""

from __future__ import annotations

from tidegate.scheduler.framework import Plugin, PluginRegistry
from tidegate.scheduler.plugins.binpack import BinpackPlugin
from tidegate.scheduler.plugins.capacity import CapacityPlugin
from tidegate.scheduler.plugins.drf import DrfPlugin
from tidegate.scheduler.plugins.gang import GangPlugin
from tidegate.scheduler.plugins.gpushare import GpuSharePlugin
from tidegate.scheduler.plugins.nodeorder import NodeOrderPlugin
from tidegate.scheduler.plugins.predicates import PredicatesPlugin
from tidegate.scheduler.plugins.priority import PriorityPlugin
from tidegate.scheduler.plugins.proportion import ProportionPlugin
from tidegate.scheduler.plugins.sla import SlaPlugin

BUILTIN_PLUGINS: dict[str, type[Plugin]] = {
    cls.name: cls
    for cls in (
        PriorityPlugin,
        GangPlugin,
        DrfPlugin,
        ProportionPlugin,
        CapacityPlugin,
        PredicatesPlugin,
        NodeOrderPlugin,
        BinpackPlugin,
        GpuSharePlugin,
        SlaPlugin,
    )
}
#: Accepted for compatibility with volcano-scheduler.conf files; they change nothing here.
NO_OP_PLUGINS = ("conformance", "overcommit")


class NoOpPlugin(Plugin):
    """What the compatibility names create: registers nothing, so it never needs to register again."""

    reopens_in_place = True


def default_registry() -> PluginRegistry:
    registry = PluginRegistry({name: cls for name, cls in BUILTIN_PLUGINS.items()})
    for name in NO_OP_PLUGINS:
        registry.register(name, NoOpPlugin)
    return registry
