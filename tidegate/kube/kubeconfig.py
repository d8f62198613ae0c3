"""Which cluster `tidegate kube` talks to, found as kubectl finds it, and every way that fails said in one line.

- `--kubeconfig FILE`: that file alone (it must exist);
- else `$KUBECONFIG`, a list of files separated by ':' (';' on Windows), merged as kubectl merges them
  (client-go's loading rules): files that do not exist are skipped; the first file to define a cluster,
  user or context of a name wins it whole; the first to set `current-context` sets it;
- else `~/.kube/config` when it exists;
- else, inside a pod (`$KUBERNETES_SERVICE_HOST`), the pod's service account.

`--context` picks a context of the kubeconfig (default: its `current-context`). Relative file paths in a
kubeconfig (a CA, a client certificate or key, a token file, an exec plugin's command with a '/') are
relative to the file that holds them, as kubectl reads them. A missing or garbled file, an unknown context,
or a context naming a cluster or user no file defines is a `KubeconfigError` naming the file and what is
wrong; the Kubernetes client then builds its ApiClient from the merged document.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

#: kubectl's separator between the files of $KUBECONFIG.
SEPARATOR = os.pathsep
#: The named lists of a kubeconfig and what each entry holds.
SECTIONS = {"clusters": "cluster", "users": "user", "contexts": "context"}
#: Fields holding a path, resolved against their file's folder: per section entry.
PATH_FIELDS = {"cluster": ("certificate-authority",), "user": ("client-certificate", "client-key", "tokenFile")}


class KubeconfigError(ValueError):
    """The cluster cannot be found from the kubeconfig (or the pod's service account): one line saying why."""


def api_client(
    kubeconfig: str | None = None, context: str | None = None, environ: Mapping[str, str] | None = None
) -> client.ApiClient:
    """An ApiClient for the cluster found as the module says. Raises KubeconfigError."""
    env = os.environ if environ is None else environ
    if kubeconfig:
        where, files = f"--kubeconfig {kubeconfig}", [Path(kubeconfig).expanduser()]
        if not files[0].is_file():
            raise KubeconfigError(f"{where}: {'a folder, not a file' if files[0].is_dir() else 'no such file'}")
    elif env.get("KUBECONFIG"):
        listed = [Path(part).expanduser() for part in env["KUBECONFIG"].split(SEPARATOR) if part]
        where, files = f"$KUBECONFIG {env['KUBECONFIG']}", [path for path in listed if path.is_file()]
        if not files:
            raise KubeconfigError(f"{where}: none of its files exists")
    elif (home := Path(env.get("HOME", "~")).expanduser() / ".kube" / "config").is_file():
        where, files = str(home), [home]
    elif env.get("KUBERNETES_SERVICE_HOST"):
        if context:
            raise KubeconfigError(f"--context {context}: inside a pod without a kubeconfig, there are no contexts")
        return _in_cluster()
    else:
        raise KubeconfigError(
            "no cluster to schedule: give --kubeconfig, set $KUBECONFIG, write ~/.kube/config, "
            "or run inside a pod (its service account)"
        )
    merged = merge([(path, read_kubeconfig(path)) for path in files])
    name = _context_name(merged, context, where)
    document = {**merged, **{s: [_without_file(e) for e in merged[s]] for s in SECTIONS}}
    try:
        made: client.ApiClient = config.new_client_from_config_dict(  # type: ignore[no-untyped-call]
            document, context=name, persist_config=False
        )
    except (ConfigException, ValueError, TypeError, KeyError, OSError) as exc:
        raise KubeconfigError(f"{where}: context {name}: {_one_line(exc)}") from exc
    return made


def read_kubeconfig(path: Path) -> dict[str, Any]:
    """One kubeconfig file, checked for the shape a merge needs, with its relative paths made absolute."""
    where = f"kubeconfig {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise KubeconfigError(f"{where}: cannot be read: {_one_line(exc)}") from exc
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise KubeconfigError(f"{where}: not YAML{at}: {getattr(exc, 'problem', None) or exc}") from exc
    if document is None:
        return {}  # an empty file, as kubectl reads it: nothing in it
    if not isinstance(document, dict):
        raise KubeconfigError(f"{where}: not a kubeconfig (a mapping of clusters, users and contexts)")
    for section, holds in SECTIONS.items():
        entries = document.get(section) or []
        if not isinstance(entries, list):
            raise KubeconfigError(f"{where}: {section} is not a list")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
                raise KubeconfigError(f"{where}: {section}[{i}] has no name")
            if not isinstance(entry.get(holds) or {}, dict):
                raise KubeconfigError(f"{where}: {section}[{i}] ({entry['name']}): {holds} is not a mapping")
            _resolve(entry.get(holds) or {}, holds, path.parent)
    current = document.get("current-context")
    if current is not None and not isinstance(current, str):
        raise KubeconfigError(f"{where}: current-context is not a string")
    return document


def merge(files: list[tuple[Path, dict[str, Any]]]) -> dict[str, Any]:
    """kubectl's merge of several kubeconfigs: the first file to name a cluster, user or context wins it
    whole, the first to set `current-context` sets it. Each entry remembers its file (`_file`)."""
    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", **{section: [] for section in SECTIONS}}
    for path, document in files:
        for section in SECTIONS:
            taken = {entry["name"] for entry in merged[section]}
            for entry in document.get(section) or []:
                if entry["name"] not in taken:
                    merged[section].append({**copy.deepcopy(entry), "_file": str(path)})
                    taken.add(entry["name"])
        if document.get("current-context") and "current-context" not in merged:
            merged["current-context"] = document["current-context"]
    return merged


def _context_name(merged: dict[str, Any], wanted: str | None, where: str) -> str:
    """The context to use, checked: it exists, and the cluster and user it names are defined."""
    contexts = {entry["name"]: entry for entry in merged["contexts"]}
    known = ", ".join(sorted(contexts)) or "none"
    name = wanted or merged.get("current-context")
    if not name:
        raise KubeconfigError(f"{where}: no current-context; choose one with --context (contexts: {known})")
    if name not in contexts:
        chosen = f"--context {name}" if wanted else f"current-context {name}"
        raise KubeconfigError(f"{where}: {chosen}: no such context (contexts: {known})")
    entry = contexts[name]
    body = entry.get("context") or {}
    for section, key in (("clusters", "cluster"), ("users", "user")):
        named = body.get(key)
        if key == "user" and not named:
            continue  # a context may have no user (anonymous)
        if not named or named not in {e["name"] for e in merged[section]}:
            defined = f"{key} {named or '(none)'} is not defined"
            raise KubeconfigError(f"{where}: context {name} ({entry['_file']}): {defined}")
    cluster = next(e for e in merged["clusters"] if e["name"] == body["cluster"])
    if not (cluster.get("cluster") or {}).get("server"):
        raise KubeconfigError(f"{where}: cluster {body['cluster']} ({cluster['_file']}) has no server")
    return str(name)


def _resolve(body: dict[str, Any], holds: str, folder: Path) -> None:
    """Make the entry's relative file paths absolute, against its file's folder (kubectl's rule)."""
    for field in PATH_FIELDS.get(holds, ()):
        value = body.get(field)
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            body[field] = str(folder / value)
    plugin = body.get("exec") if holds == "user" else None
    command = plugin.get("command") if isinstance(plugin, dict) else None
    if isinstance(plugin, dict) and isinstance(command, str) and "/" in command and not Path(command).is_absolute():
        plugin["command"] = str(folder / command)


def _without_file(entry: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in entry.items() if key != "_file"}


def _in_cluster() -> client.ApiClient:
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except ConfigException as exc:
        raise KubeconfigError(f"the pod's service account: {_one_line(exc)}") from exc
    return client.ApiClient()


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__
