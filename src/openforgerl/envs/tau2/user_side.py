"""`python -I -m openforgerl.envs.tau2.user_side --url URL` (JSON on stdin): user-side tool calls (telecom's
phone) on one rollout's tau2 service, started by the host only.

Upstream's telecom user acts on its own device through `TelecomUserTools`; here those tools are served by
the rollout's service on `POST /user/<tool>`, which answers only with the rollout's token. The host runs
this module in the sandbox with `sandbox.exec` (its own PID namespace, like the service and the
verifier), handing the token and the calls on stdin, so neither is in any argv or file the agent's
processes can see: the simulated user's relay (`env/user_tools.py`) and the oracle of `tasks validate`
use it, the agent never can.

stdin: `{"token": T, "calls": [{"tool": NAME, "args": {...}}, ...]}`; stdout: one JSON list of
`{"status": HTTP status, "body": reply}`; exit 2 when the service cannot be reached.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["call_user_tool", "main"]

ROUTE = "user"


def call_user_tool(
    url: str, token: str, tool: str, args: Mapping[str, Any], timeout_s: float = 30.0
) -> tuple[int, Any]:
    """POST one user-side tool call with the token → (HTTP status, decoded JSON body)."""
    from openforgerl.env.tool_client import with_retry

    req = urllib.request.Request(
        f"{url.rstrip('/')}/{ROUTE}/{tool}",
        data=json.dumps(dict(args)).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    return with_retry(req, timeout_s, wait_s=20.0)  # the service may still be loading its domain


def run_calls(url: str, token: str, calls: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for c in calls:
        status, body = call_user_tool(url, token, str(c["tool"]), dict(c.get("args") or {}))
        out.append({"status": status, "body": body})
    return out


def main(argv: list[str] | None = None) -> None:
    from openforgerl.env.tool_client import ServiceUnreachable

    ap = argparse.ArgumentParser(prog="python -m openforgerl.envs.tau2.user_side")
    ap.add_argument("--url", required=True)
    ns = ap.parse_args(argv)
    request = json.loads(sys.stdin.read())
    try:
        print(json.dumps(run_calls(ns.url, str(request["token"]), list(request["calls"]))))
    except ServiceUnreachable as exc:
        print(f"tau2 user side: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
