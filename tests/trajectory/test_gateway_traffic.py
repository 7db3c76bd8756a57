"""Reconstruction of call logs recorded from real SDK traffic through the gateway.

Clients are the official ``openai`` and ``anthropic`` SDKs speaking each harness's wire shape; the
only double is the scripted policy (the model's decisions). Prompt ids are the real chat template +
tokenizer output, recorded by the gateway; nothing here builds token ids by hand.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest
from anthropic import AsyncAnthropic
from openai import AsyncOpenAI
from trajectory_sim import check_invariants

from openforgerl.engines.chat_format import format_tool_call
from openforgerl.engines.scripted import Turn
from openforgerl.trajectory import reconstruct_samples

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a shell command",
            "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]},
        },
    }
]
STEPS = 3


@contextlib.contextmanager
def protocol_wired() -> Iterator[None]:
    """Skip (with the reason) while the gateway answers 404 for a protocol whose translator is not wired."""
    try:
        yield
    except (openai.NotFoundError, anthropic.NotFoundError) as err:
        if "protocol is not available" not in str(err):
            raise
        pytest.skip(f"gateway does not serve this protocol yet: {err}")


def tool_loop_policy(turn: Turn) -> str:
    """Run ``STEPS`` commands one after another, then answer."""
    done = sum(m.get("role") == "tool" for m in turn.messages)
    return format_tool_call("bash", {"cmd": f"step {done}"}) if done < STEPS else "All done."


def openai_client(ro: dict[str, str]) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)


async def _chat_tool_loop(
    c: AsyncOpenAI, messages: list[dict[str, Any]], *, move_context: bool = False, edit: Any = None
) -> int:
    """A chat-completions agent loop; ``move_context`` re-inserts a context message at the end
    (OpenClaw); ``edit`` rewrites each tool call the way a harness stores it in its history."""
    calls = 0
    while True:
        sent = (
            [*messages, {"role": "user", "content": f"[context] turn {calls}"}] if move_context else messages
        )
        r = await c.chat.completions.create(model="m", messages=sent, tools=TOOLS)
        calls += 1
        msg = r.choices[0].message
        if not msg.tool_calls:
            return calls
        messages.append(
            {
                "role": "assistant",
                "content": msg.content,
                "tool_calls": [(edit or _same)(tc.model_dump()) for tc in msg.tool_calls],
            }
        )
        for tc in msg.tool_calls:
            messages.append(
                {"role": "tool", "tool_call_id": tc.id, "content": "ok: " + tc.function.arguments}
            )


def _same(tool_call: dict[str, Any]) -> dict[str, Any]:
    return tool_call


def _new_id(tool_call: dict[str, Any]) -> dict[str, Any]:
    return {**tool_call, "id": "call_" + tool_call["id"].replace("_", "")[::-1]}


def _compact_json(tool_call: dict[str, Any]) -> dict[str, Any]:
    fn = tool_call["function"]
    args = json.dumps(json.loads(fn["arguments"]), separators=(",", ":"))
    return {**tool_call, "function": {**fn, "arguments": args}}


@pytest.mark.parametrize(
    ("edit", "breaks"),
    [(_new_id, {}), (_compact_json, {})],
    ids=["rewritten-ids", "reserialized-arguments"],
)
async def test_harness_history_edits(traffic, edit: Any, breaks: dict[str, int]) -> None:
    """OpenClaw rewrites tool-call ids (not rendered by the template: still one chain); Qwen Code and
    OpenClaw re-serialize argument JSON compactly, which the engine undoes by parsing history arguments
    before templating, as vLLM does (still one chain)."""
    t = await traffic(tool_loop_policy)
    ro = await t.open(harness="openclaw")
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "go"}]
    await _chat_tool_loop(openai_client(ro), messages, edit=edit)
    calls, rollout = await t.finish(ro["rollout_id"], 1.0)
    res = reconstruct_samples(calls, rollout)
    check_invariants(calls, res.samples)
    assert res.metrics.break_causes == breaks


async def test_chat_tool_loop_merges_into_one_chain(traffic) -> None:
    t = await traffic(tool_loop_policy)
    ro = await t.open(task_id="t1", harness="qwen", group_id="g1")
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "go"}]
    assert await _chat_tool_loop(openai_client(ro), messages) == STEPS + 1
    calls, rollout = await t.finish(ro["rollout_id"], 1.0)
    res = reconstruct_samples(calls, rollout)
    check_invariants(calls, res.samples)
    (sample,) = res.samples
    assert (sample.reward_score, sample.group_id, sample.harness, sample.num_turns) == (
        1.0,
        "g1",
        "qwen",
        STEPS + 1,
    )
    assert res.metrics.merge_rate == 1.0 and res.metrics.tokens_trained == sum(
        len(c.completion_token_ids) for c in calls
    )


async def test_openclaw_style_moved_context_message_forks_each_call(traffic) -> None:
    t = await traffic(tool_loop_policy)
    ro = await t.open(task_id="t1", harness="openclaw")
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "go"}]
    await _chat_tool_loop(openai_client(ro), messages, move_context=True)
    calls, rollout = await t.finish(ro["rollout_id"], 0.0)
    res = reconstruct_samples(calls, rollout)
    check_invariants(calls, res.samples)
    assert res.metrics.chains == STEPS + 1 and res.metrics.merge_rate == 0.0
    assert res.metrics.break_causes == {"prefix_mismatch:context": STEPS}


async def test_side_call_is_excluded(traffic) -> None:
    t = await traffic(lambda turn: "Fix the bug" if not turn.tools else tool_loop_policy(turn))
    ro = await t.open(harness="opencode")
    c = openai_client(ro)
    await c.chat.completions.create(
        model="m",
        messages=[
            {"role": "system", "content": "You are a title generator. Reply with a title."},
            {"role": "user", "content": "fix the failing test"},
        ],
    )
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "go"}]
    await _chat_tool_loop(c, messages)
    calls, rollout = await t.finish(ro["rollout_id"], 1.0)
    res = reconstruct_samples(calls, rollout)
    check_invariants(calls, res.samples)
    assert res.metrics.excluded == {"side_call": 1} and res.metrics.chains == 1


def responses_policy(turn: Turn) -> str:
    done = sum(m.get("role") == "tool" for m in turn.messages)
    return format_tool_call("shell", {"command": ["ls", f"-{done}"]}) if done < 2 else "Finished."


async def test_codex_style_responses_stream(traffic) -> None:
    t = await traffic(responses_policy)
    ro = await t.open(task_id="t2", harness="codex")
    c = AsyncOpenAI(
        base_url=ro["openai_base_url"],
        api_key=ro["api_key"],
        max_retries=0,
        default_headers={"thread-id": "th-main"},
    )
    tools = [
        {
            "type": "function",
            "name": "shell",
            "description": "run",
            "strict": False,
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "array", "items": {"type": "string"}}},
            },
        }
    ]
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "list"}]}
    ]
    for _ in range(3):
        with protocol_wired():
            done = await _responses_turn(c, items, tools)
        calls_made = [o for o in done.output if o.type == "function_call"]
        if not calls_made:
            break
        for fc in calls_made:
            items.append(
                {"type": "function_call", "call_id": fc.call_id, "name": fc.name, "arguments": fc.arguments}
            )
            items.append({"type": "function_call_output", "call_id": fc.call_id, "output": "a.txt"})
    calls, rollout = await t.finish(ro["rollout_id"], 1.0)
    assert {c.agent_id for c in calls} == {"th-main"} and len(calls) == 3
    res = reconstruct_samples(calls, rollout)
    check_invariants(calls, res.samples)
    assert res.samples[-1].agent_id == "th-main" and res.samples[-1].is_final_chain
    assert res.metrics.chains == 1 and res.metrics.merge_rate == 1.0
    _report("codex responses", res)


async def _responses_turn(c: AsyncOpenAI, items: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
    stream = await c.responses.create(
        model="m", instructions="You are Codex.", input=items, tools=tools, stream=True, store=False
    )
    final = None
    async for event in stream:
        if event.type == "response.completed":
            final = event.response
    assert final is not None
    return final


def claude_policy(turn: Turn) -> str:
    """Main agent delegates to a sub-agent (Task), the sub-agent runs one Bash command."""
    done = sum(m.get("role") == "tool" for m in turn.messages)
    is_sub = "sub-agent" in str(turn.messages[0].get("content"))
    if done == 0:
        return (
            format_tool_call("Bash", {"command": "ls"})
            if is_sub
            else format_tool_call("Task", {"prompt": "explore"})
        )
    return "Found it." if is_sub else "Done."


CLAUDE_TOOLS = [
    {
        "name": name,
        "description": name,
        "input_schema": {"type": "object", "properties": {key: {"type": "string"}}},
    }
    for name, key in (("Bash", "command"), ("Task", "prompt"))
]


async def test_claude_style_messages_with_sub_agent(traffic) -> None:
    t = await traffic(claude_policy)
    ro = await t.open(task_id="t3", harness="claude")
    c = AsyncAnthropic(base_url=ro["anthropic_base_url"], api_key=ro["api_key"], max_retries=0)

    async def run_task(prompt: str) -> str:  # what Claude Code does for the Task tool: a sub-agent loop
        return await _claude_loop(
            c, "You are a sub-agent.", prompt, {"x-claude-code-agent-id": "sub-1"}, None
        )

    with protocol_wired():
        await _claude_loop(c, "You are Claude Code.", "fix it", {}, run_task)
    calls, rollout = await t.finish(ro["rollout_id"], 1.0)
    assert [c.agent_id for c in calls] == [None, "sub-1", "sub-1", None]
    res = reconstruct_samples(calls, rollout)
    check_invariants(calls, res.samples)
    assert [s.agent_id for s in res.samples] == ["sub-1", None] and res.samples[-1].is_final_chain
    assert res.metrics.break_causes == {"sub_agent": 1}
    _report("claude messages", res)


async def _claude_loop(
    c: AsyncAnthropic, system: str, task: str, headers: dict[str, str], run_task: Any
) -> str:
    """Stream Messages calls until the model stops using tools; ``Task`` runs ``run_task`` (a sub-agent)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": task}]
    while True:
        async with c.messages.stream(
            model="claude",
            max_tokens=256,
            system=system,
            messages=messages,
            tools=CLAUDE_TOOLS,
            extra_headers=headers,
        ) as s:
            msg = await s.get_final_message()
        uses = [b for b in msg.content if b.type == "tool_use"]
        if not uses:
            return "".join(b.text for b in msg.content if b.type == "text")
        messages.append({"role": "assistant", "content": [b.model_dump() for b in msg.content]})
        results = [
            await run_task(u.input["prompt"]) if u.name == "Task" else json.dumps(u.input) for u in uses
        ]
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": u.id, "content": r}
                    for u, r in zip(uses, results, strict=True)
                ],
            }
        )


