"""The scripted GUI-harness policies, pure: UI-TARS action text from a pixel oracle, browser-use JSON by
element index and step (no harness, no sandbox; the end-to-end runs are in test_gui_harnesses.py)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from openforgerl.harness.gui_scripted_policy import (
    browser_use_fill_and_submit,
    find_index,
    oracle_to_ui_tars,
    ui_tars_policy,
)

STATE = """<browser_state>
Interactive elements:
|SHADOW(open)|[2]<input type=text id=new-title name=title placeholder=New card />
[28]<button id=add />
\tAdd card
[36]<button id=fwd-c1 name=to value=doing />
</browser_state>
<step_info>Step{n} maximum:30
Today:2026-12-01</step_info>"""


def test_oracle_becomes_ui_tars_actions_in_0_1000_units() -> None:
    steps = [
        {"action": "click", "x": 640, "y": 360},
        {"action": "key", "keys": "ctrl+end"},
        {"action": "type", "text": "it's"},
        {"action": "wait", "seconds": 0.5},
        {"action": "drag", "x": 0, "y": 0, "to_x": 1280, "to_y": 720},
        {"action": "double_click", "x": 128, "y": 72},
    ]
    assert oracle_to_ui_tars(steps, 1280, 720) == [
        "click(start_box='(500,500)')",
        "hotkey(key='ctrl end')",
        "type(content='it\\'s')",
        "drag(start_box='(0,0)', end_box='(1000,1000)')",
        "left_double(start_box='(100,100)')",
        "finished()",
    ]
    with pytest.raises(ValueError):
        oracle_to_ui_tars([{"action": "teleport"}], 1280, 720)


def test_ui_tars_policy_answers_the_next_action_after_each_assistant_turn() -> None:
    policy = ui_tars_policy(["click(start_box='(1,2)')", "finished()"])
    first = policy(SimpleNamespace(messages=[{"role": "user", "content": "task"}]))
    assert first.startswith("Thought: ") and first.endswith("Action: click(start_box='(1,2)')")
    later = [{"role": "user", "content": "t"}, {"role": "assistant", "content": first}] * 3
    assert policy(SimpleNamespace(messages=later)).endswith("Action: finished()")


def test_browser_use_policy_reads_the_step_and_the_indices_from_the_state() -> None:
    assert find_index(STATE, "id=add") == 28 and find_index(STATE, "id=new-title") == 2
    with pytest.raises(LookupError):
        find_index(STATE, "id=nope")
    policy = browser_use_fill_and_submit("id=new-title", "Call the caterer", "id=add")

    def answer(n: int) -> dict:
        msgs = [
            {"role": "system", "content": "rules"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": STATE.format(n=n)},
                    {"type": "text", "text": "Current screenshot:"},
                ],
            },
            {"role": "user", "content": "PLANNING NUDGE"},
        ]
        return json.loads(policy(SimpleNamespace(messages=msgs)))

    assert answer(1)["action"] == [{"input": {"index": 2, "text": "Call the caterer"}}]
    assert answer(2)["action"] == [{"click": {"index": 28}}]
    assert answer(3)["action"][0]["done"]["success"] is True
    assert set(answer(1)) == {"thinking", "evaluation_previous_goal", "memory", "next_goal", "action"}
