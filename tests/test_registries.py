"""A sandbox backend and a harness are each added by one registered module: registered from outside
the package, they are served by name through the same paths the commands use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openforgerl.harness.generic import CommandHarness
from openforgerl.harness.registry import ALIASES, FACTORIES, get_harness, harness_names, register_harness
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
        FACTORIES.pop("echo-agent")
        ALIASES.pop("echo")


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
        BACKENDS.pop("mine")
    with pytest.raises(UnknownBackend, match="mine"):
        await make_backend("mine", tmp_path)
