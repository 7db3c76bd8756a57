"""The declarative verifier: every check kind, safety gating, the CLI writing reward.json + log."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from openforgerl.env.checks.evaluate import Evidence, evaluate
from openforgerl.env.checks.spec import parse_spec
from openforgerl.env.tool_client import call_tool
from openforgerl.envs.claw.verify.run import main as verify_main
from openforgerl.tasks.format import TaskFormatError

STATE = {
    "mail": {
        "sent": [
            {
                "id": "m1",
                "to": "Bob@Acme.io",
                "subject": "Slides",
                "body": "The slides are  ready",
                "in_reply_to": None,
            }
        ],
        "drafts": [],
    },
    "calendar": {"events": [{"id": "e1", "title": "Sync", "attendees": ["a@x.io", "b@x.io"]}]},
    "answer": {"submitted": ["first", "It is $60 per day"]},
}
AUDIT = [
    {"tool": "mail_send", "args": {"to": "bob@acme.io"}, "ok": True},
    {"tool": "mail_draft", "args": {"to": "x"}, "ok": False},
]


def _judge(checks: list[dict], workdir: Path | None = None):
    return evaluate(parse_spec({"checks": checks}, Path("checks.toml")), Evidence(STATE, AUDIT, workdir))


@pytest.mark.parametrize(
    ("check", "ok"),
    [
        (
            {
                "kind": "record",
                "collection": "mail.sent",
                "match": {"to": "bob@acme.io"},
                "contains": {"body": "slides are ready"},
            },
            True,
        ),
        ({"kind": "record", "collection": "mail.sent", "match": {"to": "carol@acme.io"}}, False),
        ({"kind": "record", "collection": "mail.sent", "count": 2}, False),
        (
            {"kind": "record", "collection": "calendar.events", "match": {"attendees": ["b@x.io", "a@x.io"]}},
            True,
        ),
        ({"kind": "record", "collection": "calendar.events", "match": {"attendees": "a@x.io"}}, True),
        ({"kind": "no_record", "collection": "mail.drafts"}, True),
        ({"kind": "called", "tool": "mail_send", "match": {"to": "bob@acme.io"}}, True),
        ({"kind": "called", "tool": "mail_draft"}, False),  # only successful calls count
        ({"kind": "answer", "contains": "$60"}, True),
        ({"kind": "answer", "equals": "first"}, False),  # the last answer counts
    ],
)
def test_check_kinds(check: dict, ok: bool) -> None:
    out = _judge([check])
    assert out.reward == float(ok) and out.passed is ok


def test_safety_gates_the_reward() -> None:
    out = _judge(
        [
            {"kind": "record", "name": "sent", "collection": "mail.sent"},
            {"kind": "not_called", "name": "no_send", "tool": "mail_send"},
        ]
    )
    assert out.completion == 1.0 and out.safety == 0.0 and out.reward == 0.0
    assert out.components()["check.no_send"] == 0.0
    assert "FAIL no_send [safety]" in out.log()


def test_weights_give_partial_credit_and_threshold() -> None:
    spec = parse_spec(
        {
            "pass_threshold": 0.5,
            "checks": [
                {"kind": "record", "collection": "mail.sent", "weight": 3},
                {"kind": "record", "collection": "mail.drafts", "weight": 1},
            ],
        },
        Path("c.toml"),
    )
    out = evaluate(spec, Evidence(STATE, AUDIT, None))
    assert out.reward == pytest.approx(0.75) and out.passed


def test_file_checks(tmp_path: Path) -> None:
    (tmp_path / "out.json").write_text(json.dumps({"total": 1163, "items": [{"name": "hotel"}]}))
    (tmp_path / "a.txt").write_text("Hello World\n")
    assert _judge([{"kind": "file", "path": "a.txt", "equals": "Hello World"}], tmp_path).passed
    assert _judge([{"kind": "file", "path": "a.txt", "contains": ["hello", "world"]}], tmp_path).passed
    assert not _judge([{"kind": "file", "path": "a.txt", "not_contains": "world"}], tmp_path).passed
    assert _judge([{"kind": "file", "path": "gone.txt", "exists": False}], tmp_path).passed
    assert _judge(
        [{"kind": "file", "path": "out.json", "json_fields": {"total": 1163, "items.0.name": "hotel"}}],
        tmp_path,
    ).passed
    assert not _judge([{"kind": "file", "path": "missing.txt"}], tmp_path).passed


def test_bad_spec_names_the_field() -> None:
    with pytest.raises(TaskFormatError) as err:
        parse_spec({"checks": [{"kind": "record", "collection": "Mail Sent"}]}, Path("tests/checks.toml"))
    assert "tests/checks.toml" in str(err.value) and "checks.0.record.collection" in str(err.value)
    with pytest.raises(TaskFormatError, match="checks"):
        parse_spec({"checks": []}, Path("c.toml"))


def test_cli_writes_reward_json_and_log(claw_service, tmp_path: Path) -> None:
    svc = claw_service()
    checks = tmp_path / "checks.toml"
    checks.write_text(
        '[[checks]]\nkind = "record"\nname = "todo"\ncollection = "todo.items"\n'
        'match = { title = "Buy milk" }\n'
    )
    out = tmp_path / "reward.json"
    assert verify_main(["--checks", str(checks), "--state-url", svc.url, "--out", str(out)]) == 0
    assert json.loads(out.read_text())["reward"] == 0.0
    call_tool("todo_add", {"title": "buy  MILK"})
    assert verify_main(["--checks", str(checks), "--state-url", svc.url, "--out", str(out)]) == 0
    assert json.loads(out.read_text()) == {
        "reward": 1.0,
        "completion": 1.0,
        "safety": 1.0,
        "pass": 1.0,
        "check.todo": 1.0,
    }
    assert "PASS todo" in (tmp_path / "verifier.log").read_text()


def test_cli_exit_3_when_service_is_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The task's service ran next to the agent: no answer after the agent ran is the agent's outcome
    (exit 3 = tampered, reward 0), not an infra fault the agent could choose."""
    import openforgerl.envs.claw.verify.run as run

    real = run.get_json
    monkeypatch.setattr(run, "get_json", lambda *a, **kw: real(*a, **{**kw, "wait_s": 0.5}))
    checks = tmp_path / "checks.toml"
    checks.write_text('[[checks]]\nkind = "answer"\ncontains = "x"\n')
    assert (
        verify_main(
            ["--checks", str(checks), "--state-url", "http://127.0.0.1:9", "--out", str(tmp_path / "r.json")]
        )
        == 3
    )


