"""`load_env`: a tool environment from what `--env` names: the built-in Claw ones, a Python module, a TOML
file, an MCP `tools/list` result or an OpenAPI document. Apart from `toolenv` (the format) because it
imports every source's reader, and those readers import the format."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from openforgerl.synth.documents import DocumentError
from openforgerl.synth.importers import load_document
from openforgerl.synth.plugins import TOOL_ENVS
from openforgerl.synth.toolenv import ToolEnv, load_toml

__all__ = ["load_env"]


def _load_module(path: Path) -> ToolEnv:
    spec = importlib.util.spec_from_file_location(f"openforgerl_synth_env_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    env = getattr(module, "ENV", None)
    if not isinstance(env, ToolEnv):
        raise ValueError(f"{path} defines no ToolEnv named ENV")
    return env


def load_env(spec: str | Path | ToolEnv) -> ToolEnv:
    """`claw`, `claw-family` (Claw phrased like the `sft` family), a `.py` module with `ENV`, a `.toml`
    environment, an MCP `tools/list` result (`.json` with `tools`) or an OpenAPI 3 document
    (`.json` / `.yaml` with `openapi`)."""
    if isinstance(spec, ToolEnv):
        return spec.with_answer()
    if str(spec) in TOOL_ENVS:  # `claw`, `claw-family`: the installed environments' (entry points)
        return TOOL_ENVS.get(str(spec))()
    path = Path(spec)
    if not path.is_file():
        raise ValueError(f"--env {spec!r}: not 'claw', 'claw-family' or a file")
    if path.suffix == ".py":
        return _load_module(path).with_answer()
    if path.suffix == ".toml":
        try:
            return load_toml(path).with_answer()
        except DocumentError as exc:
            raise DocumentError(exc.args[0] if str(path) in exc.args[0] else f"{path}: {exc}") from None
    return load_document(path).with_answer()
