"""Command line of the `zero-gui` harness (`python -m openforgerl.harness.zero_gui`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from openforgerl.env.computer.client import HttpComputer
from openforgerl.harness.zero.client import ChatClient
from openforgerl.harness.zero.loop import Budget
from openforgerl.harness.zero_gui.history import Pruning
from openforgerl.harness.zero_gui.loop import Options, run_agent


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="zero-gui", description=__doc__)
    p.add_argument("instruction", nargs="?", help="the task (else $OPENFORGERL_INSTRUCTION)")
    p.add_argument("--model", default=os.environ.get("OPENFORGERL_MODEL", "default"))
    p.add_argument(
        "--computer-url", default=os.environ.get("OPENFORGERL_TOOL_SERVICE_URL") or "http://127.0.0.1:8765"
    )
    p.add_argument(
        "--kind",
        default="",
        help="'desktop' or 'browser', as said in the tool description "
        "(default: what the computer service reports)",
    )
    p.add_argument("--keep-screenshots", type=int, default=3, help="the last N screenshots are always sent")
    p.add_argument("--prune-chunk", type=int, default=3, help="older screenshots are dropped K at a time")
    p.add_argument("--on-malformed", choices=("feedback", "stop"), default="feedback")
    p.add_argument(
        "--prompt",
        choices=("full", "compact"),
        default="full",
        help="'compact': the short prompt and tool tiny-vl was warmed up on",
    )
    p.add_argument("--max-turns", type=int, default=30)
    p.add_argument("--wall-clock", type=float, default=600.0, help="seconds for the whole run")
    p.add_argument("--call-timeout", type=float, default=300.0, help="seconds per model call")
    p.add_argument("--ready-timeout", type=float, default=60.0, help="seconds to wait for the screen")
    p.add_argument(
        "--max-retries",
        type=int,
        default=2,
        help="retries on 408/409/429/5xx, timeouts and connection errors",
    )
    p.add_argument("--max-tokens", type=int, default=None)
    p.add_argument("--temperature", type=float, default=None)
    p.add_argument("--transcript", help="append every message (images as their size) to this JSONL file")
    return p.parse_args(argv)


def _without_pixels(value: Any) -> Any:
    """A transcript copy: data URLs become `<png N chars>` (the call log keeps the images)."""
    if isinstance(value, dict):
        return {k: _without_pixels(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_pixels(v) for v in value]
    if isinstance(value, str) and value.startswith("data:image/"):
        return f"<image {len(value)} chars>"
    return value


def transcript_sink(path: str | None) -> Callable[[dict[str, Any]], None]:
    def write(message: dict[str, Any]) -> None:
        if path:
            with open(path, "a") as fh:
                fh.write(json.dumps(_without_pixels(message)) + "\n")

    return write


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    instruction = args.instruction or os.environ.get("OPENFORGERL_INSTRUCTION", "")
    client = ChatClient(
        os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        os.environ.get("OPENAI_API_KEY", ""),
        args.max_retries,
    )
    sampling = {
        k: v for k, v in (("max_tokens", args.max_tokens), ("temperature", args.temperature)) if v is not None
    }
    budget = Budget(time.monotonic() + args.wall_clock, args.max_turns, args.call_timeout)
    options = Options(
        Pruning(args.keep_screenshots, args.prune_chunk),
        args.on_malformed,
        args.ready_timeout,
        args.kind,
        args.prompt,
    )
    result = run_agent(
        client,
        HttpComputer(args.computer_url),
        args.model,
        instruction,
        budget,
        options,
        on_message=transcript_sink(args.transcript),
        **sampling,
    )
    print(result.answer if not result.error else f"[zero-gui] stopped: {result.error}", flush=True)
    return int(result.exit_code)


if __name__ == "__main__":
    sys.exit(main())
