"""No import cycles among openforgerl's modules: every `import`/`from ... import` of an openforgerl
module counts, inside functions too, except imports under `if TYPE_CHECKING:` and a submodule naming
its own parent package (which Python has imported first anyway)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import openforgerl

SRC = Path(openforgerl.__file__).resolve().parents[1]


def _modules() -> dict[str, Path]:
    out = {}
    for path in (SRC / "openforgerl").rglob("*.py"):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(tree: ast.Module, known: dict[str, Path]) -> Iterator[str]:
    typing_only = {
        id(x)
        for n in ast.walk(tree)
        if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test)
        for b in n.body
        for x in ast.walk(b)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known)
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names)


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {
        name: {
            t
            for t in _imports(ast.parse(path.read_text()), known)
            if t in known and t != name and not name.startswith(t + ".")
        }
        for name, path in known.items()
    }


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt, [*path, nxt])):
                return found
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start, [start])):
            return found
    return None


def test_openforgerl_has_no_import_cycle() -> None:
    assert _cycle(_graph()) is None


def test_the_check_finds_a_cycle() -> None:
    graph = _graph()
    graph["openforgerl.records"] = graph["openforgerl.records"] | {"openforgerl.trajectory.chains"}
    assert _cycle(graph) is not None
