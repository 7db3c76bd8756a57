"""Calibration with a live policy, for `tasks synthesize --calibrate`: `calibrate_embedded` opens the
embedded default services exactly as `train` does (`compose.train.open_train_services`),
`calibrate_on_gateway` uses a running gateway. Wiring, so here and not in `synth/`: it composes `train`'s
services and harness with `synth.calibrate`, and `train` itself imports `synth.calibrate` (the
`refresh_every` hook)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from openforgerl.synth.calibrate import Calibration, calibrate, measure, recorded

__all__ = ["calibrate_embedded", "calibrate_on_gateway"]


def _policy_config(model: str | None, config: Path | None) -> Any:
    """The policy as `train` would run it: a training config's model, engine and harness settings, or the
    defaults (the `tiny` model, `zero`), with `model` (a name or a model directory) overriding."""
    from openforgerl.config import Config

    cfg = Config.from_yaml(config) if config is not None else Config()
    return cfg.model_copy(update={"model": model}) if model else cfg


def calibrate_embedded(
    root: Path,
    *,
    k: int = 4,
    model: str | None = None,
    config: Path | None = None,
    work_dir: Path | None = None,
    threshold: float = 1.0,
) -> list[Calibration]:
    """`tasks synthesize --calibrate` without `--gateway`: open the embedded default services exactly as
    `train` opens it (`compose.train.open_train_services`: local engine on the model, call log, gateway,
    sandbox backend) and run k rollouts per task under `root` with the harness `train` would build."""
    import tempfile

    from openforgerl.compose.train import harness_for, open_train_services
    from openforgerl.config import TaskSelection

    policy = _policy_config(model, config)
    cfg = policy.model_copy(
        update={
            "tasks": TaskSelection(dir=str(root), split=None),
            "eval": policy.eval.model_copy(update={"tasks": None}),
        }
    )
    paths = _task_paths(root)

    async def rollouts(out_dir: Path) -> dict[str, list[float | None]]:
        async with open_train_services(cfg, out_dir) as services:
            return await measure(
                services.train_tasks,
                k,
                harness_for(cfg, 0),
                gateway=services.gateway.access,
                backend=services.backend,
                config=cfg.orchestrator(group_size=k),
            )

    with tempfile.TemporaryDirectory(prefix="calibrate-") as tmp:
        measured = asyncio.run(rollouts(work_dir or Path(tmp)))
    return calibrate(paths, recorded(measured), k, policy=f"{cfg.model}@embedded", threshold=threshold)


def calibrate_on_gateway(
    root: Path, gateway_url: str, *, k: int = 4, config: Path | None = None, threshold: float = 1.0
) -> list[Calibration]:
    """`tasks synthesize --calibrate --gateway URL`: the policy behind a running gateway (admin token from
    `$OPENFORGERL_ADMIN_TOKEN`), local sandboxes, the harness a training config (or the default) builds."""
    from openforgerl.compose.train import harness_for
    from openforgerl.errors import UserError
    from openforgerl.gateway.access import GatewayAccess
    from openforgerl.sandbox.local import LocalBackend
    from openforgerl.tasks.loader import load_runtime

    cfg = _policy_config(None, config)
    try:
        access = GatewayAccess.from_env(gateway_url)
    except ValueError as exc:  # no admin token: the user's to fix
        raise UserError(str(exc)) from None
    paths = _task_paths(root)

    async def rollouts() -> dict[str, list[float | None]]:
        backend = LocalBackend()
        try:
            return await measure(
                [load_runtime(p) for p in paths],
                k,
                harness_for(cfg, 0),
                gateway=access,
                backend=backend,
                config=cfg.orchestrator(group_size=k),
            )
        finally:
            await backend.aclose()

    measured = asyncio.run(rollouts())
    return calibrate(paths, recorded(measured), k, policy=f"{cfg.harness}@{gateway_url}", threshold=threshold)


def _task_paths(root: Path) -> list[Path]:
    from openforgerl.tasks.format import find_tasks

    return list(find_tasks(root))
