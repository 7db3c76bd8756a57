"""`python -I -m openforgerl.envs.gui.verify`: judge a GUI rollout from app state and workdir files.

Runs in the verifier's own sandbox after the harness is gone (`LocalSandbox.run_verifier`). App state
comes from the apps server's `GET /__state` with the rollout's secret (`--token`); files from the
read-only `/workdir`. The checks are the Claw spec (`envs.verify.spec`: `record` over `<app>.<list>`,
`file`, ...), judged by the same pure `evaluate`. Exit codes as `envs.verify.run`: 0 judged, 2 the
verifier broke (infra), 3 the apps server no longer answers (it ran next to the agent: reward 0).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["fetch_state", "main"]

EXIT_VERIFIER_BROKEN = 2
EXIT_TAMPERED = 3
TOKEN_HEADER = "X-Openforgerl-Token"


class StateUnavailable(Exception):
    pass


def fetch_state(url: str, token: str, wait_s: float = 30.0) -> dict[str, Any]:
    """The apps' state snapshot; retried while the server is still starting."""
    deadline = time.monotonic() + wait_s
    req = urllib.request.Request(url.rstrip("/") + "/__state", headers={TOKEN_HEADER: token})
    while True:
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                data = json.loads(resp.read())
                if not isinstance(data, dict):
                    raise StateUnavailable("state is not a JSON object")
                return data
        except (urllib.error.URLError, OSError, ValueError) as exc:
            if time.monotonic() > deadline:
                raise StateUnavailable(f"{url}: {exc}") from exc
            time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m openforgerl.envs.gui.verify")
    ap.add_argument("--checks", type=Path, required=True)
    ap.add_argument("--state-url", default="", help="apps server; '' = the task has no apps")
    ap.add_argument("--token", default="")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=Path("reward.json"))
    ap.add_argument("--log", type=Path, default=None)
    ns = ap.parse_args(argv)
    from openforgerl.envs.errors import TaskFormatError
    from openforgerl.envs.verify.checks import Evidence, evaluate
    from openforgerl.envs.verify.spec import load_spec

    try:
        spec = load_spec(ns.checks)
        state = fetch_state(ns.state_url, ns.token) if ns.state_url else {}
    except StateUnavailable as exc:
        print(f"VIOLATION apps server unreachable after the agent ran: {exc}", file=sys.stderr)
        return EXIT_TAMPERED
    except (TaskFormatError, OSError) as exc:
        print(f"verifier error: {exc}", file=sys.stderr)
        return EXIT_VERIFIER_BROKEN
    outcome = evaluate(spec, Evidence(state, [], ns.workdir, tests_dir=ns.checks.parent))
    ns.out.write_text(json.dumps(outcome.components(), indent=1))
    (ns.log or ns.out.with_name("verifier.log")).write_text(outcome.log())
    print(outcome.log(), end="")
    return EXIT_TAMPERED if outcome.violations else 0


if __name__ == "__main__":
    raise SystemExit(main())
