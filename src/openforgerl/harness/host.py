"""Run one `HarnessLaunch` directly on the host, without a sandbox.

For development and the harness tests before/besides the sandbox backends: the launch's paths are real
host paths here. Runs the CLI in its own process group and kills the whole group at the deadline, because
several CLIs hang forever on a stalled stream (see the adapters' docstrings).
"""

from __future__ import annotations

import asyncio
import os
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import psutil  # type: ignore[import-untyped]  # ships no type hints; types-psutil is not locked

from openforgerl.harness.base import HarnessLaunch


@dataclass(frozen=True)
class HostRun:
    returncode: int | None  # None when killed at the deadline
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float


def write_files(launch: HarnessLaunch) -> None:
    for path, content in launch.files.items():
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)


def _kill_tree(pid: int) -> None:
    """Kill the process group and every descendant (some CLIs start children in their own session)."""
    try:
        victims = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        victims = []
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for child in victims:
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass


async def run_on_host(launch: HarnessLaunch, cwd: Path, budget_s: float) -> HostRun:
    """Write the launch's files, run its argv in `cwd`, and stop it (whole tree) after `budget_s`.

    Output goes to temporary files, not pipes, so a grandchild that keeps a pipe open cannot hold the
    run past its budget.
    """
    write_files(launch)
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = await asyncio.create_subprocess_exec(
            *launch.argv,
            cwd=cwd,
            env=dict(launch.env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout=budget_s)
        except TimeoutError:
            timed_out = True
        finally:
            _kill_tree(proc.pid)  # on success too: stray children (MCP servers, shells) die with the run
            await proc.wait()
        texts = [_read(f) for f in (out, err)]
    code = None if timed_out else proc.returncode
    return HostRun(code, texts[0], texts[1], timed_out, time.monotonic() - start)


def _read(fh: IO[bytes]) -> str:
    fh.seek(0)
    return fh.read().decode(errors="replace")
