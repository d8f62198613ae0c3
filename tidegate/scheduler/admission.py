"""What a set of manifests must pass before the scheduler runs on it: Volcano's admission rules
(`tidegate.model.validation`), and the scheduler configuration's plugin arguments, which only the plugins
themselves know how to read (a weight that is not a number, a placement policy that does not exist).
Every problem names the file, document, object and field, as the model's validation does."""

from __future__ import annotations

from tidegate.model.errors import ManifestError
from tidegate.model.manifests import ManifestSet, scheduler_conf_prefix
from tidegate.model.objects import SchedulerConfiguration
from tidegate.model.validation import validate
from tidegate.scheduler.framework import PluginArgumentError, PluginRegistry
from tidegate.scheduler.plugins import default_registry


def admission_errors(ms: ManifestSet, registry: PluginRegistry | None = None) -> list[ManifestError]:
    """Every problem `validate(ms)` finds, then every bad plugin argument of its configurations."""
    registry = registry or default_registry()
    return [*validate(ms), *(e for conf in ms.configurations for e in configuration_errors(conf, registry))]


def configuration_errors(conf: SchedulerConfiguration, registry: PluginRegistry) -> list[ManifestError]:
    """Each plugin's first bad argument (plugins the registry does not know are validation's to name)."""
    prefix = scheduler_conf_prefix(conf.raw)
    tiers = f"{prefix}.tiers" if prefix else "tiers"
    errors = []
    for i, tier in enumerate(conf.tiers):
        for j, option in enumerate(tier.plugins):
            if option.name not in registry:
                continue
            try:
                registry.create(option.name, option.arguments, option.switches).check_arguments()
            except PluginArgumentError as exc:
                field = f"{tiers}[{i}].plugins[{j}].arguments.{exc.key}"
                errors.append(ManifestError(conf.source, "SchedulerConfiguration", conf.name, field, exc.message))
    return errors
