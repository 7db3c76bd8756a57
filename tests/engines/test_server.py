"""HTTP surface of `openforgerl engine` beyond the shared contract suite (errors, n, stop, knobs)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from openai import BadRequestError, OpenAI

TODO_TOOL = {
    "type": "function",
    "function": {
        "name": "todo_add",
        "description": "Add a todo item.",
        "parameters": {"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]},
    },
}
ASK = [{"role": "user", "content": "Add a todo 'buy milk'."}]


@pytest.fixture(scope="module")
def client(local_server) -> OpenAI:
    return OpenAI(base_url=local_server.url + "/v1", api_key="unused", max_retries=0, timeout=300)


def _raw(url: str, path: str, data: bytes | None = None) -> tuple[int, dict]:
    req = urllib.request.Request(
        url + path,
        data=data,
        method="POST" if data is not None else "GET",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=300) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_models_lists_the_served_model(local_server):
    status, body = _raw(local_server.url, "/v1/models")
    assert status == 200 and body["data"][0]["max_model_len"] >= 8192


def test_invalid_json_is_a_400_in_vllm_shape(local_server):
    status, body = _raw(local_server.url, "/v1/chat/completions", b"{not json")
    assert status == 400 and body["error"]["code"] == 400


def test_too_long_request_is_rejected(client):
    with pytest.raises(BadRequestError, match="maximum context length"):
        client.chat.completions.create(model="tiny", messages=ASK, max_tokens=10**6)


def test_n_choices_each_with_their_ids(client):
    resp = client.chat.completions.create(
        model="tiny", messages=ASK, n=3, max_tokens=8, temperature=1.0, extra_body={"return_token_ids": True}
    ).model_dump()
    assert [c["index"] for c in resp["choices"]] == [0, 1, 2]
    assert resp["usage"]["completion_tokens"] == sum(len(c["token_ids"]) for c in resp["choices"])


def test_stop_string_cuts_text_but_keeps_ids(client):
    base = client.chat.completions.create(
        model="tiny",
        messages=ASK,
        tools=[TODO_TOOL],
        temperature=0,
        max_tokens=40,
        extra_body={"return_token_ids": True, "include_reasoning": True},
    )
    raw = base.choices[0].model_dump()["message"]["reasoning"] or ""
    word = raw.strip().split()[1] if len(raw.split()) > 1 else None
    if word is None:
        pytest.skip("model produced no multi-word reasoning to stop on")
    resp = client.chat.completions.create(
        model="tiny",
        messages=ASK,
        tools=[TODO_TOOL],
        temperature=0,
        max_tokens=40,
        stop=[word],
        extra_body={"return_token_ids": True},
    )
    choice = resp.choices[0].model_dump()
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == word
    assert word not in (choice["message"]["reasoning"] or "")
    assert len(choice["token_ids"]) < len(base.choices[0].model_dump()["token_ids"])


def test_tool_choice_none_returns_text(client):
    resp = client.chat.completions.create(
        model="tiny", messages=ASK, tools=[TODO_TOOL], tool_choice="none", temperature=0, max_tokens=60
    )
    assert not resp.choices[0].message.tool_calls


def test_seeded_sampling_repeats_over_http(client):
    kw = dict(
        model="tiny",
        messages=ASK,
        max_tokens=12,
        temperature=1.0,
        seed=5,
        extra_body={"return_token_ids": True},
    )
    a = client.chat.completions.create(**kw).model_dump()["choices"][0]["token_ids"]
    b = client.chat.completions.create(**kw).model_dump()["choices"][0]["token_ids"]
    assert a == b
