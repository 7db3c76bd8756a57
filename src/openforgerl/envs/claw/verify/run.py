"""`python -m openforgerl.envs.claw.verify`: fetch state + audit, judge, write reward.json and a log.

Exit 0 whenever the work was judged (also for reward 0); exit 4 (`EXIT_NEEDS_JUDGE`) when a task
grader made judge calls the host has not answered yet (they are in `judge_requests.json` next to the
reward; the host judges them and runs the verifier again with `--judge-answers`); exit 3 (`EXIT_TAMPERED`)
when what the agent left behind broke the rules (a workdir file that is a link, FIFO, device or oversized; the
task's service, which the agent could reach, no longer answering) — reward 0, the runtime raises
`TamperError` (`agent_failed`); exit 2 when the verifier itself could not run (bad spec, a broken
reward folder) — the runtime turns that into an infra `VerifierError`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from openforgerl.env.checks.evaluate import Evidence, Outcome, evaluate
from openforgerl.env.checks.spec import load_spec
from openforgerl.env.tool_client import ServiceUnreachable, get_json
from openforgerl.envs.claw.verify.witness import audited

__all__ = [
    "EXIT_NEEDS_JUDGE",
    "EXIT_TAMPERED",
    "EXIT_VERIFIER_BROKEN",
    "JUDGE_REQUESTS",
    "main",
    "verify_live",
]

EXIT_VERIFIER_BROKEN = 2
EXIT_TAMPERED = 3
EXIT_NEEDS_JUDGE = 4
JUDGE_REQUESTS = "judge_requests.json"
MAX_JUDGE_REQUESTS_BYTES = 6 << 20  # the host reads at most 8 MiB of a verifier's output file


def verify_live(
    checks: Path,
    state_url: str,
    workdir: Path | None,
    transcript: Path | None = None,
    judge_scores: Path | None = None,
    judge_answers: Path | None = None,
    token: str = "",
    env_snapshot: Path | None = None,
    media_events: Path | None = None,
    user_record: Path | None = None,
) -> Outcome:
    """Judge the live service at `state_url` (raises ServiceUnreachable / TaskFormatError).

    `transcript` (the rollout's messages; the results of the service's tools as its audit has them,
    `verify/witness.py`), `judge_scores` ({check name: score} of the `llm_judge`
    checks) and `judge_answers` ({request key: score} of a task grader's judge calls) are written by the
    host from the call log and the judge (tasks/host_side.py), never by the agent. `token` (given when the
    task runs upstream's services) reads their audit from the service's host-only route. `env_snapshot` is
    upstream Claw-Eval's snapshot of the agent's final workdir, taken by the host (`envs/claw/snapshot.py`).
    `media_events` (the images the gateway saw reach the model) and `user_record` (the simulated user's
    relay, as the host ran it) are the host's too (a task `grader.py`'s
    `media_events` and `[user_agent]` turns).
    """
    spec = load_spec(checks)
    state = get_json("/state", url=state_url, wait_s=15.0)
    audit = get_json("/audit", url=state_url, wait_s=15.0).get("calls", [])
    upstream = get_json("/upstream/audit", url=state_url, wait_s=15.0, token=token) if token else None
    said = (
        audited(json.loads(transcript.read_text()), audit) if transcript else None
    )  # results as the audit has them
    judged = json.loads(judge_scores.read_text()) if judge_scores else None
    answers = json.loads(judge_answers.read_text()) if judge_answers else None
    snapshot = json.loads(env_snapshot.read_text()) if env_snapshot else None
    if snapshot is not None and not isinstance(snapshot, dict):
        raise OSError(f"{env_snapshot}: not a JSON object")
    media = json.loads(media_events.read_text()) if media_events else None
    user = json.loads(user_record.read_text()) if user_record else None
    return evaluate(
        spec,
        Evidence(
            state,
            audit,
            workdir,
            tests_dir=checks.parent,
            transcript=said,
            judge=judged,
            judge_answers=answers,
            upstream_audit=upstream,
            env_snapshot=snapshot,
            media_events=media,
            user_record=user,
        ),
    )


def _checks_path(ns: argparse.Namespace) -> Path:
    if ns.checks:
        return Path(ns.checks)
    task = Path(ns.task)
    return task / "checks.toml" if (task / "checks.toml").is_file() else task / "tests" / "checks.toml"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m openforgerl.envs.claw.verify")
    ap.add_argument("--task", default=".", help="task folder (or its tests/ folder)")
    ap.add_argument("--checks", default=None, help="checks.toml (overrides --task)")
    ap.add_argument("--state-url", default=None, help="Claw service URL (default: $OPENFORGERL_CLAW_URL)")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=Path("reward.json"))
    ap.add_argument("--log", type=Path, default=None, help="human-readable log (default: next to --out)")
    ap.add_argument(
        "--transcript", type=Path, default=None, help="the rollout's messages (JSON), from the host"
    )
    ap.add_argument("--judge-scores", type=Path, default=None, help="llm_judge scores (JSON), from the host")
    ap.add_argument(
        "--judge-answers",
        type=Path,
        default=None,
        help="a grader's judge calls answered (JSON), from the host",
    )
    ap.add_argument(
        "--token", default="", help="secret of the upstream services' audit (GET /upstream/audit)"
    )
    ap.add_argument(
        "--env-snapshot", type=Path, default=None, help="Claw-Eval env snapshot (JSON), from the host"
    )
    ap.add_argument(
        "--media-events", type=Path, default=None, help="images that reached the model (JSON), from the host"
    )
    ap.add_argument(
        "--user-record", type=Path, default=None, help="the simulated user's relay (JSON), from the host"
    )
    ns = ap.parse_args(argv)
    from openforgerl.env.errors import TaskFormatError
    from openforgerl.env.tool_client import service_url
    from openforgerl.envs.claw.verify.graders import GraderUnavailable

    try:
        outcome = verify_live(
            _checks_path(ns),
            ns.state_url or service_url(),
            ns.workdir,
            ns.transcript,
            ns.judge_scores,
            ns.judge_answers,
            ns.token,
            ns.env_snapshot,
            ns.media_events,
            ns.user_record,
        )
    except ServiceUnreachable as exc:  # the service ran next to the agent: the agent's reach
        print(f"VIOLATION task service unreachable after the agent ran: {exc}", file=sys.stderr)
        return EXIT_TAMPERED
    except (TaskFormatError, OSError, GraderUnavailable) as exc:
        print(f"verifier error: {exc}", file=sys.stderr)
        return EXIT_VERIFIER_BROKEN
    if outcome.judge_requests:  # no reward: this run's grader saw placeholders where the judge should answer
        body = json.dumps(outcome.judge_requests, ensure_ascii=False)
        if len(body.encode()) > MAX_JUDGE_REQUESTS_BYTES:  # images a grader made itself travel inline
            print(
                f"verifier error: the grader's judge requests take {len(body.encode())} bytes "
                f"(over {MAX_JUDGE_REQUESTS_BYTES})",
                file=sys.stderr,
            )
            return EXIT_VERIFIER_BROKEN
        ns.out.with_name(JUDGE_REQUESTS).write_text(body)
        print(f"{len(outcome.judge_requests)} judge call(s) for the host to answer", file=sys.stderr)
        return EXIT_NEEDS_JUDGE
    ns.out.write_text(json.dumps(outcome.components(), indent=1))
    (ns.log or ns.out.with_name("verifier.log")).write_text(outcome.log())
    print(outcome.log(), end="")
    return EXIT_TAMPERED if outcome.violations else 0
