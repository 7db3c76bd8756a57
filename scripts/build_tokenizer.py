"""Build the tiny model's tokenizer (committed as src/openforgerl/assets/tiny/tokenizer.json).

Byte-level BPE trained with `tokenizers` on a deterministic synthetic corpus (agent chat, JSON tool
calls, shell commands, Claw-service vocabulary), so the result does not depend on the Python
version's stdlib files. Specials follow Qwen's ChatML: <|endoftext|>, <|im_start|>, <|im_end|>, and
the non-special markers <tool_call> ... </think> stay single tokens.

    python scripts/build_tokenizer.py            # rewrites the asset
"""

from __future__ import annotations

import json
import random
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

ASSET = Path(__file__).resolve().parents[1] / "src/openforgerl/assets/tiny"
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKERS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
VOCAB = 4096
SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| "
    r"?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

WORDS = (
    "the a to of and in is for on with you file write read send mail email inbox calendar event contact "
    "note todo task knowledge base search list create delete update reply forward subject body from "
    "meeting tomorrow today monday friday hello world done ok error result output content path name "
    "please assistant user system tool call function arguments command echo cat ls cd mkdir python "
    "json true false null status reward answer question summary project report budget team alice bob "
    "carol dave eve weather city paris rome tokyo london berlin time date title description"
).split()
TOOLS = [
    "bash",
    "write_file",
    "read_file",
    "mail_send",
    "mail_list",
    "calendar_create",
    "todo_add",
    "contacts_find",
    "kb_search",
    "notes_write",
    "exec_command",
    "shell",
]


def corpus(n: int = 4000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 14)))
        tool = rng.choice(TOOLS)
        args = {rng.choice(WORDS): " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))}
        call = json.dumps({"name": tool, "arguments": args})
        lines += [
            f"<|im_start|>user\n{words.capitalize()}.<|im_end|>\n",
            f"<|im_start|>assistant\n<think>\n{words}\n</think>\n\n<tool_call>\n{call}\n</tool_call><|im_end|>\n",
            f"<|im_start|>user\n<tool_response>\n{words} "
            f"{rng.randint(0, 99999)}\n</tool_response><|im_end|>\n",
            f"echo '{words}' > /workdir/{rng.choice(WORDS)}.txt && cat {rng.choice(WORDS)}.md | grep -n x",
            json.dumps({"type": "function", "function": {"name": tool, "parameters": {"type": "object"}}}),
        ]
    return lines


def stdlib_corpus() -> list[str]:
    """English prose and code from a fixed list of stdlib modules
    (the committed file is the source of truth)."""
    import importlib
    import inspect

    texts = []
    for name in [
        "json",
        "argparse",
        "subprocess",
        "pathlib",
        "shutil",
        "email.message",
        "smtplib",
        "calendar",
        "textwrap",
        "http.client",
        "urllib.parse",
        "logging",
        "csv",
        "sqlite3",
    ]:
        try:
            texts.append(inspect.getsource(importlib.import_module(name)))
        except (OSError, TypeError):
            continue
    return texts


def build() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus() + stdlib_corpus(), trainer=trainer)
    tok.add_tokens(MARKERS)
    return tok


def main() -> None:
    ASSET.mkdir(parents=True, exist_ok=True)
    tok = build()
    tok.save(str(ASSET / "tokenizer.json"))
    print(f"vocab {tok.get_vocab_size()} -> {ASSET / 'tokenizer.json'}")


if __name__ == "__main__":
    main()
