"""gateway/verbatim.py: which echoed assistant turns are put back as the model wrote them, and which not."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from openforgerl.gateway.verbatim import EchoMemory, message_signature, raw_signature, sampled_text_ids

RAW = (
    "Plan: write it.\n</think>\n\nSure.  "
    '<tool_call>{"name":"bash","arguments":{"command":"ls  -l"}}</tool_call>\n'
)


def echoed(
    content: str | None = "Sure.",
    reasoning: str | None = "Plan: write it.",
    args: Any = '{"command": "ls  -l"}',
    name: str = "bash",
) -> dict[str, Any]:
    """The message a harness sends back: parsed by the engine, re-serialised by the harness."""
    msg: dict[str, Any] = {
        "role": "assistant",
        "content": content,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": args}}],
    }
    if reasoning is not None:
        msg["reasoning_content"] = reasoning
    return msg


def body(*messages: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [
            {"role": "user", "content": "go"},
            *messages,
            {"role": "tool", "tool_call_id": "c1", "content": "a.txt"},
        ],
    }


class Memory(EchoMemory):
    def sync_rewrite(self, body: dict[str, Any]) -> dict[str, Any] | None:
        return asyncio.run(self.rewrite(body, None, "r"))


def memory(*raws: str) -> Memory:
    mem = Memory()
    for raw in raws:
        mem.remember(raw)
    return mem


def test_an_echoed_turn_is_replaced_by_the_raw_text() -> None:
    out = memory(RAW).sync_rewrite(body(echoed()))
    assert out is not None and out["messages"][1] == {"role": "assistant", "content": RAW}
    assert out["messages"][0] == {"role": "user", "content": "go"} and out["messages"][2]["role"] == "tool"


def test_arguments_as_an_object_or_respaced_string_still_match() -> None:
    assert memory(RAW).sync_rewrite(body(echoed(args={"command": "ls  -l"}))) is not None
    assert memory(RAW).sync_rewrite(body(echoed(args='{ "command" : "ls  -l" }'))) is not None


def test_where_the_parser_split_reasoning_from_content_does_not_matter() -> None:
    # served without a reasoning parser: the whole reply before the call is content
    assert (
        memory(RAW).sync_rewrite(body(echoed(content="Plan: write it.\n</think>\n\nSure.", reasoning=None)))
        is None
    )
    assert memory(RAW).sync_rewrite(body(echoed(content="Plan: write it. Sure.", reasoning=None))) is not None


def test_a_turn_the_harness_changed_is_left_alone() -> None:
    mem = memory(RAW)
    assert mem.sync_rewrite(body(echoed(content="Sure!"))) is None  # edited text
    assert mem.sync_rewrite(body(echoed(reasoning=None))) is None  # reasoning dropped by the harness
    assert mem.sync_rewrite(body(echoed(args='{"command": "ls -l"}'))) is None  # the argument changed
    assert mem.sync_rewrite(body(echoed(name="sh"))) is None
    assert mem.sync_rewrite(body(echoed(args="{not json"))) is None


def test_only_assistant_turns_and_only_text_are_replaced() -> None:
    mem = memory("hello there")
    assert mem.sync_rewrite({"messages": [{"role": "user", "content": "hello there"}]}) is None
    image = [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]
    assert mem.sync_rewrite({"messages": [{"role": "assistant", "content": image}]}) is None
    parts = [{"type": "text", "text": "hello "}, {"type": "text", "text": "there"}]
    assert mem.sync_rewrite({"messages": [{"role": "assistant", "content": parts}]}) is not None


def test_a_reply_with_a_broken_call_is_text_as_the_parser_leaves_it() -> None:
    raw = 'I will.<tool_call>{"name": "bash", "arguments": {</tool_call>'
    assert raw_signature(raw)[1] == ()
    assert memory(raw).sync_rewrite({"messages": [{"role": "assistant", "content": raw}]}) is not None
    assert memory(raw).sync_rewrite({"messages": [{"role": "assistant", "content": "I will."}]}) is None


def test_memory_is_bounded_and_keeps_the_most_recent() -> None:
    mem = memory(*[f"answer {i}" for i in range(600)])
    assert len(mem.texts) == 512
    assert message_signature({"role": "assistant", "content": "answer 599"}) in mem.texts
    assert message_signature({"role": "assistant", "content": "answer 0"}) not in mem.texts


def test_ids_are_read_only_when_a_turn_is_echoed() -> None:
    asked: list[list[int]] = []

    async def detokenize(ids: list[int], route_key: str) -> str | None:
        asked.append(ids)
        return "hello there"

    async def run() -> tuple[Any, Any]:
        mem = EchoMemory()
        mem.note([1, 2])
        single = await mem.rewrite({"messages": [{"role": "user", "content": "hi"}]}, detokenize, "r")
        assert not asked  # nothing echoed: nothing read
        echoed = await mem.rewrite(
            {"messages": [{"role": "assistant", "content": "hello  there"}]}, detokenize, "r"
        )
        return single, echoed

    single, echoed = asyncio.run(run())
    assert single is None and asked == [[1, 2]]
    assert echoed == {"messages": [{"role": "assistant", "content": "hello there"}]}


def test_a_hung_detokenize_gives_up_and_leaves_the_turn_alone(monkeypatch: Any) -> None:
    """The read runs before the engine call's deadline is armed: a hung engine must not hang it."""
    import openforgerl.gateway.verbatim as verbatim

    monkeypatch.setattr(verbatim, "READ_TIMEOUT_S", 0.05)

    async def hung(ids: list[int], route_key: str) -> str | None:
        await asyncio.Event().wait()
        return None

    async def run() -> Any:
        mem = EchoMemory()
        mem.note([1, 2])
        return await mem.rewrite({"messages": [{"role": "assistant", "content": "hi"}]}, hung, "r")

    assert asyncio.run(run()) is None


