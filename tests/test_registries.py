"""A sandbox backend and a harness are each added by one registered module: registered from outside
the package, they are served by name through the same paths the commands use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openforgerl.harness.generic import CommandHarness
from openforgerl.harness.registry import HARNESSES, get_harness, harness_names, register_harness
from openforgerl.sandbox.base import SandboxBackend
from openforgerl.sandbox.registry import BACKENDS, UnknownBackend, make_backend, register_backend


class EchoHarness(CommandHarness):
    name = "echo-agent"

    def __init__(self, **_: Any) -> None:
        super().__init__(["/bin/echo"])


def test_a_registered_harness_is_served_by_its_name_and_aliases() -> None:
    register_harness("echo-agent", EchoHarness, aliases=("echo",))
    try:
        assert "echo-agent" in harness_names()
        assert isinstance(get_harness("echo-agent"), EchoHarness)
        assert isinstance(get_harness("echo"), EchoHarness)
    finally:
        HARNESSES.unregister("echo-agent")
    assert "echo" not in HARNESSES


async def test_a_registered_backend_is_opened_by_make_backend(tmp_path: Path) -> None:
    opened: list[Path] = []

    async def factory(root: Path, settings: Any) -> SandboxBackend:
        opened.append(root)
        from openforgerl.sandbox.local import LocalBackend

        return LocalBackend(root)

    register_backend("mine", factory)
    try:
        backend = await make_backend("mine", tmp_path)
        assert opened == [tmp_path]
        await backend.aclose()
    finally:
        BACKENDS.unregister("mine")
    with pytest.raises(UnknownBackend, match="mine"):
        await make_backend("mine", tmp_path)


def test_a_harness_name_served_twice_is_refused_unless_replaced() -> None:
    from openforgerl.registry import DuplicateNameError

    with pytest.raises(DuplicateNameError, match="harness 'codex' is registered twice"):
        register_harness("codex", EchoHarness)
    with pytest.raises(DuplicateNameError, match="'claude'"):  # an alias collides too
        register_harness("echo-agent", EchoHarness, aliases=("claude",))
    assert "echo-agent" not in HARNESSES
    codex = HARNESSES.get("codex")
    register_harness("codex", EchoHarness, replace=True)
    try:
        assert isinstance(get_harness("codex"), EchoHarness)
    finally:
        register_harness("codex", codex, replace=True)


def test_a_mistyped_name_is_one_line_naming_the_nearest_one() -> None:
    from openforgerl.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match=r"unknown harness 'codx'; did you mean 'codex'\? \(known: "):
        get_harness("codx")
    with pytest.raises(UnknownBackend, match=r"unknown backend 'podmn'; did you mean 'podman'\?"):
        BACKENDS.get("podmn")
