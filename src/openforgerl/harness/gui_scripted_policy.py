"""Scripted policies (the model's *decisions* only) that speak third-party GUI harnesses' output formats.

Used with `engines.scripted.ScriptedEngine` by the GUI harness tests:
- `ui_tars_policy`: UI-TARS action text (`Thought: ...\\nAction: click(start_box='(x,y)')`), one action per
  model call, the i-th after i assistant turns; `oracle_to_ui_tars` turns a task's pixel oracle into it
  (boxes in 0-1000 units of the screen, what `@ui-tars/sdk` parses for UI-TARS 1.0).
- `browser_use_policy`: browser-use's structured JSON (`AgentOutput`: thinking, memory, next_goal and an
  `action` list); clicks name the element *index* browser-use printed in its DOM listing, found by text,
  and the step comes from the state message (browser-use re-renders its prompt each step).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

Policy = Callable[[Any], str]


def _norm(x: float, y: float, width: int, height: int) -> tuple[int, int]:
    return round(x * 1000 / width), round(y * 1000 / height)


def oracle_to_ui_tars(steps: Sequence[dict[str, Any]], width: int, height: int) -> list[str]:
    """Pixel oracle actions -> UI-TARS action strings, ending with `finished()`; `wait` steps are dropped
    (the SDK's `wait()` sleeps 5 s; the next screenshot already follows the action)."""
    out: list[str] = []
    for s in steps:
        kind = s["action"]
        if kind in ("click", "double_click", "right_click"):
            name = {
                "click": "right_single" if s.get("button") == "right" else "click",
                "double_click": "left_double",
                "right_click": "right_single",
            }[kind]
            out.append(
                f"{name}(start_box='({_norm(s['x'], s['y'], width, height)[0]},"
                f"{_norm(s['x'], s['y'], width, height)[1]})')"
            )
        elif kind == "drag":
            a, b = _norm(s["x"], s["y"], width, height), _norm(s["to_x"], s["to_y"], width, height)
            out.append(f"drag(start_box='({a[0]},{a[1]})', end_box='({b[0]},{b[1]})')")
        elif kind == "type":
            text = s["text"].replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
            out.append(f"type(content='{text}')")
        elif kind == "key":
            out.append(f"hotkey(key='{' '.join(s['keys'].split('+'))}')")
        elif kind == "wait":
            continue
        else:
            raise ValueError(f"no UI-TARS form for oracle step {s}")
    return [*out, "finished()"]


def ui_tars_policy(actions: Sequence[str]) -> Policy:
    """The i-th action after i assistant messages (the SDK re-sends its whole kept history each call)."""

    def policy(turn: Any) -> str:
        done = sum(m.get("role") == "assistant" for m in turn.messages)
        action = actions[min(done, len(actions) - 1)]
        return f"Thought: step {done + 1} of the plan.\nAction: {action}"

    return policy


# -- browser-use ---------------------------------------------------------------------------------------
_ELEMENT = re.compile(r"\[(\d+)\]<(\w+)([^>]*)>([^\n]*)")


def browser_use_elements(text: str) -> list[tuple[int, str, str]]:
    """(index, tag, the rest of its line) for every interactive element in browser-use's DOM listing."""
    return [(int(m.group(1)), m.group(2), f"{m.group(3)} {m.group(4)}") for m in _ELEMENT.finditer(text)]


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def find_index(text: str, needle: str) -> int:
    """The index of the element whose tag/attributes/text line contains `needle` (the last listing wins)."""
    found = [i for i, _, rest in browser_use_elements(text) if needle in rest]
    if not found:
        raise LookupError(f"no element matching {needle!r} in the DOM listing")
    return found[0]


def browser_use_output(actions: list[dict[str, Any]], goal: str) -> str:
    return json.dumps(
        {
            "thinking": goal,
            "evaluation_previous_goal": "ok",
            "memory": goal,
            "next_goal": goal,
            "action": actions,
        }
    )


_STEP = re.compile(r"<step_info>\s*Step\s*(\d+)")


def browser_use_policy(
    plan: Sequence[Callable[[str], list[dict[str, Any]]]], done_text: str = "Done."
) -> Policy:
    """Step i of `plan` gets the browser state text and returns that step's action list; after the plan,
    `done`. browser-use rebuilds its prompt every step (system, then one user message with the history and
    the state, sometimes a nudge after it; no assistant messages), so the step is read from the state's
    `<step_info>Step N`, counted from 1."""

    def policy(turn: Any) -> str:
        texts = [_text_of(m) for m in turn.messages if m.get("role") == "user"]
        state = next((t for t in reversed(texts) if "<browser_state>" in t), "")
        found = _STEP.search(state)
        step = int(found.group(1)) - 1 if found else 0
        if step < len(plan):
            return browser_use_output(plan[step](state), f"step {step + 1}")
        return browser_use_output([{"done": {"text": done_text, "success": True}}], "finish")

    return policy


def browser_use_fill_and_submit(field: str, text: str, button: str) -> Policy:
    """A browser-use policy for "type `text` into the element matching `field`, then click `button`"
    (needles match the element's line in the DOM listing, e.g. `id=new-title`), then `done`."""
    return browser_use_policy(
        [
            lambda state: [{"input": {"index": find_index(state, field), "text": text}}],
            lambda state: [{"click": {"index": find_index(state, button)}}],
        ]
    )