def test_the_end_of_turn_token_is_not_part_of_the_text() -> None:
    assert sampled_text_ids([5, 6, 2], "stop", {}) == [5, 6]
    assert sampled_text_ids([5, 6, 2], "tool_calls", {}) == [5, 6]
    assert sampled_text_ids([5, 6, 7], "length", {}) == [5, 6, 7]
    assert sampled_text_ids([5, 6, 7], "stop", {"stop": ["\n\n"]}) == [5, 6, 7]


@given(
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40),
    st.dictionaries(st.text(min_size=1, max_size=5), st.integers(), max_size=3),
)
def test_any_reply_round_trips_through_its_parsed_form(text: str, args: dict[str, int]) -> None:
    """The raw text of a reply matches the message a vLLM-style parser makes of it."""
    if "<" in text or ">" in text:
        return
    raw = text + '<tool_call>\n{"name": "f", "arguments": ' + json.dumps(args) + "}\n</tool_call>"
    parsed = {
        "role": "assistant",
        "content": text,
        "tool_calls": [{"function": {"name": "f", "arguments": json.dumps(args)}}],
    }
    assert memory(raw).sync_rewrite({"messages": [parsed]}) == {
        "messages": [{"role": "assistant", "content": raw}]
    }


async def test_a_read_cancelled_by_a_stopped_run_reports_nothing() -> None:
    """Ctrl-C or SIGTERM while the history's ids are being read back: the cancelled read leaves no
    unread CancelledError for asyncio to print as a traceback into the run's log."""
    import gc

    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    before = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx))
    started = asyncio.Event()

    async def hung_engine(ids: list[int], route_key: str) -> str:
        started.set()
        await asyncio.sleep(1000)
        return ""

    try:
        memory = EchoMemory()
        memory.note([1, 2, 3])
        task = asyncio.ensure_future(memory.read(hung_engine, "r"))
        await started.wait()  # control: the read is in flight, inside wait_for
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        del task
        await asyncio.sleep(0.05)
        gc.collect()
        await asyncio.sleep(0)
        assert [c.get("message") for c in seen if "_GatheringFuture" in str(c.get("message"))] == []
    finally:
        loop.set_exception_handler(before)
