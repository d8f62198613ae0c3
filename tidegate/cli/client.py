"""The client side of `tidegate get|describe|apply|delete|patch`: which server, with which token, and the calls.

Where the server is, as kubectl finds it, first that says:

1. `--server` (`-s`) and `--token` (and `--certificate-authority`, `--insecure-skip-tls-verify`);
2. the context (`--context`, else the file's `current-context`) of a kubeconfig-like file: `--tidegateconfig`,
   else `$TIDEGATE_CONFIG`, else `~/.tidegate/config` when it exists:

       apiVersion: v1
       kind: Config
       current-context: prod
       clusters:
       - name: prod
         cluster: {server: "https://tidegate.example:8080", certificate-authority: /etc/tidegate/ca.crt}
       users:
       - name: ops
         user: {token: "9f2c..."}          # or tokenFile: /path (read at each call)
       contexts:
       - name: prod
         context: {cluster: prod, user: ops, namespace: team-a}

3. `tidegate serve`'s default address, http://127.0.0.1:8080, without a token.

Every error answer of the server is a Kubernetes Status, printed as kubectl prints one:
`Error from server (NotFound): job default/x does not exist`; a server that cannot be reached, as kubectl says
it (`The connection to the server 127.0.0.1:8080 was refused - did you specify the right host or port?`).
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

import httpx2
import yaml

DEFAULT_SERVER = "http://127.0.0.1:8080"
CONFIG_ENV = "TIDEGATE_CONFIG"
DEFAULT_CONFIG = Path("~/.tidegate/config")
#: Items asked per list call (kubectl's --chunk-size default).
CHUNK = 500


class ClientError(Exception):
    """What the command prints on standard error before it exits 1 (already in kubectl's words)."""


@dataclass(frozen=True, slots=True)
class Connection:
    server: str
    token: str = ""
    namespace: str = "default"
    #: A CA bundle's path to verify the server with, or False to skip verification (True: the system's).
    verify: str | bool = True


def connection(
    server: str | None,
    token: str | None,
    context: str | None,
    config: str | None,
    certificate_authority: str | None = None,
    insecure: bool = False,
) -> Connection:
    """The server, token and namespace the options and the config file say (see the module's docstring)."""
    path = Path(config) if config else Path(os.environ[CONFIG_ENV]) if os.environ.get(CONFIG_ENV) else None
    if path is None and DEFAULT_CONFIG.expanduser().exists():
        path = DEFAULT_CONFIG.expanduser()
    found: dict[str, Any] = {}
    if path is not None:
        found = _from_config(path, context)
    elif context:
        raise ClientError(
            f'error: context "{context}" does not exist (no config file: --tidegateconfig or ${CONFIG_ENV})'
        )
    verify: str | bool = True
    if insecure or found.get("insecure"):
        verify = False
    elif certificate_authority or found.get("ca"):
        verify = str(certificate_authority or found["ca"])
    return Connection(
        server=(server or found.get("server") or DEFAULT_SERVER).rstrip("/"),
        token=token if token is not None else str(found.get("token", "")),
        namespace=str(found.get("namespace") or "default"),
        verify=verify,
    )


def _from_config(path: Path, wanted: str | None) -> dict[str, Any]:
    """The chosen context of a kubeconfig-like file; ClientError naming the file and field otherwise."""
    try:
        document = yaml.safe_load(path.expanduser().read_text(encoding="utf-8")) or {}
    except OSError as exc:
        raise ClientError(f"error: {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise ClientError(f"error: {path}: not YAML: {exc}") from exc
    if not isinstance(document, dict):
        raise ClientError(f"error: {path}: a config is a mapping (apiVersion: v1, kind: Config)")
    name = wanted or document.get("current-context")
    if not name:
        raise ClientError(f"error: {path}: current-context is not set (or pass --context)")
    context = _named(path, document, "contexts", "context", str(name))
    if context is None:
        raise ClientError(f'error: {path}: context "{name}" does not exist')
    found: dict[str, Any] = {"namespace": context.get("namespace", "")}
    cluster_name = context.get("cluster")
    if cluster_name:
        cluster = _named(path, document, "clusters", "cluster", str(cluster_name))
        if cluster is None:
            raise ClientError(f'error: {path}: context "{name}": cluster "{cluster_name}" does not exist')
        found["server"] = cluster.get("server", "")
        found["ca"] = _relative(path, cluster.get("certificate-authority"))
        found["insecure"] = bool(cluster.get("insecure-skip-tls-verify", False))
    user_name = context.get("user")
    if user_name:
        user = _named(path, document, "users", "user", str(user_name))
        if user is None:
            raise ClientError(f'error: {path}: context "{name}": user "{user_name}" does not exist')
        token_file = user.get("tokenFile")
        if token_file:
            where = _relative(path, token_file)
            try:
                found["token"] = Path(str(where)).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ClientError(f"error: {path}: user {user_name}: tokenFile {where}: {exc.strerror or exc}") from exc
        else:
            found["token"] = str(user.get("token", ""))
    return found


def _named(path: Path, document: Mapping[str, Any], section: str, key: str, name: str) -> dict[str, Any] | None:
    entries = document.get(section) or []
    if not isinstance(entries, list):
        raise ClientError(f"error: {path}: {section} is a list of {{name, {key}}}")
    for index, entry in enumerate(entries):
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(key) or {}
            if not isinstance(body, dict):
                raise ClientError(f"error: {path}: {section}[{index}].{key} is a mapping")
            return body
    return None


def _relative(config: Path, value: object) -> str | None:
    """A path the config names, relative to the config's folder as kubectl reads it."""
    if not value:
        return None
    given = Path(str(value)).expanduser()
    return str(given if given.is_absolute() else config.expanduser().parent / given)


class Client:
    """Calls of one server. Every error becomes a ClientError in kubectl's words."""

    def __init__(self, conn: Connection, timeout: float = 30.0) -> None:
        self.conn = conn
        headers = {"Accept": "application/json", "User-Agent": "tidegate-cli"}
        if conn.token:
            headers["Authorization"] = f"Bearer {conn.token}"
        verify: ssl.SSLContext | bool = conn.verify if isinstance(conn.verify, bool) else _context(conn.verify)
        self.http = httpx2.Client(
            base_url=conn.server, headers=headers, verify=verify, timeout=timeout, trust_env=False
        )
        #: The server's clock at its last answer (its Date header), for AGE columns; None until one came.
        self.server_time: float | None = None

    def close(self) -> None:
        self.http.close()

    def call(self, method: str, path: str, body: Any = None, params: Mapping[str, str] | None = None) -> Any:
        """One call; a text body is sent as YAML, any other as JSON."""
        content, headers = None, {}
        if isinstance(body, str):
            content, headers["Content-Type"] = body.encode(), "application/yaml"
        elif body is not None:
            content, headers["Content-Type"] = json.dumps(body).encode(), "application/json"
        try:
            response = self.http.request(method, path, content=content, headers=headers, params=params)
        except httpx2.ConnectError as exc:
            host = self.http.base_url.netloc.decode()
            raise ClientError(
                f"The connection to the server {host} was refused - did you specify the right host or port?"
            ) from exc
        except httpx2.TransportError as exc:
            raise ClientError(f"Unable to connect to the server: {exc}") from exc
        date = response.headers.get("date")
        if date:
            with contextlib.suppress(TypeError, ValueError):
                self.server_time = parsedate_to_datetime(date).timestamp()
        try:
            data = response.json() if response.content else None
        except ValueError:
            data = response.text
        if response.status_code >= 400:
            raise ClientError(status_text(response.status_code, data))
        return data

    def items(self, path: str, params: Mapping[str, str] | None = None, chunk: int = CHUNK) -> Iterator[dict[str, Any]]:
        """Every item of a list, page by page (`limit` and `continue`)."""
        token = ""
        while True:
            query = {k: v for k, v in (params or {}).items() if v} | {"limit": str(chunk)}
            if token:
                query["continue"] = token
            page = self.call("GET", path, params=query)
            yield from page["items"]
            token = (page.get("metadata") or {}).get("continue", "")
            if not token:
                return


def _context(ca: str) -> ssl.SSLContext:
    try:
        return ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise ClientError(f"error: certificate-authority {ca}: {exc}") from exc


def status_text(code: int, body: object) -> str:
    """An error answer as kubectl prints it: `Error from server (Reason): message`, and each cause of a 422."""
    if isinstance(body, dict) and body.get("kind") == "Status":
        reason = body.get("reason") or "Unknown"
        lines = [f"Error from server ({reason}): {body.get('message', '')}"]
        causes = (body.get("details") or {}).get("causes") or []
        if len(causes) > 1:
            lines += [f"  {cause.get('text') or _field_message(cause)}" for cause in causes]
        return "\n".join(lines)
    return f"Error from server ({code}): {body if isinstance(body, str) else ''}".rstrip(": ")


def _field_message(cause: dict[str, Any]) -> str:
    field = cause.get("field", "")
    return f"{field}: {cause.get('message', '')}" if field else str(cause.get("message", ""))
