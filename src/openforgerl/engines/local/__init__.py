"""The embedded local engine: a transformers model behind vLLM's OpenAI-compatible token API.

The names below load on first use: importing a submodule that needs no torch (the `engine` command's
argument parsing, `vllm_cpu`, the process launcher) must work in a base install without the
`engine` extra.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["Generation", "LocalEngine", "SamplingParams"]

_WHERE = {"Generation": "generation", "LocalEngine": "engine", "SamplingParams": "sampling"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
