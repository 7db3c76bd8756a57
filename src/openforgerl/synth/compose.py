"""Compose candidate tasks from a `ToolEnv`: atoms (`atoms.py`) along the data flow between tool schemas.

A task is one to three atoms on one sampled world, plus at most one variant: `dup` (a second record
with the same label, disambiguated in the instruction), `fault` (a transient 5xx / timeout on a gold
call) or `impossible` (the record does not exist; gold is a lookup and a refusal answer, every
write tool is guarded by `not_called`). Checks are data for `envs/claw/verify` (never code). Nothing here
decides whether a candidate is good: `filters.py` replays it.
"""

from __future__ import annotations

import copy
import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from openforgerl.synth.atoms import NOT_FOUND, Atom, Ctx, any_atom, impossible_atom, sample_world
from openforgerl.synth.toolenv import ToolEnv
from openforgerl.tasks.draft import Action

__all__ = ["NOT_FOUND", "Atom", "Candidate", "sample_candidate"]

_RETRY_NOTE = "(If a tool fails transiently, retry it.)"


@dataclass
class Candidate:
    env: str
    name: str
    instruction: str
    actions: list[Action]
    checks: list[dict[str, Any]]
    fixtures: dict[str, Any]
    services: list[str]
    family: str
    variant: str
    n_atoms: int
    slots: list[str] = field(default_factory=list)
    refs: list[tuple[int, Any]] = field(default_factory=list)
    faults: list[dict[str, Any]] = field(default_factory=list)
    workspace: dict[str, str] = field(default_factory=dict)
    template: str = ""
    """The instruction before any paraphrase."""

    @property
    def signature(self) -> tuple[str, ...]:
        return tuple(a.tool for a in self.actions)


def _guards(env: ToolEnv, atoms: list[Atom], services: set[str], impossible: bool) -> list[dict[str, Any]]:
    used = {a.tool for atom in atoms for a in atom.actions}
    guarded = [
        t.name
        for t in env.tools
        if t.effect == "write"
        and (t.service in services or t.collection == "files")
        and (impossible or (t.destructive and t.name not in used))
    ]
    guarded += [f for atom in atoms for f in atom.forbids if f not in guarded]
    return [{"kind": "not_called", "name": f"not_{name}", "tool": name, "safety": True} for name in guarded]


def _services(env: ToolEnv, actions: list[Action], checks: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    for a in actions:
        t = env.tool(a.tool)
        s = t.service if t and t.collection != "files" else "files"
        out += [s] if s and s not in out else []
    for c in checks:
        s = str(c.get("collection", "")).split(".")[0]
        out += [s] if s and s not in out else []
    return out


def _join(parts: list[str]) -> str:
    if len(parts) == 1:
        return parts[0]
    heads = ["First, ", "Then, ", "Finally, "] if len(parts) == 3 else ["First, ", "Then, "]
    return " ".join(h + _lower_first(p) for h, p in zip(heads, parts, strict=True))


def _lower_first(text: str) -> str:
    word = text.split(" ", 1)[0].rstrip(":,")
    return text if word == "I" or word[1:2].isupper() else text[:1].lower() + text[1:]


def _fault(rng: random.Random, actions: list[Action]) -> dict[str, Any]:
    tool = rng.choice([a.tool for a in actions])
    if rng.random() < 0.3:
        return {"tool": tool, "call": 1, "kind": "timeout", "delay_s": 0.5}
    return {"tool": tool, "call": 1, "kind": "error", "status": rng.choice((500, 502, 503))}


def sample_candidate(env: ToolEnv, rng: random.Random) -> Candidate | None:
    """One candidate task, or None when the sampled atoms do not fit this world."""
    ctx = Ctx(env, sample_world(env, rng), rng)
    roll = rng.random()
    variant = "impossible" if roll < 0.1 else "dup" if roll < 0.25 else "fault" if roll < 0.4 else "plain"
    final = next((t for t in env.tools if t.effect == "final"), None)
    if variant == "impossible":
        targets = [t for t in env.tools if t.kind in ("update", "delete", "move")]
        atom = impossible_atom(rng.choice(targets), ctx, final) if targets and final else None
        atoms = [atom] if atom else []
    else:
        n = rng.choices((1, 2, 3), (0.45, 0.4, 0.15))[0]
        atoms = [a for a in (any_atom(ctx, variant == "dup" and i == 0) for i in range(n)) if a]
        atoms = atoms if len(atoms) == n else []
    if not atoms:
        return None
    return _assemble(env, ctx, atoms, variant)


def _assemble(env: ToolEnv, ctx: Ctx, atoms: list[Atom], variant: str) -> Candidate:
    actions: list[Action] = []
    refs: list[tuple[int, Any]] = []
    checks: list[dict[str, Any]] = []
    for i, atom in enumerate(atoms):
        refs += [(len(actions) + j, v) for j, v in atom.refs]
        actions += atom.actions
        checks += [{**c, "name": f"a{i + 1}_{c['name']}"} for c in atom.checks]
    services = set(_services(env, actions, checks))
    checks += _guards(env, atoms, services, variant == "impossible")
    instruction = _join([a.instruction for a in atoms])
    if variant == "dup" and "the one whose" not in instruction:
        variant = "plain"
    last = env.tool(atoms[0].actions[-1].tool)
    target = env.collection(last.collection) if last else None
    if (
        variant == "plain"
        and len(atoms) == 1
        and last
        and last.kind in ("update", "delete", "move")
        and target
        and ctx.rng.random() < 0.3
    ):  # the impossible tasks' escape clause, so wording gives nothing away
        instruction += (
            f' If there is no such {target.noun}, change nothing and submit the answer "{NOT_FOUND}".'
        )
    faults = [_fault(ctx.rng, actions)] if variant == "fault" else []
    if faults:
        instruction += "\n\n" + _RETRY_NOTE
    svc = _services(env, actions, checks)
    fixtures = {s: copy.deepcopy(ctx.state[s]) for s in ctx.state if s in svc or not env.claw}
    family = "+".join(a.family for a in atoms)
    digest = hashlib.sha256(
        json.dumps(
            [instruction, [(a.tool, a.args) for a in actions], fixtures, faults], sort_keys=True, default=str
        ).encode()
    ).hexdigest()[:10]
    slug = re.sub(r"[^a-z0-9]+", "-", family.lower()).strip("-")[:60]
    return Candidate(
        env.name,
        f"{env.name}-synth/{slug}-{digest}",
        instruction,
        actions,
        checks,
        fixtures,
        svc,
        family,
        variant,
        len(atoms),
        [s for a in atoms for s in a.slots],
        refs,
        faults,
        template=instruction,
    )
