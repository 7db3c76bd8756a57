"""Checkpoints: HF weights (loadable by the engines) + optimiser state + step/version, written atomically."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch


def save_checkpoint(
    path: Path, model: Any, optimizer: torch.optim.Optimizer, step: int, version: int
) -> None:
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, safe_serialization=True)
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    (tmp / "trainer_state.json").write_text(json.dumps({"step": step, "policy_version": version}))
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)  # readers see either the old or the new checkpoint, never half of one


def load_checkpoint(path: Path, model: Any, optimizer: torch.optim.Optimizer) -> tuple[int, int]:
    """Restore weights and optimiser in place; returns (next step, policy version)."""
    from safetensors.torch import load_file

    state = json.loads((path / "trainer_state.json").read_text())
    model.load_state_dict(load_file(str(path / "model.safetensors")), strict=False)
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    return int(state["step"]), int(state["policy_version"])
