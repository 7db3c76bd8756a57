"""`python -I -m openforgerl.envs.gui.verify`: judge a GUI rollout from app state and workdir files.

Runs in the verifier's own sandbox after the harness is gone (`LocalSandbox.run_verifier`). App state
comes from the apps server's `GET /__state` with the rollout's secret (`--token`); files from the
read-only `/workdir`. The checks are the Claw spec (`env.checks.spec`: `record` over `<app>.<list>`,
`file`, ...), judged by the same pure `evaluate`. Exit codes: 0 judged, 2 the verifier broke (infra),
3 a check found tampering (reward 0), 4 the environment's own service is broken: the apps or the
computer service no longer answer, the screen cannot take a screenshot, or the computer service
answered a request with a fault (503) during the rollout, or the screen took longer than
`READY_LIMIT_S` to start (`GET /__health`). `GuiTaskRuntime.verify`
turns 4 into infra, unless the sandbox recorded that the agent breached a limit it shares with the
service (memory, pids, disk): then the breach is what broke it, the agent's failure.
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
EXIT_SERVICE_DOWN = 4
TOKEN_HEADER = "X-Openforgerl-Token"
HEALTH_WAIT_S = 30.0
READY_LIMIT_S = 60.0
"""A screen slower to come up than this (zero-gui's default wait for it) failed to start: infra."""


class StateUnavailable(Exception):
    pass


def service_problem(url: str, token: str, wait_s: float = HEALTH_WAIT_S) -> str:
    """'' when the computer service answers `/__health` with a screenshot taken now and no fault so far;
    else what is wrong. Connection errors are retried for `wait_s` (a busy machine), a 503 is final."""
    deadline = time.monotonic() + wait_s
    req = urllib.request.Request(url.rstrip("/") + "/__health", headers={TOKEN_HEADER: token})
    while True:
        try:
            with urllib.request.urlopen(req, timeout=wait_s) as resp:
                health = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            try:
                health = json.loads(exc.read())
            except ValueError:
                return f"computer service answered HTTP {exc.code}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            if time.monotonic() > deadline:
                return f"computer service unreachable: {exc}"
            time.sleep(0.2)
            continue
        if not isinstance(health, dict) or health.get("ok") is not True:
            return f"the screen is gone (no screenshot): {health}"
        if float(health.get("ready_s") or 0.0) > READY_LIMIT_S:
            return f"the screen took {health['ready_s']:.0f} s to start (limit {READY_LIMIT_S:.0f} s)"
        if health.get("faults"):
            return (
                f"computer service faulted {health['faults']} time(s) "
                f"during the rollout: {health.get('last_fault')}"
            )
        return ""


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
    ap.add_argument(
        "--computer-url", default="", help="the computer service (checked first); '' = not checked"
    )
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=Path("reward.json"))
    ap.add_argument("--log", type=Path, default=None)
    ns = ap.parse_args(argv)
    from openforgerl.env.checks.evaluate import Evidence, evaluate
    from openforgerl.env.checks.spec import load_spec
    from openforgerl.env.errors import TaskFormatError

    problem = service_problem(ns.computer_url, ns.token) if ns.computer_url else ""
    if problem:
        print(f"SERVICE DOWN {problem}", file=sys.stderr)
        return EXIT_SERVICE_DOWN
    try:
        spec = load_spec(ns.checks)
        state = fetch_state(ns.state_url, ns.token) if ns.state_url else {}
    except StateUnavailable as exc:  # the agent cannot signal the service (its own PID namespace)
        print(f"SERVICE DOWN apps server unreachable: {exc}", file=sys.stderr)
        return EXIT_SERVICE_DOWN
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
