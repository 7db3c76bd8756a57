"""A minimal task implementing `TaskRuntime` and the command-harness factory for orchestrator tests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from openforgerl.harness.generic import CommandHarness
from openforgerl.testing.tasks import ProofFileTask

AGENT = Path(__file__).parent / "agents" / "proof_agent.py"


def agent_harness(mode: str = "ok") -> CommandHarness:
    return CommandHarness([sys.executable, str(AGENT), mode])


def proof_task(**fields: Any) -> ProofFileTask:
    """ "proof.txt must contain the magic word"; `crash_verifier=True` makes the verifier itself break."""
    return ProofFileTask(
        **{"task_id": "proof", "instruction": "Write the magic word into proof.txt", **fields}
    )


def procs_with(marker: str) -> list[int]:
    """PIDs whose command line contains `marker`."""
    found = []
    for pid in Path("/proc").iterdir():
        if pid.name.isdigit():
            try:
                if marker.encode() in (pid / "cmdline").read_bytes():
                    found.append(int(pid.name))
            except OSError:
                pass
    return found
