"""The architecture's rules that import-linter cannot state (its layers contract is in pyproject.toml):

- hosts never reach into the scheduler's session: `OnlineScheduler` is the port the core offers them (its
  methods), so `.ssn` is read only inside tidegate/scheduler/;
- no module imports another that imports it back; in the hybrid-cloud layers (sim/, fleet/, live/, kube/)
  not even for type checking (engine <-> outage was one): a cycle means two modules that are one, or a
  dependency that should point one way. (The scheduler's plugins and statements name their session's type,
  which names theirs: a typing cycle only, kept.)

A module's private names are its own everywhere else (ruff's SLF001, in `make lint`)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tidegate"


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = ast.parse(path.read_text(), str(path))
    return out


MODULES = _modules()


def test_only_the_scheduler_reads_its_session() -> None:
    found = [
        f"{name}:{node.lineno}"
        for name, tree in MODULES.items()
        if not name.startswith("tidegate.scheduler")
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr == "ssn"
    ]
    assert found == [], f"hosts read the session (use OnlineScheduler's methods): {found}"


def _typing_only(tree: ast.Module) -> set[int]:
    """The ids of the import statements under `if TYPE_CHECKING:`."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            out |= {id(inner) for statement in node.body for inner in ast.walk(statement)}
    return out


def _imports(name: str, tree: ast.Module, typing: bool) -> set[str]:
    """The tidegate modules a module imports, at any depth of its code (with `typing`, those imported for type
    checking only too)."""
    package = name if (PACKAGE.parent / Path(*name.split("."))).is_dir() else name.rpartition(".")[0]
    skip = set() if typing else _typing_only(tree)
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        out |= {target for target in targets if target in MODULES and target != name}
    return out


HYBRID = ("tidegate.sim", "tidegate.fleet", "tidegate.live", "tidegate.kube")


def _cycles(graph: dict[str, set[str]]) -> list[str]:
    cycles = []
    state: dict[str, int] = {}  # 1 on the current path, 2 done

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for target in sorted(graph[name]):
            if state.get(target) == 1:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[name] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    # a package's __init__ re-exporting its modules is not a cycle of their code
    packages = {name for name in MODULES if (PACKAGE.parent / Path(*name.split("."))).is_dir()}
    return [cycle for cycle in cycles if not packages & set(cycle.split(" -> "))]


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert _cycles({name: _imports(name, tree, typing=False) for name, tree in MODULES.items()}) == []
    hybrid = {name: tree for name, tree in MODULES.items() if name.startswith(HYBRID)}
    graph = {name: _imports(name, tree, typing=True) & hybrid.keys() for name, tree in hybrid.items()}
    assert _cycles(graph) == []
