"""Who may call the live API: bearer tokens and what their holders may do.

`tidegate serve --token-file` reads either one token (its holder may do everything, as before roles
existed) or a Kubernetes static token file (kube-apiserver's `--token-auth-file`): one CSV line per
token, `token,user,uid,"group1,group2"`. Groups grant rights, in the spirit of Kubernetes' view / edit /
admin cluster roles:

- `tidegate:view`: read every object (queues, jobs, nodes, pools, budget, links);
- `tidegate:submit`: view, and submit and delete jobs in any namespace; `tidegate:submit:<namespace>`
  the same in that namespace only (a team's token);
- `tidegate:agent`: view, and what node agents and link probers report (pod status, spot notices,
  link state);
- `tidegate:admin`: everything, editing queues included.

A token without a tidegate group is refused when the file is read: it could do nothing.
"""

from __future__ import annotations

import csv
import enum
import hmac
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path

GROUP_PREFIX = "tidegate:"


class Right(enum.Enum):
    """What a route needs."""

    VIEW = "view"
    SUBMIT = "submit"
    REPORT = "report"
    ADMIN = "admin"


#: The rights each group grants (a namespaced submit group is `submit` limited to its namespace).
GROUPS: dict[str, frozenset[Right]] = {
    "view": frozenset({Right.VIEW}),
    "submit": frozenset({Right.VIEW, Right.SUBMIT}),
    "agent": frozenset({Right.VIEW, Right.REPORT}),
    "admin": frozenset(Right),
}
GROUP_NAMES = ", ".join([f"{GROUP_PREFIX}{name}" for name in GROUPS] + [f"{GROUP_PREFIX}submit:<namespace>"])


@dataclass(frozen=True, slots=True)
class Principal:
    """A token's holder: its user name, rights, and the namespaces it may submit to (None: any)."""

    user: str
    rights: frozenset[Right]
    namespaces: frozenset[str] | None = None

    def may(self, right: Right) -> bool:
        return right in self.rights

    def may_submit_to(self, namespace: str) -> bool:
        return Right.SUBMIT in self.rights and (self.namespaces is None or namespace in self.namespaces)


@dataclass(frozen=True, slots=True)
class Access:
    """The tokens the API accepts, each with its holder."""

    holders: tuple[tuple[bytes, Principal], ...]

    @classmethod
    def single(cls, token: str) -> Access:
        """One token whose holder may do everything."""
        return cls(((token.encode(), Principal("admin", GROUPS["admin"])),))

    def holder(self, token: str) -> Principal | None:
        """Who holds the token (None: nobody). Every token is compared in constant time."""
        given = token.encode()
        found = None
        for known, principal in self.holders:
            if hmac.compare_digest(given, known) and found is None:
                found = principal
        return found


def read_access(path: Path) -> Access:
    """The tokens in a `--token-file`: one bare token, or Kubernetes' static token CSV. Raises ValueError
    naming the file, line and field."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"--token-file {path}: {exc.strerror or exc}") from exc
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise ValueError(f"--token-file {path}: the file is empty")
    if len(lines) == 1 and "," not in lines[0][1]:
        token = lines[0][1].strip()
        if any(c.isspace() for c in token):
            raise ValueError(f"--token-file {path}: a token has no whitespace inside")
        return Access.single(token)
    holders: list[tuple[bytes, Principal]] = []
    seen: dict[str, int] = {}
    for number, row in _rows(lines):
        where = f"--token-file {path}, line {number}"
        if len(row) < 3:
            raise ValueError(f'{where}: expected token,user,uid,"groups" (Kubernetes\' static token file)')
        token, user = row[0].strip(), row[1].strip()
        if not token or any(c.isspace() for c in token):
            raise ValueError(f"{where}: the token is empty or has whitespace inside")
        if not user:
            raise ValueError(f"{where}: the user is empty")
        if token in seen:
            raise ValueError(f"{where}: the token of line {seen[token]} again")
        seen[token] = number
        groups = [g.strip() for g in (row[3] if len(row) > 3 else "").split(",") if g.strip()]
        holders.append((token.encode(), _principal(user, groups, where)))
    return Access(tuple(holders))


def _rows(lines: Iterable[tuple[int, str]]) -> Iterable[tuple[int, list[str]]]:
    for number, line in lines:
        if line.lstrip().startswith("#"):
            continue
        yield number, next(csv.reader([line], skipinitialspace=True))


def _principal(user: str, groups: Collection[str], where: str) -> Principal:
    rights: set[Right] = set()
    namespaces: set[str] = set()
    everywhere = False
    for group in groups:
        if not group.startswith(GROUP_PREFIX):
            continue  # another system's group (e.g. system:masters) grants nothing here
        name = group.removeprefix(GROUP_PREFIX)
        base, scoped, namespace = name.partition(":")
        if base not in GROUPS or (scoped and (base != "submit" or not namespace)):
            raise ValueError(f"{where}: unknown group {group} (known: {GROUP_NAMES})")
        rights |= GROUPS[base]
        if base == "submit":
            if namespace:
                namespaces.add(namespace)
            else:
                everywhere = True
        elif base == "admin":
            everywhere = True
    if not rights:
        raise ValueError(f"{where}: user {user} is in no tidegate group, so may do nothing (groups: {GROUP_NAMES})")
    return Principal(user, frozenset(rights), None if everywhere or not namespaces else frozenset(namespaces))
