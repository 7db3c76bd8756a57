"""Verbatim history against the real local engine (its `/detokenize`), with the official SDKs: a reply the
harness echoes back reaches the engine as the model sampled it, and the two calls form one chain.

The tiny model's replies at temperature 1 are the real-model shapes that broke chains (reasoning blocks,
half-formed calls); seeds (or greedy decoding) keep the run repeatable. What stays out of reach: a
reply sampled as a token sequence that is not its text's own tokenization (2 of 40 at temperature 1 in
a hand run) renders back to other ids; only a token-level prompt would keep those.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from anthropic import AsyncAnthropic
from gwkit import gateway_over, serve_local_engine
from openai import AsyncOpenAI

from openforgerl.gateway.server import RunningGateway
from openforgerl.records import RolloutRecord, RolloutStatus
from openforgerl.store.sqlite import SQLiteCallStore
from openforgerl.trajectory.reconstruct import reconstruct_samples

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "run a command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def engine_url(tmp_path_factory: Any) -> Any:
    yield from serve_local_engine(tmp_path_factory, "tiny")


@pytest.fixture
async def gateway(engine_url: str, tmp_path: Any) -> AsyncIterator[tuple[RunningGateway, SQLiteCallStore]]:
    async with gateway_over(engine_url, tmp_path) as opened:
        yield opened


async def detokenized(engine_url: str, ids: list[int]) -> str:
    async with aiohttp.ClientSession() as s, s.post(engine_url + "/detokenize", json={"tokens": ids}) as r:
        return str((await r.json())["prompt"])


def merged(calls: list[Any], rollout_id: str) -> Any:
    record = RolloutRecord(
        rollout_id=rollout_id,
        status=RolloutStatus.OK,
        reward=1.0,
        in_batch=True,
        group_valid=True,
        closed=True,
    )
    return reconstruct_samples(calls, record).metrics


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_chat_echo_reaches_the_engine_as_sampled(gateway, engine_url, seed):
    gw, store = gateway
    ro = await gw.open_rollout(harness="test")
    client = AsyncOpenAI(base_url=ro["openai_base_url"], api_key=ro["api_key"], max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    first = await client.chat.completions.create(
        model="tiny", messages=messages, tools=TOOLS, max_tokens=48, temperature=1.0, seed=seed
    )
    reply = first.choices[0].message.model_dump(exclude_none=True)  # what a harness keeps and sends back
    messages += [reply, {"role": "user", "content": "Go on."}]
    await client.chat.completions.create(
        model="tiny", messages=messages, tools=TOOLS, max_tokens=8, seed=seed
    )
    one, two = await store.list_calls(ro["rollout_id"])
    raw = await detokenized(
        engine_url,
        one.completion_token_ids[:-1] if one.finish_reason != "length" else one.completion_token_ids,
    )
    assert two.request["messages"][1] == reply  # the record keeps what the harness sent
    assert two.engine_request is not None and two.engine_request["messages"][1] == {
        "role": "assistant",
        "content": raw,
    }
    metrics = merged([one, two], ro["rollout_id"])
    assert metrics.merged_calls == 1 and not metrics.break_causes, (raw, metrics)


async def test_anthropic_echo_with_thinking_reaches_the_engine_as_sampled(gateway, engine_url):
    gw, store = gateway
    ro = await gw.open_rollout(harness="test")
    client = AsyncAnthropic(base_url=ro["anthropic_base_url"], api_key=ro["api_key"], max_retries=0)
    tools = [{"name": "bash", "description": "run", "input_schema": TOOLS[0]["function"]["parameters"]}]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    first = await client.messages.create(
        model="tiny", messages=messages, tools=tools, max_tokens=48, extra_body={"temperature": 0.0}
    )
    blocks = [b.model_dump(exclude_none=True) for b in first.content]
    messages += [{"role": "assistant", "content": blocks}, {"role": "user", "content": "Go on."}]
    await client.messages.create(model="tiny", messages=messages, tools=tools, max_tokens=8)
    one, two = await store.list_calls(ro["rollout_id"])
    assert two.engine_request is not None
    metrics = merged([one, two], ro["rollout_id"])
    assert metrics.merged_calls == 1 and not metrics.break_causes, (blocks, metrics)


async def test_a_rollout_cannot_get_another_rollouts_text_put_back(gateway, engine_url):
    """Attack: rollout B echoes rollout A's reply (it could learn it from a shared file or guess it). Only A's
    own memory holds A's raw text, so B's turn goes to the engine as B sent it."""
    gw, store = gateway
    a, b = await gw.open_rollout(harness="test"), await gw.open_rollout(harness="test")
    client_a = AsyncOpenAI(base_url=a["openai_base_url"], api_key=a["api_key"], max_retries=0)
    client_b = AsyncOpenAI(base_url=b["openai_base_url"], api_key=b["api_key"], max_retries=0)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "List the files."}]
    first = await client_a.chat.completions.create(
        model="tiny", messages=messages, tools=TOOLS, max_tokens=48, seed=1
    )
    await client_b.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, max_tokens=4, seed=1)
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "user", "content": "Go on."},
    ]
    await client_b.chat.completions.create(model="tiny", messages=messages, tools=TOOLS, max_tokens=4, seed=1)
    (_, echoed) = await store.list_calls(b["rollout_id"])
    assert echoed.engine_request is None  # nothing rewritten: the request went as B sent it
