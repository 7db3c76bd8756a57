"""The minimal task the test suite and benchmarks run: reward 1 iff `/workdir/proof.txt` holds a value.

Five test modules each wrote this task out (files, instruction, an in-process verifier); it is one here.
The verifier reads the file through the sandbox (`read_file`), so a symlink, FIFO or oversized file is the
agent's failure (reward 0), never an infra fault (see sandbox/safefile.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from openforgerl.env.contract import TaskDefaults, Verdict, VerifierError
from openforgerl.sandbox.base import Sandbox

PROOF_INSTRUCTION = "Create the file proof.txt in the current directory containing exactly: {expected}"


@dataclass
class ProofFileTask(TaskDefaults):
    """`exact`: the file must be `expected` exactly (a fresh value per test, so no stale file passes);
    otherwise it must contain it. `crash_verifier`: the verifier itself breaks (an infra fault)."""

    expected: str = "abracadabra"
    exact: bool = False
    task_id: str = "proof-file"
    instruction: str = ""
    budget_s: float = 120.0
    seed_files: Mapping[str, bytes] = field(
        default_factory=lambda: {"README.md": b"Write proof.txt as asked.\n"}
    )
    crash_verifier: bool = False

    def __post_init__(self) -> None:
        if not self.instruction:
            self.instruction = PROOF_INSTRUCTION.format(expected=self.expected)

    def files(self) -> Mapping[str, bytes]:
        return self.seed_files

    async def verify(self, sandbox: Sandbox) -> Verdict:
        if self.crash_verifier:
            raise VerifierError("checker binary crashed")
        try:
            text = (await sandbox.read_file("/workdir/proof.txt")).decode(errors="replace")
        except FileNotFoundError:
            return Verdict(0.0, {"exists": 0.0, "match": 0.0}, "proof.txt missing")
        hit = float(text == self.expected if self.exact else self.expected in text)
        return Verdict(hit, {"exists": 1.0, "match": hit}, f"proof.txt = {text[:200]!r}")
