"""The oracle policy and the Claw suite generator are reached through their entry points, not imports."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from openforgerl.env.plugins import DEFAULT_ORACLE, GENERATORS, ORACLES, _generator


def test_the_installed_oracle_and_generator_are_found_by_name() -> None:
    oracle = ORACLES.get(DEFAULT_ORACLE)
    assert oracle.__module__ == "openforgerl.envs.claw.oracle_policy"
    assert {"success_rate", "seed"} <= set(inspect.signature(oracle).parameters)
    generate = GENERATORS.get("claw")
    assert generate.__module__ == "openforgerl.envs.claw.suite.generate"


def test_the_generator_writes_the_suite_it_is_registered_for(tmp_path: Path) -> None:
    written = GENERATORS.get("claw")(tmp_path / "suite")
    assert written and all((p / "task.toml").is_file() for p in written)


def test_an_entry_point_naming_no_callable_is_refused() -> None:
    with pytest.raises(TypeError, match="suite generator entry point names str"):
        _generator("not a function")
    assert _generator(print) is print  # control: a callable is adopted as is


def test_an_unknown_oracle_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(KeyError, match="unknown oracle policy 'actons'; did you mean 'actions'"):
        ORACLES.get("actons")


def _imported_after(code: str) -> set[str]:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", f"import sys\n{code}\nprint(' '.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {m for m in out.split() if m.startswith("openforgerl.envs")}


def test_a_gui_kind_is_found_by_entry_point_and_imports_only_itself() -> None:
    loaded = _imported_after(
        "from openforgerl.env.screens import get_environment\n"
        "assert get_environment('desktop').kind == 'desktop'"
    )
    assert "openforgerl.envs.desktop" in loaded
    assert not {"openforgerl.envs.browser", "openforgerl.envs.gui"} & loaded, loaded
    # control: asking for every kind does import the browser too
    assert "openforgerl.envs.browser" in _imported_after("from openforgerl.env.screens import kinds\nkinds()")


def test_every_installed_gui_kind_is_a_task_family() -> None:
    from openforgerl.env.screens import kinds
    from openforgerl.tasks.families import FAMILIES

    assert {"browser", "desktop"} <= set(kinds())
    for kind in kinds():
        assert FAMILIES.get(f"gui:{kind}").kinds == (kind,)
