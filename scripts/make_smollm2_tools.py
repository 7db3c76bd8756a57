"""Capture the tool-call traces `smollm2-tools` is warmed up on, from our own harnesses' real prompts.

Each harness runs the Claw train split with the scripted oracle (`openforgerl rollout --engine scripted`,
the envs oracle policy: a test double for the model's decisions) through the recording gateway; every
request the harness sent is in the call log as it sent it. Per rollout one conversation is kept: the
harness's last request (system prompt, tools, instruction and every earlier call with its result, as
the harness wrote them) and the oracle's answer to it. Written to the committed
`assets/smollm2/tool_traces.jsonl`; `python -m openforgerl.engines.local.smollm2_tools` (or first use
of `--model smollm2-tools`) trains on that file. Seeded: the same runs give the same file.

    python scripts/make_smollm2_tools.py --runs runs/smollm2-traces            # capture, then write traces
    python scripts/make_smollm2_tools.py --runs runs/smollm2-traces --build    # ...and build the model
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "src" / "openforgerl" / "envs" / "claw" / "suite" / "tasks"
TRACES = ROOT / "src" / "openforgerl" / "assets" / "smollm2" / "tool_traces.jsonl"
# First prompts that fit a short context (zero ~0.9k, mini-swe-agent ~1.2k tokens): a training step on
# two busy CPU cores costs ~0.05 s per token per trained layer, so Codex's 10k and Claude Code's 20k
# prompts are left out of the warm-up.
HARNESSES = {"zero": 8, "mini_swe_agent": 4}  # conversations kept per harness
MINI_SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini-swe-agent ends on this command


def train_tasks() -> list[str]:
    return sorted(
        p.name
        for p in SUITE.iterdir()
        if (p / "task.toml").is_file() and 'split = "train"' in (p / "task.toml").read_text()
    )


def capture(harness: str, tasks: Path, out: Path) -> Path:
    """One scripted-oracle rollout per task (kept when `out` already has its call log)."""
    if not (out / "calls.db").exists():
        cli = Path(sys.executable).parent / "openforgerl"  # the venv's console script
        subprocess.run(
            [
                str(cli),
                "rollout",
                "--tasks",
                str(tasks),
                "--engine",
                "scripted",
                "--harness",
                harness,
                "--n",
                "1",
                "--out",
                str(out),
            ],
            check=True,
        )
    return out / "calls.db"


def _calls(calls_db: Path) -> dict[str, list[dict[str, Any]]]:
    con = sqlite3.connect(calls_db)
    try:
        rows = [json.loads(r[0]) for r in con.execute("SELECT body FROM calls")]
    finally:
        con.close()
    by: dict[str, list[dict[str, Any]]] = {}
    for rec in rows:
        if not rec.get("side_call") and rec.get("error") is None and rec.get("request"):
            by.setdefault(rec["rollout_id"], []).append(rec)
    return {k: sorted(v, key=lambda r: int(r["index"])) for k, v in by.items()}


def _answer(rec: dict[str, Any], decode: Any) -> str:
    return str(decode(rec["completion_token_ids"])).removesuffix("<|im_end|>")


def conversation(harness: str, recs: list[dict[str, Any]], decode: Any) -> dict[str, Any] | None:
    """The rollout's last request and the oracle's answer. mini-swe-agent needs a tool call every turn, so
    its conversation ends at the first plain answer, answered instead with its submit command."""
    if harness == "mini_swe_agent":
        done = next((r for r in recs if "<tool_call>" not in _answer(r, decode)), None)
        if done is None:
            return None
        from openforgerl.engines.chat_format import format_tool_call

        last, answer = done, format_tool_call("bash", {"command": MINI_SUBMIT})
    else:
        last = recs[-1]
        answer = _answer(last, decode)
    req = last["request"]
    return {
        "harness": harness,
        "messages": req["messages"],
        "tools": req.get("tools") or [],
        "answer": answer,
    }


def collect(runs: Path, seed: int) -> list[dict[str, Any]]:
    from openforgerl.engines.chat_format import ChatFormat

    decode = ChatFormat.load().decode  # the scripted engine's ids are the tiny tokenizer's
    tasks = runs / "tasks"
    if not tasks.exists():
        for name in train_tasks():
            shutil.copytree(SUITE / name, tasks / name)
    rng = random.Random(seed)
    kept: list[dict[str, Any]] = []
    for harness, count in HARNESSES.items():
        by = _calls(capture(harness, tasks, runs / harness))
        convs = [c for rid in sorted(by) if (c := conversation(harness, by[rid], decode)) is not None]
        convs.sort(key=lambda c: json.dumps(c["messages"][:2], sort_keys=True))  # order by task, not run id
        rng.shuffle(convs)
        # multi-call conversations (they teach the call after a result), the shortest first: the warm-up's
        # cost is its token count
        multi = [c for c in convs if sum(m.get("role") == "assistant" for m in c["messages"]) >= 2]
        kept += sorted(multi, key=lambda c: len(json.dumps(c)))[:count]
    return kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=Path, default=Path("runs/smollm2-traces"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=TRACES)
    ap.add_argument("--build", action="store_true", help="then build smollm2-tools from the traces")
    args = ap.parse_args()
    convs = collect(args.runs, args.seed)
    args.out.write_text("".join(json.dumps(c, sort_keys=True) + "\n" for c in convs))
    print(f"{len(convs)} conversations -> {args.out}")
    if args.build:
        from openforgerl.engines.local.smollm2_tools import ensure_smollm2_tools_dir

        print(ensure_smollm2_tools_dir(rebuild=True))


if __name__ == "__main__":
    main()
