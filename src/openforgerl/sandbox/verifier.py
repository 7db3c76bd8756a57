"""Run a task's verifier apart from the agent, on any backend.

`run_verifier(sandbox, argv, inputs=...)` uses the backend's own `run_verifier` when it has one
(local: a fresh bwrap after the harness's PID namespace is gone, the workdir read-only, see
`LocalSandbox.run_verifier`; podman: a fresh container after the agent's is removed,
`PodmanSandbox.run_verifier`; Kubernetes: a fresh Pod after the agent's Pod is deleted or, for a
sandbox that started a task service, the Pod's `services` container once the agent's container has
ended, `KubernetesSandbox.run_verifier`). A backend without one falls back to an exec in the same
sandbox with the inputs and outputs in a fresh folder under its /tmp — weaker (the agent's files share
the container), noted as such; the verifier must still never import from the workdir (`python -I`, cwd
outside it).

`argv` names its input and output folders as `bwrap.VERIFIER_IN` / `VERIFIER_OUT` (`/verifier/in`,
`/verifier/out`); the fallback rewrites those prefixes to its own folder.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from openforgerl.sandbox.base import ExecResult, VerifierRun
from openforgerl.sandbox.bwrap import VERIFIER_IN, VERIFIER_OUT

__all__ = ["VERIFIER_IN", "VERIFIER_OUT", "run_verifier"]

_ROOT = "/verifier"


async def run_verifier(
    sandbox: Any,
    argv: Sequence[str],
    *,
    inputs: Mapping[str, bytes],
    outputs: Sequence[str] = ("reward.json", "verifier.log"),
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
) -> VerifierRun:
    """The verifier's exit and its output files (`outputs` names what the fallback reads back)."""
    own = getattr(sandbox, "run_verifier", None)
    if own is not None:
        run: VerifierRun = await own(argv, inputs=inputs, env=env, timeout_s=timeout_s)
        return run
    return await _in_place(sandbox, argv, inputs, outputs, env, timeout_s)


async def _in_place(
    sandbox: Any,
    argv: Sequence[str],
    inputs: Mapping[str, bytes],
    outputs: Sequence[str],
    env: Mapping[str, str] | None,
    timeout_s: float | None,
) -> VerifierRun:
    base = f"/tmp/.openforgerl-verifier-{uuid.uuid4().hex[:12]}"
    for rel, data in inputs.items():
        await sandbox.write_file(f"{base}/in/{rel}", data)
    await sandbox.write_file(f"{base}/out/.keep", b"")
    moved = [a.replace(_ROOT, base, 1) if a.startswith(_ROOT) else a for a in argv]
    result: ExecResult = await sandbox.exec(
        moved, env=dict(env or {}), cwd=f"{base}/out", timeout_s=timeout_s
    )
    found: dict[str, bytes] = {}
    for name in outputs:
        try:
            found[name] = await sandbox.read_file(f"{base}/out/{name}")
        except FileNotFoundError:
            continue
    return VerifierRun(result, found)
