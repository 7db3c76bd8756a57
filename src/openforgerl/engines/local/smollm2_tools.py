"""`--model smollm2-tools`: SmolLM2-135M warmed up to call tools, with a 32k context.

Built from the converted SmolLM2 (`smollm2.ensure_smollm2_dir`) once, into $OPENFORGERL_CACHE
(default ~/.cache/openforgerl)/smollm2-tools:
- a longer context: YaRN RoPE scaling x4 over the 8,192 positions SmolLM2 was trained on (32,768), so
  Codex's (10k tokens) and Claude Code's (20.6k) first prompts fit. YaRN, not dynamic NTK: vLLM applies
  dynamic scaling at the full length from the first token while transformers grows it with the sequence,
  so the two engines would disagree; YaRN is the same static table in both.
- a short supervised warm-up on the committed `assets/smollm2/tool_traces.jsonl`: conversations our own
  harnesses sent through the gateway (their real system prompts and tools; captured by
  `scripts/make_smollm2_tools.py`) with the scripted oracle's Hermes tool calls as the answers. The loss
  is on the assistant turns only. Untrained, SmolLM2 never calls a tool in any harness.
Only the top `layers` decoder layers are trained (the rest, the embeddings and the tied head frozen): the
frozen layers' outputs are computed once per conversation, so a step costs a few layers, not thirty (a
full step on a 900-token prompt took 46 s on two busy cores). Seeded, a fixed thread count and torch's
deterministic algorithms: two builds from the same traces on the same machine wrote byte-identical
weights (same sha256). Built with the defaults below: 12 conversations, 11,972
tokens, loss 0.70 -> 0.027, 14 min on two loaded cores.

The warm-up only teaches the format and when to call; every token a rollout trains on is still the
served model's own sample.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openforgerl.engines.local.smollm2 import TEMPLATE, write_serving_files

TRACES = TEMPLATE.parent / "tool_traces.jsonl"
ORIGINAL_CONTEXT = 8192
ROPE_FACTOR = 4.0
DONE_FILE = "openforgerl_warmup.json"  # written last: a directory without it is an interrupted build


def tools_cache_dir() -> Path:
    return Path(os.environ.get("OPENFORGERL_CACHE", Path.home() / ".cache" / "openforgerl")) / "smollm2-tools"


@dataclass(frozen=True)
class WarmUp:
    seed: int = 0
    layers: int = 4  # top decoder layers trained
    epochs: int = 6
    lr: float = 3e-4
    threads: int = 2
    max_tokens: int = 2048  # longer conversations are skipped


def rope_parameters(theta: float) -> dict[str, Any]:
    return {
        "rope_type": "yarn",
        "factor": ROPE_FACTOR,
        "original_max_position_embeddings": ORIGINAL_CONTEXT,
        "rope_theta": theta,
    }


def load_traces(path: Path = TRACES) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def labelled(chat: Any, conv: dict[str, Any]) -> tuple[list[int], list[bool]]:
    """The conversation's ids as the served template renders them, and which ids are assistant output
    (each assistant turn's text and its `<|im_end|>`; the harness's own history turns included, as the
    template renders them back — the same text a Hermes parse of the model's answer re-renders)."""
    messages, tools = conv["messages"], conv["tools"] or None
    full_msgs = [*messages, {"role": "assistant", "content": conv["answer"]}]
    text = chat.render(full_msgs, tools, add_generation_prompt=False)
    spans: list[tuple[int, int]] = []
    for i, m in enumerate(full_msgs):
        if m.get("role") != "assistant":
            continue
        start = len(chat.render(full_msgs[:i], tools, add_generation_prompt=True))
        end = len(chat.render(full_msgs[: i + 1], tools, add_generation_prompt=False))
        spans.append((start, end - 1))  # up to and including <|im_end|>, not the newline after it
    enc = chat.tokenizer.encode(text, add_special_tokens=False)
    mask = [any(s <= a and b <= e for s, e in spans) and b > a for a, b in enc.offsets]
    return list(enc.ids), mask


def _top_forward(model: Any, hidden: Any, first: int) -> Any:
    """Decoder layers `first`.. and the final norm over frozen-layer outputs
    `hidden` (causal, positions 0..)."""
    import torch

    inner = model.model
    pos = torch.arange(hidden.shape[1]).unsqueeze(0)
    pe = inner.rotary_emb(hidden, pos)
    for layer in inner.layers[first:]:
        hidden = layer(hidden, attention_mask=None, position_ids=pos, position_embeddings=pe)
    return inner.norm(hidden)


def warm_up(model: Any, examples: list[tuple[list[int], list[bool]]], cfg: WarmUp) -> list[float]:
    """Train the top `cfg.layers` layers on the labelled examples; the mean loss per epoch."""
    import torch

    first = model.config.num_hidden_layers - cfg.layers
    for p in model.parameters():
        p.requires_grad_(False)
    params = [p for layer in model.model.layers[first:] for p in layer.parameters()] + list(
        model.model.norm.parameters()
    )
    for p in params:
        p.requires_grad_(True)
    frozen = []
    with torch.no_grad():  # the frozen layers' outputs, once
        for ids, mask in examples:
            out = model.model(torch.tensor([ids]), output_hidden_states=True)
            frozen.append((out.hidden_states[first].detach(), torch.tensor(ids), torch.tensor(mask)))
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(cfg.seed)
    losses = []
    model.train()
    for _ in range(cfg.epochs):
        total = 0.0
        for i in torch.randperm(len(frozen), generator=gen).tolist():
            hidden, ids, mask = frozen[i]
            h = _top_forward(model, hidden, first)[0, :-1]
            sel = mask[1:].nonzero().squeeze(1)  # positions whose next token is assistant output
            logits = model.lm_head(h[sel])
            loss = torch.nn.functional.cross_entropy(logits, ids[1:][sel])
            loss.backward()  # type: ignore[no-untyped-call]
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            opt.zero_grad()
            total += float(loss.detach())
        losses.append(total / max(1, len(frozen)))
    model.eval()
    return losses


def build(base: Path, out: Path, traces: list[dict[str, Any]], cfg: WarmUp) -> dict[str, Any]:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from openforgerl.engines.chat_format import load_chat_format

    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    torch.use_deterministic_algorithms(True)
    config = LlamaConfig.from_pretrained(base)
    if hasattr(config, "quantization_config"):  # the GGUF it was converted from; the weights are plain
        del config.quantization_config
    theta: Any = (config.rope_parameters or {}).get("rope_theta", 100000.0)
    config.rope_parameters = rope_parameters(float(theta))
    config.max_position_embeddings = int(ORIGINAL_CONTEXT * ROPE_FACTOR)
    model = LlamaForCausalLM.from_pretrained(base, config=config, dtype=torch.float32)
    chat = load_chat_format(base)
    examples = [ex for conv in traces if len((ex := labelled(chat, conv))[0]) <= cfg.max_tokens]
    losses = warm_up(model, examples, cfg)
    model.save_pretrained(out, safe_serialization=True)
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "special_tokens_map.json",
        "generation_config.json",
    ):
        if (base / name).exists():
            shutil.copy(base / name, out / name)
    write_serving_files(out)
    return {
        "seed": cfg.seed,
        "layers": cfg.layers,
        "epochs": cfg.epochs,
        "lr": cfg.lr,
        "conversations": len(examples),
        "tokens": sum(len(ids) for ids, _ in examples),
        "assistant_tokens": sum(sum(m) for _, m in examples),
        "epoch_loss": [round(x, 4) for x in losses],
    }


def ensure_smollm2_tools_dir(*, rebuild: bool = False, cfg: WarmUp | None = None) -> Path:
    from openforgerl.engines.local.smollm2 import ensure_smollm2_dir

    out = tools_cache_dir()
    if (out / DONE_FILE).exists() and not rebuild:
        write_serving_files(out)
        return out
    base = ensure_smollm2_dir()
    out.parent.mkdir(parents=True, exist_ok=True)
    cfg = cfg or WarmUp()
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        info = build(base, Path(tmp), load_traces(), cfg)
        (Path(tmp) / DONE_FILE).write_text(json.dumps(info, indent=2) + "\n")
        if out.exists():
            shutil.rmtree(out)
        Path(tmp).rename(out)
        Path(tmp).mkdir()  # TemporaryDirectory removes it on exit
    return out


if __name__ == "__main__":  # `python -m openforgerl.engines.local.smollm2_tools`: build now
    print(ensure_smollm2_tools_dir())
