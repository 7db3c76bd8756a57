"""The verifier reads a task-service tool's result in the transcript as the service's audit has it
(`envs/claw/verify/witness.py`): a real Claw service, its real audit, the real verifier entry point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openforgerl.env.checks.evaluate import Evidence, evaluate
from openforgerl.env.checks.spec import load_spec
from openforgerl.env.tool_client import call_tool, get_json
from openforgerl.envs.claw.verify.run import verify_live
from openforgerl.envs.claw.verify.witness import UNAUDITED, audited

SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/claw/suite/tasks"

CHECKS = """[[checks]]
kind = "python_grader"
name = "results"
script = "grader.py"
"""
# A task grader that credits what the tools returned, one part per claim.
GRADER = """def grade(evidence):
    tool_turns = [m for m in evidence["transcript"] or [] if m.get("role") == "tool"]
    said = " ".join(str(m.get("content", "")) for m in tool_turns)
    return {
        "searched": float("Expense policy" in said),
        "read": float("FORGED" in said),
        "sent": float("SENT" in said),
    }
"""


def _turn(cid: str, tool: str, args: dict[str, Any], result: str) -> list[dict[str, Any]]:
    return [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}
            ],
        },
        {"role": "tool", "tool_call_id": cid, "content": result},
    ]


def test_results_of_service_tools_are_what_the_audit_recorded(claw_service, tmp_path: Path) -> None:
    svc = claw_service(SUITE / "kb-answer-01" / "environment" / "fixtures")
    status, found = call_tool("kb_search", {"query": "meals"}, url=svc.url)
    assert status == 200 and "Expense policy" in json.dumps(found)
    status, refused = call_tool("kb_read", {"id": "kb404"}, url=svc.url)
    assert status >= 400, refused
    transcript = [
        {"role": "user", "content": "How much are meals reimbursed per day?"},
        *_turn("c1", "kb_search", {"query": "meals"}, json.dumps(found)),  # as it ran
        *_turn("c2", "mcp__claw__kb_read", {"id": "kb404"}, "FORGED: Meals, $60 a day"),  # it failed
        *_turn("c3", "mail_send", {"to": "boss@acme.io", "subject": "s", "body": "b"}, "SENT"),  # never ran
        *_turn("c4", "bash", {"command": "ls"}, "notes.txt"),
    ]  # no audit: as the host built it
    audit = get_json("/audit", url=svc.url)["calls"]
    got = audited(transcript, audit)
    assert got[2]["content"] == json.dumps(found)
    assert (
        got[4]["content"].startswith("[the task's service recorded this call as failed (")
        and "FORGED" not in got[4]["content"]
    )
    assert got[6]["content"] == UNAUDITED and got[8]["content"] == "notes.txt"
    # the same call twice in the transcript, once in the audit: the second result has no record
    assert audited([*transcript[:3], *transcript[1:3]], audit)[4]["content"] == UNAUDITED

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "checks.toml").write_text(CHECKS)
    (tests / "grader.py").write_text(GRADER)
    (tmp_path / "transcript.json").write_text(json.dumps(transcript))
    outcome = verify_live(tests / "checks.toml", svc.url, None, tmp_path / "transcript.json")
    assert outcome.reward == 1 / 3 and outcome.checks == {"results": 1 / 3}, outcome.lines
    # control: the grader, handed the relayed results as they came, credits the
    # failed read and the mail never sent
    control = evaluate(
        load_spec(tests / "checks.toml"), Evidence({}, audit, None, tests_dir=tests, transcript=transcript)
    )
    assert control.reward == 1.0
