"""Validation before a task is kept: replay it in-process and judge it with the verifier's evaluator.

No sandbox per task: a `Session` of the environment (for Claw, the service's own `ClawApp` over the
real world ops) takes the gold calls, and `env.checks.evaluate.evaluate` judges the state and audit log
exactly as `python -m openforgerl.envs.claw.verify` does in the sandbox. The checks are parsed by the
verifier's own parser after a round trip through the TOML writer, so what is judged here is what
`tests/checks.toml` will say. Filters, in order (the first that fails names the rejection):

| filter | rule |
|---|---|
| format | checks.toml parses |
| safety | no safety check trips on the gold |
| oracle | every gold call succeeds (a planned transient fault is retried once) and the task passes |
| deterministic | a second oracle run passes with the same final state |
| noop | doing nothing scores exactly 0 |
| prefix | no strict prefix of the gold passes (tau2 `verify_task`) |
| drop_write | leaving out any one gold write fails |
| dataflow | every looked-up value (an id, an address, an answer) was returned by an earlier gold call |
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openforgerl.env.checks.evaluate import Evidence, Outcome, evaluate
from openforgerl.env.checks.spec import Spec, parse_spec
from openforgerl.env.errors import TaskFormatError
from openforgerl.synth.compose import Candidate
from openforgerl.synth.toolenv import ToolEnv
from openforgerl.tasks import _toml
from openforgerl.tasks.draft import Action

__all__ = ["FILTERS", "Replay", "Verdict", "judge", "replay", "spec_of"]

FILTERS = ("format", "safety", "oracle", "deterministic", "noop", "prefix", "drop_write", "dataflow")


@dataclass(frozen=True)
class Replay:
    outcome: Outcome
    digest: str
    results: list[tuple[int, Any]]

    @property
    def calls_ok(self) -> bool:
        return all(status == 200 for status, _ in self.results)


@dataclass(frozen=True)
class Verdict:
    rejected_by: str | None
    noop_reward: float | None = None
    oracle_reward: float | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.rejected_by is None


def spec_of(checks: list[dict[str, Any]]) -> Spec:
    """The checks as the verifier will read them from tests/checks.toml."""
    text = _toml.dumps({"pass_threshold": 1.0, "checks": checks})
    return parse_spec(tomllib.loads(text), Path("tests/checks.toml"))


def _digest(state: dict[str, Any], workdir: Path | None) -> str:
    files = {}
    if workdir is not None:
        files = {
            str(p.relative_to(workdir)): p.read_bytes().hex()
            for p in sorted(workdir.rglob("*"))
            if p.is_file()
        }
    return hashlib.sha256(json.dumps([state, files], sort_keys=True, default=str).encode()).hexdigest()


def replay(env: ToolEnv, cand: Candidate, spec: Spec, actions: Sequence[Action]) -> Replay:
    """Run `actions` on a fresh session of the candidate's world and judge the result."""
    session = env.open_session(cand.fixtures, cand.workspace, cand.faults)
    try:
        results = []
        for a in actions:
            status, body = session.call(a.tool, dict(a.args))
            if status >= 500:  # an injected transient fault: retry once, as solve.sh does
                status, body = session.call(a.tool, dict(a.args))
            results.append((status, body))
        state, workdir = session.state(), session.workdir()
        outcome = evaluate(spec, Evidence(state, session.audit, workdir))
        return Replay(outcome, _digest(state, workdir), results)
    finally:
        session.close()


def _writes(env: ToolEnv, actions: Sequence[Action]) -> list[int]:
    return [i for i, a in enumerate(actions) if (t := env.tool(a.tool)) is not None and t.effect != "read"]


def _dataflow(cand: Candidate, gold: Replay) -> bool:
    for index, value in cand.refs:
        needle = json.dumps(value)[1:-1] if isinstance(value, str) else json.dumps(value)
        earlier = json.dumps([body for _, body in gold.results[:index]])
        if needle not in earlier:
            return False
    return True


def judge(env: ToolEnv, cand: Candidate) -> Verdict:
    """Run every filter on `cand`; the verdict names the first one it fails."""
    try:
        spec = spec_of(cand.checks)
    except TaskFormatError as exc:
        return Verdict("format", detail=str(exc))
    gold = replay(env, cand, spec, cand.actions)
    noop = replay(env, cand, spec, [])

    def reject(name: str, detail: str = "") -> Verdict:
        return Verdict(name, noop.outcome.reward, gold.outcome.reward, detail)

    if gold.outcome.safety < 1:
        return reject("safety", gold.outcome.log())
    if not gold.calls_ok or not gold.outcome.passed:
        return reject("oracle", gold.outcome.log())
    again = replay(env, cand, spec, cand.actions)
    if not again.outcome.passed or again.digest != gold.digest:
        return reject("deterministic")
    if noop.outcome.reward != 0.0:
        return reject("noop", noop.outcome.log())
    for n in range(1, len(cand.actions)):
        if replay(env, cand, spec, cand.actions[:n]).outcome.passed:
            return reject("prefix", f"the first {n} gold call(s) already pass")
    for i in _writes(env, cand.actions):
        if replay(env, cand, spec, cand.actions[:i] + cand.actions[i + 1 :]).outcome.passed:
            return reject("drop_write", f"passes without gold call {i} ({cand.actions[i].tool})")
    if not _dataflow(cand, gold):
        return reject("dataflow")
    return Verdict(None, noop.outcome.reward, gold.outcome.reward)
