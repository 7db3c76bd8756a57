"""Two small synthetic runs: Claw rollouts in the three protocols, a chain break, an infra failure and a
GUI rollout whose requests carry PNG screenshots and whose tool calls click on them."""

from __future__ import annotations

import json
from pathlib import Path

from analytics._rundir import ChainWriter, chat_history, data_url, png, record, write_run

from openforgerl.records import RolloutStatus, WireProtocol

MAIL_TASK = "claw/mail-reply-01"
GUI_TASK = "gui/click-submit-01"
SCREEN = (320, 200)
CLICKS = [(160, 82), (230, 150)]


def _chat_rollout(
    rid: str,
    steps: list[tuple[str, str, dict, object]],
    *,
    final: str,
    seed: int,
    version: int = 0,
    break_at: int | None = None,
) -> ChainWriter:
    w = ChainWriter(rid, seed=seed)
    requests = chat_history(steps)
    for k, req in enumerate(requests):
        gap = (
            "" if k == 0 else f"tool: {steps[k - 1][3] if isinstance(steps[k - 1][3], str) else '[image]'}\n"
        )
        last = k == len(requests) - 1
        said = final if last else f"call {steps[k][1]} {json.dumps(steps[k][2])}"
        w.call(
            {
                "model": "policy",
                "messages": req,
                "tools": [{"type": "function", "function": {"name": s[1]}} for s in steps],
            },
            said,
            gap=gap,
            version=version,
            finish="stop" if last else "tool_calls",
            reset_to=20 if break_at == k else None,
        )
    return w


def _audit(steps: list[tuple[str, str, dict, object]], t0: float, fault_first: bool = False) -> list[dict]:
    out, seq = [], 0
    for k, (_, tool, args, _) in enumerate(steps):
        if fault_first and k == 0:
            out.append(
                {
                    "seq": seq,
                    "tool": tool,
                    "args": args,
                    "status": 503,
                    "ok": False,
                    "error": "retry",
                    "fault": "error",
                    "t": t0 + k + 0.45,
                }
            )
            seq += 1
        out.append(
            {
                "seq": seq,
                "tool": tool,
                "args": args,
                "status": 200,
                "ok": True,
                "error": None,
                "fault": None,
                "t": t0 + k + 0.5,
            }
        )
        seq += 1
    return out


MAIL_OK = [
    ("c1", "mail_list", {}, '{"messages": [{"id": "m1", "from": "ana@x.io", "subject": "Invoice"}]}'),
    (
        "c2",
        "mail_read",
        {"id": "m1"},
        '{"id": "m1", "body": "Please confirm the invoice. ' + "long line " * 80 + 'END"}',
    ),
    ("c3", "mail_reply", {"id": "m1", "body": "Confirmed."}, '{"replied": true, "id": "m1001"}'),
]
MAIL_BAD = [
    ("d1", "mail_reply", {"id": "m2", "body": "Confirmed."}, "error (404): no message m2"),
    ("d2", "mail_list", {}, '{"messages": []}'),
    ("d3", "mail_list", {}, '{"messages": []}'),
]
MAIL_B = [
    ("e1", "mail_search", {"query": "invoice"}, '{"hits": ["m1"]}'),
    *MAIL_OK,
    ("e4", "mail_list", {"folder": "sent"}, '{"messages": []}'),
]


def _gui_rollout(rid: str, seed: int) -> ChainWriter:
    shot = data_url(png(*SCREEN))
    msgs: list[dict] = [
        {"role": "system", "content": "You control a computer."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Click Submit."},
                {"type": "image_url", "image_url": {"url": shot}},
            ],
        },
    ]
    w = ChainWriter(rid, seed=seed)
    tools = [{"type": "function", "function": {"name": "computer"}}]
    for k, (x, y) in enumerate(CLICKS):
        w.call(
            {"messages": list(msgs), "tools": tools},
            f"click {x},{y}",
            gap="" if k == 0 else "tool: [screenshot]\n",
        )
        cid = f"g{k}"
        msgs.append(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": cid,
                        "type": "function",
                        "function": {
                            "name": "computer",
                            "arguments": json.dumps({"action": "left_click", "coordinate": [x, y]}),
                        },
                    }
                ],
            }
        )
        msgs.append(
            {
                "role": "tool",
                "tool_call_id": cid,
                "content": [{"type": "image_url", "image_url": {"url": shot}}],
            }
        )
    w.call(
        {"messages": list(msgs), "tools": tools},
        "Done: submitted.",
        gap="tool: [screenshot]\n",
        finish="stop",
    )
    return w


def _responses_infra(rid: str) -> ChainWriter:
    w = ChainWriter(rid, protocol=WireProtocol.RESPONSES, seed=9)
    w.call(
        {
            "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "add a todo"}]}
            ]
        },
        "call shell",
        finish="tool_calls",
    )
    return w


def build_runs(tmp: Path) -> tuple[Path, Path]:
    a_ok = _chat_rollout("r-mail-ok", MAIL_OK, final="Replied to Ana.", seed=1)
    a_bad = _chat_rollout("r-mail-bad", MAIL_BAD, final="I could not find it.", seed=2, break_at=2)
    gui = _gui_rollout("r-gui", seed=3)
    infra = _responses_infra("r-infra")
    run_a = write_run(
        tmp / "run-a",
        [
            (record("r-mail-ok", MAIL_TASK, "zero", RolloutStatus.OK, 1.0, t=1000), a_ok.calls),
            (record("r-mail-bad", MAIL_TASK, "zero", RolloutStatus.AGENT_FAILED, 0.0, t=1001), a_bad.calls),
            (record("r-gui", GUI_TASK, "cua", RolloutStatus.OK, 1.0, t=1002), gui.calls),
            (
                record("r-infra", "claw/easy-todo-add-01", "codex", RolloutStatus.INFRA_ENGINE, None, t=1003),
                infra.calls,
            ),
        ],
        audits={"r-mail-ok": _audit(MAIL_OK, 1000.0, fault_first=True)},
        files={"r-mail-ok": {"reply.txt": b"Confirmed.\n", "notes/todo.md": b"# todo\n- invoice\n"}},
    )
    b_ok = _chat_rollout("s-mail-ok", MAIL_B, final="Replied and checked the sent folder.", seed=4, version=2)
    gui_b = _gui_rollout("s-gui", seed=5)
    run_b = write_run(
        tmp / "run-b",
        [
            (record("s-mail-ok", MAIL_TASK, "zero", RolloutStatus.OK, 1.0, version=2, t=2000), b_ok.calls),
            (record("s-gui", GUI_TASK, "cua", RolloutStatus.OK, 1.0, version=2, t=2001), gui_b.calls),
        ],
        jsonl="eval_rollouts.jsonl",
    )
    return run_a, run_b