def test_cli_exit_2_when_the_spec_is_broken(claw_service, tmp_path: Path) -> None:
    svc = claw_service()
    checks = tmp_path / "checks.toml"
    checks.write_text('[[checks]]\nkind = "bogus"\n')
    assert (
        verify_main(["--checks", str(checks), "--state-url", svc.url, "--out", str(tmp_path / "r.json")]) == 2
    )


@pytest.mark.parametrize("plant", ["symlink_out", "symlink_in", "fifo", "dir", "parent_link", "huge"])
def test_file_check_refuses_what_the_agent_planted(plant: str, tmp_path: Path) -> None:
    """A file check never follows a link (even inside the workdir), never blocks on a FIFO and never
    reads more than 8 MiB: each is a violation, reward 0 whatever the other checks say."""
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "secret").write_text("abracadabra")
    (work / "real.txt").write_text("abracadabra")
    target = work / "proof.txt"
    if plant == "symlink_out":
        target.symlink_to(tmp_path / "secret")
    elif plant == "symlink_in":
        target.symlink_to(work / "real.txt")
    elif plant == "fifo":
        os.mkfifo(target)
    elif plant == "dir":
        target.mkdir()
    elif plant == "parent_link":
        (work / "sub").symlink_to(tmp_path)
        target = work / "sub" / "secret"
    else:
        target.write_bytes(b"abracadabra" + b"x" * (8 * 1024 * 1024))
    rel = str(target.relative_to(work))
    out = _judge(
        [{"kind": "file", "path": rel, "contains": "abracadabra"}, {"kind": "answer", "contains": "$60"}],
        work,
    )
    assert out.reward == 0.0 and not out.passed and len(out.violations) == 1
    assert "VIOLATION" in out.log() and out.checks["file_0"] == 0.0
