"""Harnesses: unmodified agent CLIs (and our own `zero`) configured to talk to the gateway.

`get_harness(name)` gives an adapter (`HarnessAdapter`: `install`, `launch`); `HarnessMix` assigns
harnesses to rollouts for mixed runs; `run_on_host` runs a launch without a sandbox (development, tests).
Names are imported lazily: `python -m openforgerl.harness.zero` runs once per rollout inside the
sandbox and must not pay for pydantic and the adapters it never uses.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "HarnessAdapter": "base",
    "HarnessContext": "base",
    "HarnessLaunch": "base",
    "McpServer": "base",
    "HarnessMix": "harness_mix",
    "split_by_harness": "harness_mix",
    "get_harness": "registry",
    "harness_names": "registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
