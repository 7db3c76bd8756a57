"""`synthesize`: sample candidates, validate them in-process, dedup, write task folders, report.

Candidates are drawn until `n` are kept or `max_candidates` were tried. Each kept task is a normal task
folder plus `[metadata.synth]` (env, family, variant, slots, signature, template). Claw tasks (laid out by
the `synth.plugins.WRITER` task writer: Claw's) run anywhere Claw tasks run. A task of a world that is
all data (an MCP listing, an OpenAPI document, a TOML file, plain `Tool`s) is a `tool-world` task that
carries the world (`world_doc`) and runs in a sandbox like any other. A world with code of its own (a
tool's `op`) gets Claw's layout with `unsupported = ["service:<env>"]` (no sandbox can import it), its
faults and tool list in `[metadata.synth]`, validated here only.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import time
import tomllib
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from openforgerl.env.errors import TaskFormatError
from openforgerl.synth.compose import Candidate, sample_candidate
from openforgerl.synth.dedup import Deduper
from openforgerl.synth.filters import FILTERS, Verdict, judge
from openforgerl.synth.loading import load_env
from openforgerl.synth.paraphrase import Paraphraser, paraphrase
from openforgerl.synth.plugins import TOOL_WORLD, WRITER, WRITERS
from openforgerl.synth.toolenv import ToolEnv
from openforgerl.synth.world_doc import env_document
from openforgerl.tasks import _toml
from openforgerl.tasks.draft import TaskDraft, write_task
from openforgerl.tasks.format import load_task

__all__ = ["Report", "synthesize", "write_candidate"]

REPORT = "synth_report.json"


@dataclass
class Report:
    env: str
    target: int
    seed: int
    generated: int = 0
    unbuildable: int = 0
    """Samples whose atoms did not fit the sampled world (not counted as generated)."""
    rejected: dict[str, int] = field(default_factory=dict)
    kept: int = 0
    paraphrased: int = 0
    seconds: float = 0.0
    by_variant: dict[str, int] = field(default_factory=dict)
    by_atoms: dict[str, int] = field(default_factory=dict)
    families: int = 0
    sandbox: dict[str, Any] = field(default_factory=dict)
    calibration: dict[str, Any] = field(default_factory=dict)
    """`--calibrate`: k, where the policy ran, how many tasks landed in 0 < p < 1, never / always solved."""

    def table(self) -> str:
        rows = [("generated", self.generated)] + [(f"rejected: {k}", v) for k, v in self.rejected.items()]
        rows += [("kept", self.kept), ("paraphrased", self.paraphrased)]
        width = max(len(r[0]) for r in rows)
        lines = [f"{name.ljust(width)}  {count:>6}" for name, count in rows]
        lines.append(f"{'seconds'.ljust(width)}  {self.seconds:>6.1f}")
        lines.append(f"variants: {self.by_variant}  atoms: {self.by_atoms}  families: {self.families}")
        return "\n".join(lines)


def _split(name: str) -> str:
    """A stable 1-in-10 held-out split by task id (tau2 splits by a hash of the id too)."""
    return "test" if int(hashlib.sha256(name.encode()).hexdigest(), 16) % 10 == 0 else "train"


def _difficulty(c: Candidate) -> str:
    if c.variant in ("impossible", "dup") or len(c.actions) > 3:
        return "hard"
    return "easy" if len(c.actions) == 1 and c.variant == "plain" else "medium"


def write_candidate(env: ToolEnv, c: Candidate, out: Path) -> Path:
    """Lay `c` out as a task folder under `out`: Claw's shape for a Claw world; a `tool-world` task
    carrying the world for one that is all data (`world_doc`); otherwise Claw's shape, flagged, as no
    sandbox can serve a world whose code is not installed there."""
    doc = None if env.claw else env_document(env)
    runs = env.claw or doc is not None
    draft = TaskDraft(
        name=c.name,
        instruction=c.instruction,
        services=c.services if env.claw else [],
        tools=list(env.offered) if env.claw else [],
        checks=c.checks,
        actions=c.actions if runs else [],
        fixtures=c.fixtures,
        workspace=c.workspace,
        faults=c.faults if runs else [],
        difficulty=_difficulty(c),
        split=_split(c.name),
        tags=["synth", c.variant, *c.services],
        source=f"openforgerl/synth:{env.name}",
        description=f"synthesised from {env.name}: {c.family}",
        extra_meta={} if runs else {"unsupported": [f"service:{env.name}"]},
        environment={"kind": TOOL_WORLD} if doc is not None else {},
        extra_files={"environment/world.json": json.dumps(doc, indent=1)} if doc is not None else {},
    )
    root = write_task(draft, out) if doc is not None else WRITERS.get(WRITER).write(draft, out)
    synth: dict[str, Any] = {
        "env": env.name,
        "family": c.family,
        "variant": c.variant,
        "n_atoms": c.n_atoms,
        "signature": list(c.signature),
        "slots": c.slots,
        "template": c.template,
        "paraphrased": c.instruction != c.template,
    }
    if not env.claw:
        synth |= {"tools": [t.name for t in env.tools], "faults": c.faults}
    if not runs:
        actions = [{"tool": a.tool, "args": a.args} for a in c.actions]
        (root / "solution" / "actions.json").write_text(json.dumps(actions, indent=1) + "\n")
        (root / "solution" / "solve.sh").write_text(
            "#!/usr/bin/env bash\n# No shell CLI speaks this "
            "environment's tools: the oracle is solution/actions.json,\n"
            f"# replayed in-process by openforgerl.synth (environment {env.name!r}).\nexit 1\n"
        )
    toml_path = root / "task.toml"
    data = tomllib.loads(toml_path.read_text())
    data.setdefault("metadata", {})["synth"] = synth
    toml_path.write_text(_toml.dumps(data))
    return root


def _slots(c: Candidate) -> list[str]:
    extra = [s for s in ("NOT FOUND", "(If a tool fails transiently, retry it.)") if s in c.instruction]
    return [*c.slots, *[s for s in extra if s not in c.slots]]


def _draw(
    env: ToolEnv,
    n: int,
    rng: random.Random,
    report: Report,
    paraphraser: Paraphraser | None,
    limit: int,
    keep_rejected: int,
) -> tuple[list[Candidate], list[tuple[Candidate, Verdict]]]:
    """Sample, judge, paraphrase and dedup until `n` are kept or `limit` were generated."""
    dedup = Deduper()
    shipped_text, shipped_gold = WRITERS.get(WRITER).shipped() if env.claw else (set(), set())
    kept: list[Candidate] = []
    rejected: list[tuple[Candidate, Verdict]] = []
    while len(kept) < n and report.generated < limit and report.unbuildable < 50 * max(n, 10):
        cand = sample_candidate(env, rng)
        if cand is None:
            report.unbuildable += 1
            continue
        report.generated += 1
        if (
            cand.instruction.split("\n")[0] in shipped_text
            or json.dumps([(a.tool, a.args) for a in cand.actions], sort_keys=True) in shipped_gold
        ):
            report.rejected["shipped"] += 1
            continue
        cand.slots = _slots(cand)
        verdict = judge(env, cand)
        if not verdict.ok:
            report.rejected[str(verdict.rejected_by)] += 1
            if verdict.rejected_by in ("noop", "oracle") and len(rejected) < keep_rejected:
                rejected.append((cand, verdict))
            continue
        cand.instruction, changed = paraphrase(cand.template, cand.slots, paraphraser)
        why = dedup.seen(cand.instruction, [(a.tool, a.args) for a in cand.actions])
        if why:
            report.rejected[why] += 1
            continue
        report.paraphrased += int(changed)
        kept.append(cand)
    return kept, rejected


def _write_all(env: ToolEnv, kept: list[Candidate], out: Path, report: Report) -> list[Path]:
    """Write every kept task; one that does not load as a task folder is removed (`format`)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for c in kept:
        path = write_candidate(env, c, out)
        try:
            load_task(path)
        except TaskFormatError:
            shutil.rmtree(path)
            report.rejected["format"] += 1
            continue
        paths.append(path)
    return paths


