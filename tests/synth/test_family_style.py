"""`--env claw-family`: Claw tasks in the warm-up model's own phrasing, vocabulary and tool list, and never
a copy of a shipped (in particular a held-out) Claw task."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from openforgerl.envs.claw.suite.families import FAMILIES, SFT_TOOLS
from openforgerl.synth import pipeline, synthesize, vocab
from openforgerl.synth.compose import sample_candidate
from openforgerl.synth.plugins import WRITER, WRITERS

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_tiny_model.py"


def _script() -> ast.Module:
    return ast.parse(SCRIPT.read_text())


def _assigned(name: str) -> list[str]:
    """The value of a top-level `NAME = ...` in the warm-up script (string literals and `.split()` only)."""
    for node in _script().body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return list(eval(compile(ast.Expression(node.value), str(SCRIPT), "eval"), {"__builtins__": {}}))
    raise AssertionError(f"{name} not in {SCRIPT}")


def _warmup_patterns() -> dict[str, list[re.Pattern[str]]]:
    """Each warm-up user message f-string as a regex (every `{...}` a quoted or bare value), by tool."""
    out: dict[str, list[re.Pattern[str]]] = {}
    for fn in _script().body:
        if not (isinstance(fn, ast.FunctionDef) and fn.name in {f"_{t}" for t in SFT_TOOLS}):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "user" for t in node.targets
            ):
                for js in (n for n in ast.walk(node.value) if isinstance(n, ast.JoinedStr)):
                    parts = [
                        re.escape(str(v.value)) if isinstance(v, ast.Constant) else r"(\S[^']*)"
                        for v in js.values
                    ]
                    out.setdefault(fn.name[1:], []).append(re.compile("".join(parts)))
    return out


def test_the_vocabulary_is_the_warm_up_scripts() -> None:
    assert vocab.WARMUP_WORDS == _assigned("WORDS")
    assert vocab.WARMUP_NAMES == _assigned("NAMES")
    assert vocab.WARMUP_DOMAINS == _assigned("DOMAINS") and vocab.WARMUP_EXTS == _assigned("EXTS")


def test_family_tasks_speak_the_warm_up_phrasing_and_offer_its_tools(tmp_path: Path) -> None:
    patterns = _warmup_patterns()
    assert set(patterns) == set(SFT_TOOLS) and all(len(p) >= 2 for p in patterns.values())
    report, paths, _ = synthesize("claw-family", 80, tmp_path, seed=3)
    assert report.kept == 80 and report.by_atoms.get("1", 0) > 10 and report.by_atoms.get("2", 0) > 10
    words = set(vocab.WARMUP_WORDS) | set(vocab.WARMUP_NAMES)
    singles = 0
    for path in paths:
        data = tomllib.loads((path / "task.toml").read_text())
        meta, synth = data["metadata"]["openforgerl"], data["metadata"]["synth"]
        assert meta["tools"] == SFT_TOOLS  # the warm-up model was always offered exactly these three
        if synth["n_atoms"] != 1:
            continue
        singles += 1
        first = (path / "instruction.md").read_text().split("\n")[0]
        tool = synth["signature"][0]
        match = next((m for p in patterns[tool] if (m := p.fullmatch(first))), None)
        assert match, f"{first!r} is not a warm-up phrasing of {tool}"
        for value in match.groups():  # every slot is made of warm-up tokens
            tokens = re.split(r"[ @._]", value)
            assert set(tokens) <= words | set(vocab.WARMUP_EXTS) | {
                d.split(".")[0] for d in vocab.WARMUP_DOMAINS
            } | {d.split(".")[1] for d in vocab.WARMUP_DOMAINS}, value
    assert singles > 10


def test_a_candidate_equal_to_a_shipped_task_is_rejected(tmp_path: Path, monkeypatch) -> None:
    held_out = next(d for family in FAMILIES for d in family() if "sft" in d.tags and d.split == "test")
    real = sample_candidate
    calls = {"n": 0}

    def copy_first(env, rng):  # the first candidate is a held-out task's copy, then the real sampler
        cand = real(env, rng)
        calls["n"] += 1
        if calls["n"] == 1 and cand is not None:
            cand.instruction = cand.template = held_out.instruction
        return cand

    monkeypatch.setattr(pipeline, "sample_candidate", copy_first)
    report, paths, _ = synthesize("claw-family", 5, tmp_path, seed=0)
    assert report.rejected["shipped"] == 1 and report.kept == 5
    assert held_out.instruction not in {(p / "instruction.md").read_text().split("\n")[0] for p in paths}
    texts, golds = WRITERS.get(WRITER).shipped()  # Claw's, through its entry point
    assert held_out.instruction in texts and len(golds) > 30
