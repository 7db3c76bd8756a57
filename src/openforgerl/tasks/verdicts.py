"""A verifier's output as a `Verdict`: the reward file every runtime's verifier writes, and the exit codes
they share (`sandbox.verifier.run_verifier` runs them apart from the agent)."""

from __future__ import annotations

import json
from typing import Any

from openforgerl.env.contract import Verdict, VerifierError
from openforgerl.sandbox.base import TamperError

__all__ = ["EXIT_TAMPERED", "parse_reward", "verdict_of"]

EXIT_TAMPERED = 3
"""A verifier's exit code when what the agent left broke the rules (e.g. a link where a file was expected)."""


def verdict_of(run: Any) -> Verdict:
    """The verdict of a finished verifier run (`sandbox.verifier.run_verifier`): exit 3 is the agent's
    tampering (reward 0, never infra); any other failure, or no `reward.json`, is a broken verifier."""
    res = run.result
    log = res.stdout.decode(errors="replace") + res.stderr.decode(errors="replace")
    if res.returncode == EXIT_TAMPERED and not res.timed_out:
        raise TamperError(log[-2000:])
    if res.returncode != 0 or res.timed_out or "reward.json" not in run.outputs:
        raise VerifierError(f"verifier exited {res.returncode} (timed_out={res.timed_out}): {log[-2000:]}")
    return parse_reward(run.outputs["reward.json"], log)


def parse_reward(raw: bytes, log: str) -> Verdict:
    """reward.json (flat dict of finite numbers with `reward`) or reward.txt (one float) → Verdict."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise VerifierError(f"reward file is not JSON: {raw[:200]!r}") from exc
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        return Verdict(float(data), {"reward": float(data)}, log)
    if not isinstance(data, dict) or not isinstance(data.get("reward"), (int, float)):
        raise VerifierError(f"reward file lacks a numeric 'reward': {raw[:200]!r}")
    return Verdict(
        float(data["reward"]), {k: float(v) for k, v in data.items() if isinstance(v, (int, float))}, log
    )