def _report(name: str, res: Any) -> None:
    m = res.metrics
    print(
        f"{name}: calls={m.calls} chains={m.chains} merge_rate={m.merge_rate} breaks={dict(m.break_causes)}"
    )


def thinking_policy(turn: Turn) -> str:
    done = sum(m.get("role") == "tool" for m in turn.messages)
    return "<think>\nplan\n</think>\n\n" + (format_tool_call("bash", {"cmd": "ls"}) if done < 2 else "Done.")


async def test_dropped_reasoning_is_a_sampled_prefix_mismatch(traffic) -> None:
    """Clients do not send reasoning back, so the re-rendered history differs inside sampled tokens:
    the gateway records it faithfully and reconstruction forks (never trains re-rendered text)."""
    t = await traffic(thinking_policy)
    ro = await t.open(harness="qwen")
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "go"}]
    await _chat_tool_loop(openai_client(ro), messages)
    calls, rollout = await t.finish(ro["rollout_id"], 1.0)
    res = reconstruct_samples(calls, rollout)
    check_invariants(calls, res.samples)
    assert res.metrics.break_causes == {"prefix_mismatch:sampled": 2}


async def test_export_reads_the_gateway_call_log(traffic, tmp_path) -> None:
    from openforgerl.export import ExportFormat, export_rows, reconstruct_log, write_rows
    from openforgerl.export.writers import read_parquet_rows
    from openforgerl.store.sqlite import SQLiteCallStore
    from openforgerl.trajectory import ReconstructionOptions

    t = await traffic(tool_loop_policy)
    for harness in ("qwen", "openclaw"):
        ro = await t.open(harness=harness, group_id="g")
        messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "go"}]
        await _chat_tool_loop(openai_client(ro), messages, move_context=harness == "openclaw")
        await t.finish(ro["rollout_id"], 1.0)
    reader = SQLiteCallStore(t.store.path)
    try:
        results = list(reconstruct_log(reader, ReconstructionOptions()))
    finally:
        reader.close()
    rows = export_rows(results, ExportFormat.VERL, classic=False)
    write_rows(rows, ExportFormat.VERL, tmp_path / "out.parquet")
    back = read_parquet_rows(tmp_path / "out.parquet")
    assert [r["extra_fields"]["harness"] for r in back] == ["qwen"] + ["openclaw"] * (STEPS + 1)
    assert [r["extra_fields"]["is_final_chain"] for r in back] == [True] + [False] * STEPS + [True]
