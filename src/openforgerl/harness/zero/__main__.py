"""Command line of the `zero` harness (`python -m openforgerl.harness.zero`)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from openforgerl.harness.zero.client import ChatClient
from openforgerl.harness.zero.loop import Budget, dump_jsonl, run_agent
from openforgerl.harness.zero.tools import BUILTIN_SCHEMAS, load_toolbox


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="zero", description=__doc__)
    p.add_argument("instruction", nargs="?", help="the task (else $OPENFORGERL_INSTRUCTION)")
    p.add_argument("--model", default=os.environ.get("OPENFORGERL_MODEL", "default"))
    p.add_argument("--tools-json", type=Path, help="OpenAI tool schemas (list, or {tools, service_url})")
    p.add_argument(
        "--service-url",
        default=os.environ.get("OPENFORGERL_TOOL_SERVICE_URL") or os.environ.get("OPENFORGERL_CLAW_URL", ""),
        help="the task's tool service",
    )
    p.add_argument("--builtins", default=",".join(BUILTIN_SCHEMAS), help="comma list; '' for none")
    p.add_argument("--workdir", type=Path, default=Path.cwd())
    p.add_argument("--max-turns", type=int, default=30)
    p.add_argument("--wall-clock", type=float, default=600.0, help="seconds for the whole run")
    p.add_argument("--call-timeout", type=float, default=300.0, help="seconds per model call")
    p.add_argument(
        "--max-retries",
        type=int,
        default=2,
        help="retries on 408/409/429/5xx, timeouts and connection errors",
    )
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--transcript", help="append every message to this JSONL file")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    instruction = args.instruction or os.environ.get("OPENFORGERL_INSTRUCTION", "")
    builtins = [b for b in args.builtins.split(",") if b]
    tools = load_toolbox(args.tools_json, args.workdir, args.service_url, builtins)
    client = ChatClient(
        os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        os.environ.get("OPENAI_API_KEY", ""),
        args.max_retries,
    )
    sampling = {
        k: v for k, v in (("max_tokens", args.max_tokens), ("temperature", args.temperature)) if v is not None
    }
    budget = Budget(time.monotonic() + args.wall_clock, args.max_turns, args.call_timeout)
    sink = dump_jsonl(args.transcript) if args.transcript else (lambda m: None)
    result = run_agent(client, args.model, instruction, tools, budget, on_message=sink, **sampling)
    print(result.answer if not result.error else f"[zero] stopped: {result.error}", flush=True)
    return int(result.exit_code)


if __name__ == "__main__":
    sys.exit(main())
