"""The import rules, measured on the source tree: the core (everything outside an environment package)
imports no environment, environments import no other environment, few pairs of packages import each
other, and no modules form an import circle. Each count is a ratchet: it may only go down, and the
numbers below are lowered as imports are removed. Two rules hold outright: nothing below the CLI
imports it, and no stage imports the config schema or the composition root (the top layer wires them).

Every `import` / `from ... import` counts, inside functions and under `if TYPE_CHECKING:` too (a
type-only import is still a dependency a reader has to follow); a submodule naming its own parent
package does not (Python has imported the parent first anyway).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import openforgerl

SRC = Path(openforgerl.__file__).resolve().parents[1]
ROOT = "openforgerl"
ENVS = f"{ROOT}.envs"
SHARED_IN_ENVS: frozenset[str] = frozenset()
"""Modules under envs/ that are no environment (none today: each importer lives in the environment it
feeds, found through `tasks.importing`)."""
SDK = f"{ROOT}.env"
SDK_MAY_IMPORT = frozenset(
    {
        f"{ROOT}.{m}"
        for m in (
            "records",
            "errors",
            "registry",
            "paths",
            "sandbox",
            "sandbox.base",
            "sandbox.safefile",
            "sandbox.verifier",
        )
    }
)
"""What the environment SDK (`openforgerl.env`) may import besides its own modules: the ground it stands on
(records, errors, the registry, paths and the sandbox contract), never the task format, an
environment nor a stage above it (orchestrator, gateway, train, config, stack, the CLI)."""
ENV_MAY_IMPORT = SDK_MAY_IMPORT | frozenset(
    {
        f"{ROOT}.{m}"
        for m in (
            "engines.chat_format",
            "synth.plugins",
            "synth.toolenv",
            "synth.vocab",
        )
    }
)
"""What an environment may import besides the SDK and the task format (`openforgerl.tasks`): the ground
and the contracts of the stages it plugs into (the chat
format its oracle writes tool calls in, the synthesis tool-environment types) — never the orchestrator,
the gateway, the trainer or another environment."""
CLI = f"{ROOT}.cli"
WIRING = frozenset({f"{ROOT}.config", f"{ROOT}.stack"})
"""The config schema and the composition root: read and opened only on top."""
ON_TOP = (CLI, *WIRING, f"{ROOT}.compose")
"""The top layer: the CLI, the schema, the composition root and `compose` (the wiring of the trainer and
of the veRL agent loop from a config); each `__main__` is on top too (`entry_point`)."""

# The ratchet: today's counts. Lower them when an import goes; the goal is 0 / 0 / <= 5 / 0.
CORE_TO_ENV = 0
BETWEEN_ENVS = 0
MUTUAL_PAIRS = 0
CIRCLES = 0


@dataclass(frozen=True)
class Layers:
    core_to_env: list[tuple[str, str]]
    between_envs: list[tuple[str, str]]
    mutual_pairs: list[tuple[str, str]]
    circles: list[list[str]]

    def counts(self) -> tuple[int, int, int, int]:
        return len(self.core_to_env), len(self.between_envs), len(self.mutual_pairs), len(self.circles)


def modules(src: Path) -> dict[str, Path]:
    out = {}
    for path in (src / ROOT).rglob("*.py"):
        name = ".".join(path.relative_to(src).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = importer.split(".")[: len(importer.split(".")) - node.level + (1 if is_package else 0)]
    return ".".join([*parts, *([node.module] if node.module else [])])


def _targets(path: Path, importer: str, known: dict[str, Path]) -> Iterator[str]:
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = _absolute(node, importer, is_package)
            subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known]
            yield from subs or [base]
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names)


def graph(src: Path) -> dict[str, set[str]]:
    """Module -> the openforgerl modules it imports (a dotted name is cut to the longest known module)."""
    known = modules(src)

    def resolve(target: str) -> str | None:
        parts = target.split(".")
        while parts and ".".join(parts) not in known:
            parts.pop()
        return ".".join(parts) or None

    out: dict[str, set[str]] = {}
    for name, path in known.items():
        found = {resolve(t) for t in _targets(path, name, known) if t.startswith(ROOT)}
        out[name] = {t for t in found if t is not None and t != name and not name.startswith(t + ".")}
    return out


def environment(module: str) -> str | None:
    """`openforgerl.envs.claw.world` -> `claw`; None for the core and the shared modules under envs/."""
    parts = module.split(".")
    if module.startswith(ENVS + ".") and parts[2] not in SHARED_IN_ENVS:
        return parts[2]
    return None


def entry_point(module: str) -> bool:
    """The top layer: the CLI, and each `__main__`
    (a `python -m` door, which Python runs and nothing imports)."""
    return module == CLI or module.startswith(CLI + ".") or module.endswith(".__main__")


def package(module: str) -> str:
    """The unit pairs are counted between: a top-level package or module, each environment its own, and the
    entry points together as the CLI (`gateway/__main__.py` wires the gateway command, as `cli/` does)."""
    parts = module.split(".")
    if entry_point(module):
        return CLI
    return ".".join(parts[:3]) if environment(module) else ".".join(parts[:2])


def imports_of_entry_points(g: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, entry point) for each import of the CLI or of a `__main__` from below them: a stage that
    did would depend on how it is wired, and bring typer and every other stage with it."""
    return [(a, b) for a in sorted(g) for b in sorted(g[a]) if entry_point(b) and not entry_point(a)]