def synthesize(
    env: str | Path | ToolEnv,
    n: int,
    out: Path,
    *,
    seed: int = 0,
    paraphraser: Paraphraser | None = None,
    max_candidates: int | None = None,
    keep_rejected: int = 0,
) -> tuple[Report, list[Path], list[tuple[Candidate, Verdict]]]:
    """Synthesize up to `n` validated tasks into `out`; returns the report, the folders and up to
    `keep_rejected` candidates rejected by the oracle or no-op filters (for the sandbox agreement)."""
    t0 = time.monotonic()
    tool_env = load_env(env)
    report = Report(
        tool_env.name, n, seed, rejected={f: 0 for f in (*FILTERS, "shipped", "exact_dup", "near_dup")}
    )
    limit = max_candidates if max_candidates is not None else 6 * n
    kept, rejected = _draw(tool_env, n, random.Random(seed), report, paraphraser, limit, keep_rejected)
    paths = _write_all(tool_env, kept, out, report)
    written = {p.name for p in paths}
    kept = [c for c in kept if c.name.rsplit("/", 1)[-1] in written]
    report.kept = len(kept)
    report.by_variant = dict(Counter(c.variant for c in kept))
    report.by_atoms = {str(k): v for k, v in sorted(Counter(c.n_atoms for c in kept).items())}
    report.families = len({c.family for c in kept})
    report.seconds = round(time.monotonic() - t0, 2)
    (out / REPORT).write_text(json.dumps(asdict(report), indent=1) + "\n")
    return report, paths, rejected
