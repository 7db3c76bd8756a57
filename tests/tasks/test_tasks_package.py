"""`openforgerl.tasks` is the generic side: it never imports an environment package (`openforgerl.envs`),
neither at import time nor lazily inside a function; environments register themselves (entry points)."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import openforgerl.tasks

TASKS = Path(openforgerl.tasks.__file__).parent


def _imported_modules(tree: ast.AST) -> list[str]:
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out += [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
    return out


def test_no_module_under_tasks_names_an_environment_package() -> None:
    offenders = {
        p.name: m
        for p in TASKS.rglob("*.py")
        for m in _imported_modules(ast.parse(p.read_text()))
        if m.startswith("openforgerl.envs")
    }
    assert offenders == {}


def test_importing_every_tasks_module_leaves_envs_unimported() -> None:
    names = [f"openforgerl.tasks.{m.name}" for m in pkgutil.iter_modules([str(TASKS)])]
    assert {"openforgerl.tasks.format", "openforgerl.tasks.harbor", "openforgerl.tasks.loader"} <= set(names)
    code = (
        f"import importlib, sys\nfor n in {names!r}: importlib.import_module(n)\n"
        "print(sorted(m for m in sys.modules if m.startswith('openforgerl.envs')))"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_a_kind_no_installed_environment_runs_is_named_with_the_known_ones(tmp_path: Path) -> None:
    from openforgerl.tasks import TaskFormatError, load_task

    (tmp_path / "task.toml").write_text('[task]\nname = "x/y"\n[environment]\nkind = "spaceship"\n')
    (tmp_path / "instruction.md").write_text("Fly.\n")
    with pytest.raises(TaskFormatError) as err:
        load_task(tmp_path)
    assert err.value.field == "environment.kind" and "'spaceship'" in err.value.reason
    assert "browser" in err.value.reason and "desktop" in err.value.reason  # the installed GUI kinds


def _import_graph(root: Path, prefixes: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules it imports (anywhere in its body; `if TYPE_CHECKING:` blocks never run), for
    the modules of `root`'s package whose names start with one of `prefixes`."""
    mods = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        if name.startswith(prefixes):
            mods[name] = path
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
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
            if isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name in mods}
            elif isinstance(node, ast.ImportFrom) and node.module:
                subs = {f"{node.module}.{a.name}" for a in node.names} & mods.keys()
                graph[name] |= subs or ({node.module} & mods.keys())
    return {m: deps - {m} for m, deps in graph.items()}


def test_tasks_and_envs_have_no_import_cycles() -> None:
    graph = _import_graph(TASKS.parent, ("openforgerl.tasks", "openforgerl.envs"))

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()] - seen:
                seen.add(nxt)
                todo.append(nxt)
        return goal in seen

    assert len(graph) > 60
    assert [m for m in graph if reaches(m, m)] == []
