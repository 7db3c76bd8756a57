"""`python -I -m openforgerl.envs.tau2.oracle --actions FILE --url URL`: the
scripted oracle of `tasks validate`.

It replays the task's gold actions (`[{tool, args, requestor}]`, upstream's `actions` in their order) through
the very routes a rollout uses: an agent action through the agent's tool route (`POST /call/<tool>`), a
user-side action (telecom's phone, requestor `user`) through the host-only user route (`POST /user/<tool>`
with the rollout's token, read from stdin as `envs/tau2/user_side.py` takes it), so the verifier judges
the oracle exactly as it judges an agent and its simulated user. An upstream `Error: …` reply is not a
failure of the oracle: upstream's own gold replay ignores such errors too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from openforgerl.env.tool_client import ServiceUnreachable, call_tool


def _play(action: dict[str, Any], url: str, token: str) -> int:
    if action.get("requestor", "assistant") == "user":
        from openforgerl.envs.tau2.user_side import call_user_tool

        status, _ = call_user_tool(url, token, str(action["tool"]), dict(action["args"]))
    else:
        status, _ = call_tool(str(action["tool"]), dict(action["args"]), url=url)
    return status


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m openforgerl.envs.tau2.oracle")
    ap.add_argument("--actions", type=Path, required=True)
    ap.add_argument("--url", required=True)
    ap.add_argument("--token-stdin", action="store_true", help="read the user route's token from stdin")
    ns = ap.parse_args(argv)
    token = sys.stdin.read().strip() if ns.token_stdin else ""
    for action in json.loads(ns.actions.read_text()):
        try:
            status = _play(action, ns.url, token)
        except ServiceUnreachable as exc:
            raise SystemExit(f"tau2 oracle: {exc}") from None
        print(f"{action.get('requestor', 'assistant')} {action['tool']}: {status}", file=sys.stderr)


if __name__ == "__main__":
    main()
