"""`python -I -m openforgerl.envs.tau2.verify`: upstream's reward of one tau2
rollout, in the verifier sandbox.

Inputs: the task as upstream wrote it (`tests/tau2_task.json`: gold actions, criteria; never in the agent's
sandbox), the service's call log (read with the token), and, for the communicate check, the transcript
the host built from the gateway's call log. The log's calls are replayed by upstream's
`EnvironmentEvaluator` on a fresh environment (each reply must equal the one the agent got) and the
final DB hash compared with the gold replay's; see `upstream.reward`.

Exit codes: 0 with `reward.json`; 2 when it cannot judge (service gone, tau2 missing, a malformed log):
the runtime turns that into `VerifierError` (infra), never a zero.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "said_in"]

EXIT_UNJUDGED = 2


def _text(content: Any) -> str:
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def said_in(transcript: Sequence[Mapping[str, Any]], asked: Sequence[str]) -> list[str]:
    """What the agent said to the user: its text turns (upstream's assistant messages) and its
    `ask_user` messages (our channel to the simulated user)."""
    texts = [_text(m.get("content")) for m in transcript if m.get("role") == "assistant"]
    return [t for t in [*texts, *asked] if t]


def read_log(url: str, token: str, timeout_s: float = 45.0) -> dict[str, Any]:
    from openforgerl.env.tool_client import with_retry

    req = urllib.request.Request(f"{url.rstrip('/')}/log", headers={"Authorization": f"Bearer {token}"})
    status, body = with_retry(req, timeout_s, wait_s=20.0)  # the service may still be starting, under load
    if status != 200 or not isinstance(body, dict):
        raise RuntimeError(f"GET /log answered {status}")
    return body


def judge(ns: argparse.Namespace) -> dict[str, float]:
    from openforgerl.envs.tau2 import upstream

    task = json.loads(Path(ns.task).read_text())
    log = read_log(ns.url, ns.token)
    transcript = json.loads(Path(ns.transcript).read_text()) if ns.transcript else []
    return upstream.reward(
        ns.domain, task, log["calls"], said_in(transcript, log.get("said") or []), nl_on_host=ns.nl_on_host
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m openforgerl.envs.tau2.verify")
    ap.add_argument("--task", required=True, help="the upstream task JSON")
    ap.add_argument("--domain", required=True)
    ap.add_argument("--url", required=True, help="the rollout's tau2 service")
    ap.add_argument("--token", required=True)
    ap.add_argument("--transcript", default="", help="JSON list of chat messages (the host's call log)")
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--nl-on-host",
        action="store_true",
        help="leave the NL assertions out: the host's judge scores them and multiplies them in",
    )
    ns = ap.parse_args(argv)
    try:
        result = judge(ns)
    except Exception as exc:  # any failure here is the verifier's, never the agent's zero
        print(f"tau2 verifier: {type(exc).__name__}: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_UNJUDGED) from None
    Path(ns.out).write_text(json.dumps(result))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
