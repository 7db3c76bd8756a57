"""The local engine in a process of its own (`python -m openforgerl.engines.local`).

The training loop's process already runs the gateway, the orchestrator and the optimizer on one
GIL; an engine thread beside them spent most of a rollout step waiting for it (a tiny model's
decode step is Python overhead, not arithmetic). A separate process gets its own core, and weights
reach it the way they reach vLLM: saved to disk, then `/collective_rpc reload_weights`.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from openforgerl.engines.local.vllm_cpu import free_port, stop, terminate_with_parent, wait_healthy


class LocalEngineProcess:
    """A running `openforgerl.engines.local` server; `url` is its root, `close` stops it."""

    def __init__(self, proc: subprocess.Popen[bytes], url: str) -> None:
        self.proc, self.url = proc, url

    @classmethod
    async def start(
        cls,
        model: str | Path,
        log_path: Path,
        *,
        threads: int = 1,
        ready_timeout_s: float = 180.0,
        memory_budget: str | None = None,
    ) -> LocalEngineProcess:
        """`memory_budget`: the engine's --memory-budget (e.g. "4GiB"); None = its default, half the memory
        available when it starts."""
        port = free_port()
        budget = ["--memory-budget", memory_budget] if memory_budget else []
        proc = _spawn(
            [
                sys.executable,
                "-m",
                "openforgerl.engines.local",
                "--model",
                str(model),
                "--port",
                str(port),
                "--threads",
                str(threads),
                *budget,
            ],
            log_path,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            await asyncio.to_thread(wait_healthy, url, proc, ready_timeout_s)
        except BaseException:
            stop(proc)
            raise RuntimeError(f"local engine did not start; see {log_path}") from None
        return cls(proc, url)

    def close(self) -> None:
        stop(self.proc)


def _spawn(argv: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        # its own session so `stop` can end its group; PDEATHSIG so a parent killed without a chance to
        # close it (SIGKILL, an OOM kill) does not leave it holding the model's memory
        return subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=terminate_with_parent,
        )
