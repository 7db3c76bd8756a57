"""Token-level fidelity: after one tool turn through a translator and back through the harness's
history, the next prompt (real tokenizer + chat template) starts with the previous prompt plus the
exact sampled tokens. This is what lets trajectory/ merge calls into one training sequence."""

from __future__ import annotations

import json
from typing import Any

import pytest
from protokit import CAPTURES, load_body

from openforgerl.engines.chat_format import EOS_TOKEN, ChatFormat, parse_output
from openforgerl.gateway.protocols import anthropic, responses


@pytest.fixture(scope="module")
def fmt() -> ChatFormat:
    return ChatFormat.load()


def prompt(fmt: ChatFormat, chat: dict[str, Any]) -> list[int]:
    return fmt.prompt_ids(chat["messages"], chat.get("tools"))


def tool_text(name: str, args: dict[str, Any]) -> str:
    """A hermes tool call as a model writes it (non-ASCII raw, not escaped)."""
    return (
        "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>"
    )


def sample(fmt: ChatFormat, text: str) -> tuple[list[int], dict[str, Any]]:
    """What vLLM returns for `text`: the ids and the parsed chat.completion (hermes + qwen3 parsers)."""
    parsed = parse_output(text)
    calls = [
        {
            "id": tc.id,
            "type": "function",
            "function": {
                # vLLM's hermes parser: json.dumps(arguments, ensure_ascii=False)
                "name": tc.name,
                "arguments": json.dumps(json.loads(tc.arguments), ensure_ascii=False),
            },
        }
        for tc in parsed.tool_calls
    ]
    msg = {"role": "assistant", "content": parsed.content, "reasoning": parsed.reasoning, "tool_calls": calls}
    chat = {
        "choices": [
            {"index": 0, "message": msg, "finish_reason": "tool_calls" if parsed.tool_calls else "stop"}
        ]
    }
    return fmt.encode(text + EOS_TOKEN), chat


@pytest.mark.parametrize("fold", [False, True], ids=["system-kept", "system-folded"])
@pytest.mark.parametrize("tool,args", [("Bash", {"command": "ls -la"}), ("Read", {"file_path": "/tmp/é ü"})])
def test_claude_code_turn_extends(fmt, tool, args, fold) -> None:
    req1 = load_body(CAPTURES / "claude__turn1_request.json.gz")
    p1 = prompt(fmt, anthropic.to_chat_request(req1, fold_system=fold))
    ids, chat = sample(fmt, "<think>\nI will look first.\n</think>\n\n" + tool_text(tool, args))
    message = anthropic.from_chat_completion(chat, req1)
    use = message["content"][-1]
    history = [
        {"role": "assistant", "content": message["content"]},  # Claude Code echoes the blocks
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "ok"}]},
    ]
    p2 = prompt(
        fmt, anthropic.to_chat_request(dict(req1, messages=req1["messages"] + history), fold_system=fold)
    )
    assert p2[: len(p1) + len(ids)] == p1 + ids


@pytest.mark.parametrize(
    "name,args", [("exec_command", {"cmd": "ls ü"}), ("multi_agent_v1.spawn_agent", {"message": "do it"})]
)
def test_codex_turn_extends(fmt, name, args) -> None:
    req1 = load_body(CAPTURES / "codex__turn1_request.json.gz")
    p1 = prompt(fmt, responses.to_chat_request(req1))
    ids, chat = sample(fmt, "<think>\nplan\n</think>\n\n" + tool_text(name, args))
    output = responses.from_chat_completion(chat, req1)["output"]
    # Codex re-sends its items without reasoning `content` (it keeps `encrypted_content`)
    echoed = [
        {k: v for k, v in o.items() if not (o["type"] == "reasoning" and k == "content")} for o in output
    ]
    call = next(o for o in output if o["type"] == "function_call")
    result = {"type": "function_call_output", "call_id": call["call_id"], "output": "done"}
    p2 = prompt(fmt, responses.to_chat_request(dict(req1, input=req1["input"] + echoed + [result])))
    assert p2[: len(p1) + len(ids)] == p1 + ids


def test_codex_without_encrypted_reasoning_breaks_the_prefix(fmt) -> None:
    """Control: if the reasoning were lost (no `include`), the prefix would
    break — the test above can fail."""
    req1 = dict(load_body(CAPTURES / "codex__turn1_request.json.gz"), include=[])
    p1 = prompt(fmt, responses.to_chat_request(req1))
    ids, chat = sample(fmt, "<think>\nplan\n</think>\n\n" + tool_text("exec_command", {"cmd": "ls"}))
    output = responses.from_chat_completion(chat, req1)["output"]
    echoed = [
        {k: v for k, v in o.items() if not (o["type"] == "reasoning" and k == "content")} for o in output
    ]
    result = {"type": "function_call_output", "call_id": output[-1]["call_id"], "output": "done"}
    p2 = prompt(fmt, responses.to_chat_request(dict(req1, input=req1["input"] + echoed + [result])))
    assert p2[: len(p1) + len(ids)] != p1 + ids
