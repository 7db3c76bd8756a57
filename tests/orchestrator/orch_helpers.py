"""A minimal task implementing `TaskRuntime` and the command-harness factory for orchestrator tests."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from openforgerl.harness.generic import CommandHarness
from openforgerl.orchestrator.task_protocol import TaskDefaults, Verdict, VerifierError
from openforgerl.sandbox.base import Sandbox

AGENT = Path(__file__).parent / "agents" / "proof_agent.py"


def agent_harness(mode: str = "ok") -> CommandHarness:
    return CommandHarness([sys.executable, str(AGENT), mode])


@dataclass
class ProofTask(TaskDefaults):
    """"proof.txt must contain `expected`"; `crash_verifier` makes the verifier itself break."""

    task_id: str = "proof"
    instruction: str = "Write the magic word into proof.txt"
    budget_s: float = 120.0
    expected: str = "abracadabra"
    crash_verifier: bool = False
    seed_files: dict[str, bytes] = field(default_factory=lambda: {"README.md": b"write proof.txt\n"})

    def files(self) -> Mapping[str, bytes]:
        return self.seed_files

    async def verify(self, sandbox: Sandbox) -> Verdict:
        if self.crash_verifier:
            raise VerifierError("checker binary crashed")
        try:
            text = (await sandbox.read_file("/workdir/proof.txt")).decode()
        except FileNotFoundError:
            return Verdict(0.0, {"exists": 0.0}, "proof.txt missing")
        hit = float(self.expected in text)
        return Verdict(hit, {"exists": 1.0, "match": hit}, f"proof.txt = {text!r}")


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
