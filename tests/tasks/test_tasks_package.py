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
    offenders = {p.name: m for p in TASKS.rglob("*.py") for m in _imported_modules(ast.parse(p.read_text()))
                 if m.startswith("openforgerl.envs")}
    assert offenders == {}


def test_importing_every_tasks_module_leaves_envs_unimported() -> None:
    names = [f"openforgerl.tasks.{m.name}" for m in pkgutil.iter_modules([str(TASKS)])]
    assert {"openforgerl.tasks.format", "openforgerl.tasks.harbor", "openforgerl.tasks.loader"} <= set(names)
    code = (f"import importlib, sys\nfor n in {names!r}: importlib.import_module(n)\n"
            "print(sorted(m for m in sys.modules if m.startswith('openforgerl.envs')))")
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