def on_top(module: str) -> bool:
    return entry_point(module) or any(module == t or module.startswith(t + ".") for t in ON_TOP)


def imports_of_the_wiring(g: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, schema or composition root) for each import of `openforgerl.config` or `openforgerl.stack`
    from below the top layer: a stage that did would read the whole configuration and open its own
    services, where it should take the settings it reads and the services it stands on as arguments."""
    return [(a, b) for a in sorted(g) for b in sorted(g[a]) if b in WIRING and not on_top(a)]


def _circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(g.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def measure(src: Path) -> Layers:
    g = graph(src)
    edges = [(a, b) for a in sorted(g) for b in sorted(g[a])]
    core_to_env = [(a, b) for a, b in edges if environment(a) is None and environment(b) is not None]
    between = [(a, b) for a, b in edges if None is not environment(a) != environment(b) is not None]
    arrows = {(package(a), package(b)) for a, b in edges if package(a) != package(b)}
    mutual = sorted((p, q) for p, q in arrows if p < q and (q, p) in arrows)
    return Layers(core_to_env, between, mutual, _circles(g))


def sdk_reaches(src: Path) -> list[tuple[str, str]]:
    """The imports of the environment SDK outside its own modules and the ground it may stand on."""
    g = graph(src)
    inside = [m for m in sorted(g) if m == SDK or m.startswith(SDK + ".")]
    return [
        (a, b)
        for a in inside
        for b in sorted(g[a])
        if not (b == SDK or b.startswith(SDK + ".") or b in SDK_MAY_IMPORT or b == ROOT)
    ]


def environment_reaches(src: Path) -> list[tuple[str, str]]:
    """The imports of environment packages outside themselves, the SDK, the task
    format and `ENV_MAY_IMPORT`."""
    g = graph(src)

    def allowed(a: str, b: str) -> bool:
        inside = (SDK, f"{ROOT}.tasks", f"{ENVS}.{environment(a)}")
        return b == ROOT or b in ENV_MAY_IMPORT or any(b == p or b.startswith(p + ".") for p in inside)

    return [
        (a, b) for a in sorted(g) if environment(a) is not None for b in sorted(g[a]) if not allowed(a, b)
    ]


def _report(layers: Layers) -> str:
    lines = [
        f"core -> environment: {len(layers.core_to_env)}",
        *(f"  {a} -> {b}" for a, b in layers.core_to_env),
        f"between environments: {len(layers.between_envs)}",
        *(f"  {a} -> {b}" for a, b in layers.between_envs),
        f"packages importing each other: {len(layers.mutual_pairs)}",
        *(f"  {p} <-> {q}" for p, q in layers.mutual_pairs),
        f"import circles: {len(layers.circles)}",
        *(f"  {' / '.join(c)}" for c in layers.circles),
    ]
    return "\n".join(lines)


def test_the_import_rules_hold_at_least_as_well_as_today() -> None:
    layers = measure(SRC)
    print(_report(layers))
    limits = (CORE_TO_ENV, BETWEEN_ENVS, MUTUAL_PAIRS, CIRCLES)
    hint = (
        f"\nceilings {limits}: a count above its ceiling is a new import of that kind (listed above); "
        "remove it (a Protocol for a type-only import, the registry or an entry point for a plug-in) "
        "rather than raise the ceiling"
    )
    assert all(n <= limit for n, limit in zip(layers.counts(), limits, strict=True)), _report(layers) + hint


def test_the_environment_sdk_imports_only_the_ground_it_stands_on() -> None:
    assert [m for m in modules(SRC) if m.startswith(SDK + ".")], "the SDK has modules to check"
    assert sdk_reaches(SRC) == []


def test_an_environment_imports_only_the_sdk_the_task_format_and_the_contracts_it_plugs_into() -> None:
    assert [m for m in modules(SRC) if environment(m) is not None], "there are environments to check"
    found = environment_reaches(SRC)
    assert found == [], "\n".join(f"{a} -> {b}" for a, b in found)


def test_an_environment_import_of_a_stage_is_flagged(tmp_path: Path) -> None:
    """Control: an environment reaching into the orchestrator or the gateway is listed; its own modules,
    the SDK, the task format and the sandbox contract are not."""
    src = _write(
        tmp_path,
        {
            "openforgerl/__init__.py": "",
            "openforgerl/env/__init__.py": "",
            "openforgerl/env/contract.py": "",
            "openforgerl/tasks/__init__.py": "",
            "openforgerl/tasks/families.py": "",
            "openforgerl/sandbox/__init__.py": "",
            "openforgerl/sandbox/base.py": "",
            "openforgerl/orchestrator/__init__.py": "",
            "openforgerl/orchestrator/rollout.py": "",
            "openforgerl/gateway/__init__.py": "",
            "openforgerl/envs/__init__.py": "",
            "openforgerl/envs/shop/__init__.py": (
                "from openforgerl.env.contract import TaskSpec\nfrom openforgerl.tasks.families import F\n"
                "from openforgerl.sandbox.base import Sandbox\nfrom . import runtime\n"
            ),
            "openforgerl/envs/shop/runtime.py": (
                "from openforgerl.orchestrator.rollout import run\ndef f():\n    import openforgerl.gateway\n"
            ),
        },
    )
    assert environment_reaches(src) == [
        ("openforgerl.envs.shop.runtime", "openforgerl.gateway"),
        ("openforgerl.envs.shop.runtime", "openforgerl.orchestrator.rollout"),
    ]


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_a_clean_tree_counts_nothing(tmp_path: Path) -> None:
    src = _write(
        tmp_path,
        {
            "openforgerl/__init__.py": "",
            "openforgerl/records.py": "",
            "openforgerl/envs/__init__.py": "",
            "openforgerl/envs/claw/__init__.py": "from openforgerl.records import X\nfrom . import world\n",
            "openforgerl/envs/claw/world.py": "from openforgerl.env import kit\n",
            "openforgerl/env/__init__.py": "",
            "openforgerl/env/kit.py": "from openforgerl import records\n",
            "openforgerl/stack.py": "import openforgerl.records\n",
        },
    )
    assert measure(src).counts() == (0, 0, 0, 0)


def test_each_forbidden_import_is_flagged(tmp_path: Path) -> None:
    """Control: one import of each forbidden kind in a synthetic tree is counted once, by name."""
    src = _write(
        tmp_path,
        {
            "openforgerl/__init__.py": "",
            "openforgerl/records.py": "",
            "openforgerl/stack.py": "def run():\n    from openforgerl.envs.claw import world\n",
            "openforgerl/envs/__init__.py": "",
            "openforgerl/envs/claw/__init__.py": "",
            "openforgerl/envs/claw/world.py": "",
            "openforgerl/envs/tau2/__init__.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..claw.world import World\n"
            ),
            "openforgerl/gateway/__init__.py": "from openforgerl.train import loop\n",
            "openforgerl/train/__init__.py": "",
            "openforgerl/train/loop.py": "from openforgerl.gateway import Gateway\n",
            "openforgerl/config.py": "from openforgerl.sandbox import registry\n",
            "openforgerl/sandbox/__init__.py": "",
            "openforgerl/sandbox/registry.py": "import openforgerl.config\n",
        },
    )
    layers = measure(src)
    assert layers.core_to_env == [("openforgerl.stack", "openforgerl.envs.claw.world")]
    assert layers.between_envs == [("openforgerl.envs.tau2", "openforgerl.envs.claw.world")]
    assert layers.mutual_pairs == [
        ("openforgerl.config", "openforgerl.sandbox"),
        ("openforgerl.gateway", "openforgerl.train"),
    ]
    assert layers.circles == [
        ["openforgerl.config", "openforgerl.sandbox.registry"],
        ["openforgerl.gateway", "openforgerl.train.loop"],
    ]
    limits = (0, 0, 0, 0)
    assert not all(n <= limit for n, limit in zip(layers.counts(), limits, strict=True))  # the ratchet fails


def test_nothing_below_the_cli_imports_it() -> None:
    found = imports_of_entry_points(graph(SRC))
    assert found == [], "\n".join(f"{a} -> {b}" for a, b in found) + (
        "\nmove the logic such a module needs out of the CLI into its stage, and import it from there"
    )


def test_no_stage_imports_the_config_or_the_composition_root() -> None:
    found = imports_of_the_wiring(graph(SRC))
    assert found == [], "\n".join(f"{a} -> {b}" for a, b in found) + (
        "\npass the stage the settings it reads (sections defined with the stage, like train/settings.py) "
        "and the services it stands on; build them from the config in openforgerl.compose or the CLI"
    )


def test_an_import_of_the_config_or_the_composition_root_from_below_is_flagged(tmp_path: Path) -> None:
    """Control: a stage importing the schema inside a function, and one importing the composition root
    for types only, are each named; the CLI, `compose` and the composition root itself are not."""
    src = _write(
        tmp_path,
        {
            "openforgerl/__init__.py": "",
            "openforgerl/config.py": "from openforgerl.train.settings import TrainSettings\n",
            "openforgerl/stack.py": "from openforgerl.config import Config\n",
            "openforgerl/cli/__init__.py": "",
            "openforgerl/cli/train.py": (
                "from openforgerl import config\nfrom openforgerl.compose import train\n"
            ),
            "openforgerl/compose/__init__.py": "",
            "openforgerl/compose/train.py": "from openforgerl.stack import open_services\n",
            "openforgerl/train/__init__.py": "",
            "openforgerl/train/settings.py": "",
            "openforgerl/train/trainer.py": "def run():\n    from openforgerl.config import load_config\n",
            "openforgerl/synth/__init__.py": "",
            "openforgerl/synth/calibrate.py": (
                "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import openforgerl.stack\n"
            ),
        },
    )
    assert imports_of_the_wiring(graph(src)) == [
        ("openforgerl.synth.calibrate", "openforgerl.stack"),
        ("openforgerl.train.trainer", "openforgerl.config"),
    ]
    # and the pair is counted
    assert measure(src).mutual_pairs == [("openforgerl.config", "openforgerl.train")]


def test_a_python_m_door_may_wire_the_cli(tmp_path: Path) -> None:
    """`gateway/__main__.py` runs the CLI and `cli/gateway.py` calls the gateway: no pair, nothing flagged."""
    src = _write(
        tmp_path,
        {
            "openforgerl/__init__.py": "",
            "openforgerl/cli/__init__.py": "",
            "openforgerl/cli/gateway.py": "from openforgerl.gateway import server\n",
            "openforgerl/gateway/__init__.py": "",
            "openforgerl/gateway/server.py": "",
            "openforgerl/gateway/__main__.py": "from openforgerl.cli import main\n",
        },
    )
    assert imports_of_entry_points(graph(src)) == []
    assert measure(src).counts() == (0, 0, 0, 0)


def test_an_import_of_the_cli_from_below_is_flagged(tmp_path: Path) -> None:
    """Control: a stage importing a CLI module, and one importing another's
    `python -m` door, are each named."""
    src = _write(
        tmp_path,
        {
            "openforgerl/__init__.py": "",
            "openforgerl/cli/__init__.py": "",
            "openforgerl/cli/gateway.py": "from openforgerl.gateway import server\n",
            "openforgerl/gateway/__init__.py": "",
            "openforgerl/gateway/__main__.py": "",
            "openforgerl/gateway/server.py": (
                "def run():\n    from openforgerl.cli.gateway import admin_token\n"
            ),
            "openforgerl/train.py": "from openforgerl.gateway import __main__\n",
        },
    )
    assert imports_of_entry_points(graph(src)) == [
        ("openforgerl.gateway.server", "openforgerl.cli.gateway"),
        ("openforgerl.train", "openforgerl.gateway.__main__"),
    ]
    assert measure(src).mutual_pairs == [
        ("openforgerl.cli", "openforgerl.gateway")
    ]  # and the pair is counted


def test_an_sdk_import_of_an_environment_or_a_stage_above_is_flagged(tmp_path: Path) -> None:
    """Control: the SDK importing an environment, the orchestrator or config is caught, by name; its own
    modules, records and the sandbox contract are not."""
    src = _write(
        tmp_path,
        {
            "openforgerl/__init__.py": "",
            "openforgerl/records.py": "",
            "openforgerl/config.py": "",
            "openforgerl/sandbox/__init__.py": "",
            "openforgerl/sandbox/base.py": "",
            "openforgerl/orchestrator/__init__.py": "",
            "openforgerl/orchestrator/task_protocol.py": "",
            "openforgerl/envs/__init__.py": "",
            "openforgerl/envs/claw/__init__.py": "",
            "openforgerl/envs/claw/tools.py": "",
            "openforgerl/env/__init__.py": "",
            "openforgerl/env/world.py": (
                "from openforgerl.sandbox.base import TamperError\nfrom . import mcp\n"
            ),
            "openforgerl/env/mcp.py": (
                "from openforgerl.records import X\nfrom openforgerl.envs.claw.tools import TOOLS\n"
            ),
            "openforgerl/env/user.py": (
                "def f():\n    from openforgerl.orchestrator.task_protocol import TaskRuntime\n"
                "    import openforgerl.config\n"
            ),
        },
    )
    assert sdk_reaches(src) == [
        ("openforgerl.env.mcp", "openforgerl.envs.claw.tools"),
        ("openforgerl.env.user", "openforgerl.config"),
        ("openforgerl.env.user", "openforgerl.orchestrator.task_protocol"),
    ]
