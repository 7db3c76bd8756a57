"""The break causes `benchmarks/real_model.py` names, each from a chain a harness could send, with the
real SmolLM2 tokenizer: the docs' figures of record count breaks by these names, so each name must
mean what the docs say it means. Gated like the other SmolLM2 tests."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

from openforgerl.engines.local.smollm2 import cache_dir

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tok() -> Any:
    if not (cache_dir() / "tokenizer.json").exists():
        if os.environ.get("OPENFORGERL_SMOLLM2") != "1":
            pytest.skip("SmolLM2 not converted (set OPENFORGERL_SMOLLM2=1 to download and convert it)")
        from openforgerl.engines.local.smollm2 import ensure_smollm2_dir

        ensure_smollm2_dir()
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(cache_dir() / "tokenizer.json"))


@pytest.fixture(scope="module")
def rm() -> Any:
    spec = importlib.util.spec_from_file_location("real_model", ROOT / "benchmarks" / "real_model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def turn(role: str, text: str) -> str:
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


SYSTEM = turn("system", "You are a coding agent. Use the tools to finish the task, then stop.")
TASK = turn("user", "Write the word abracadabra into proof.txt and tell me when it is done.")
ASK = "<|im_start|>assistant\n"


class Chain:
    """A first call (prompt + the model's sample) and the next prompt a harness sends after it."""

    def __init__(self, tok: Any, history: str, sampled: str | list[int], finish: str, **extra: Any) -> None:
        self.tok = tok
        self.prompt = tok.encode(history + ASK).ids
        ids = sampled if isinstance(sampled, list) else tok.encode(sampled).ids
        self.source = {
            "prompt_token_ids": self.prompt,
            "completion_token_ids": ids,
            "finish_reason": finish,
            **extra,
        }

    def cause(self, rm: Any, next_text: str | None = None, next_ids: list[int] | None = None) -> str:
        nxt = next_ids if next_ids is not None else self.tok.encode(next_text).ids
        chain = self.prompt + self.source["completion_token_ids"]
        common = 0
        while common < min(len(nxt), len(chain)) and nxt[common] == chain[common]:
            common += 1
        assert common < len(chain), "the next prompt continues the chain: no break to explain"
        return str(rm.break_cause(nxt, common, self.source, self.tok))


def test_a_truncated_reply_dropped_or_rewritten(tok: Any, rm: Any) -> None:
    cut = "I will write the file now using the bash tool with the command echo abra"
    chain = Chain(tok, SYSTEM + TASK, cut, "length")
    dropped = SYSTEM + TASK + turn("user", "Your previous response reached the output token limit.") + ASK
    assert chain.cause(rm, dropped) == "harness_rewrite:dropped_truncated_turn"
    rewritten = SYSTEM + TASK + ASK + cut[:40] + '", "__unparsedToolInput": {}}<|im_end|>\n' + ASK
    assert chain.cause(rm, rewritten) == "harness_rewrite:rewrote_truncated_turn"


def test_an_empty_reply_asked_again(tok: Any, rm: Any) -> None:
    chain = Chain(tok, SYSTEM + TASK, "<|im_end|>", "stop", response_text="")
    reask = SYSTEM + TASK + turn("user", "[Your previous response had no visible output.]") + ASK
    assert chain.cause(rm, reask) == "harness_rewrite:reasked_empty_reply"


def test_a_reply_dropped_for_a_reason_of_the_harnesss(tok: Any, rm: Any) -> None:
    chain = Chain(tok, SYSTEM + TASK, "Sure, I can do that for you.<|im_end|>", "stop")
    error = (
        SYSTEM + TASK + turn("user", "Please always provide EXACTLY ONE action in triple backticks.") + ASK
    )
    assert chain.cause(rm, error) == "harness_rewrite:dropped_reply"


def test_the_same_text_back_as_other_ids(tok: Any, rm: Any) -> None:
    text = "The file is written."
    split = [i for ch in text for i in tok.encode(ch).ids] + tok.encode("<|im_end|>").ids
    assert split != tok.encode(text + "<|im_end|>").ids  # a split the tokenizer does not produce
    chain = Chain(tok, SYSTEM + TASK, split, "stop")
    back = SYSTEM + TASK + ASK + text + "<|im_end|>\n" + turn("user", "Thanks.") + ASK
    assert chain.cause(rm, back) == "retokenized_sample"


def test_a_tool_call_rendered_back_differently(tok: Any, rm: Any) -> None:
    args = '{"command": "echo abracadabra > proof.txt"}'
    call = '<tool_call>\n{"name": "bash", "arguments": ' + args + "}\n</tool_call>"
    bad = '<tool_call>\n{"name": "bash\', "arguments": {"command": "ls"}}}\n</tool_call>'
    result = turn("tool", "<tool_response>\n\n</tool_response>") + ASK
    for sampled, cause in ((bad, "unparsable_tool_call"), (call, "prefix_mismatch:sampled")):
        chain = Chain(tok, SYSTEM + TASK, sampled + "<|im_end|>", "tool_calls")
        echoed = json.loads(call.split("\n")[1])
        rendered = SYSTEM + TASK + ASK + "<tool_call>\n" + json.dumps(echoed, indent=1) + "\n</tool_call>"
        assert chain.cause(rm, rendered + "<|im_end|>\n" + result) == cause


def test_a_message_moved_after_the_new_turns(tok: Any, rm: Any) -> None:
    internal = turn("user", "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> the workspace is /workdir, files: none")
    chain = Chain(tok, SYSTEM + TASK + internal, "I will check the workspace first.<|im_end|>", "stop")
    moved = (
        SYSTEM + TASK + ASK + "I will check the workspace first.<|im_end|>\n" + turn("tool", "ok") + internal
    )
    assert chain.cause(rm, moved + ASK) == "harness_rewrite:moved_message"


def test_the_context_shape_of_other_breaks(tok: Any, rm: Any) -> None:
    chain = Chain(tok, SYSTEM + TASK + turn("user", "Also list the folder."), "Done.<|im_end|>", "stop")
    assert chain.cause(rm, SYSTEM + TASK) == "rewind"  # a prefix of the chain: an earlier state again
    summary = SYSTEM + TASK + turn("user", "Summary of the conversation so far: nothing yet.") + ASK
    assert chain.cause(rm, summary) == "prefix_mismatch:context"
    assert chain.cause(rm, turn("system", "A different agent altogether.") + ASK) == "new_context"
