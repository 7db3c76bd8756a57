"""Throughput of one GRPO training step: forward + backward + AdamW through
`openforgerl.train.update.grpo_update`.

Synthetic `Sample`s (random token ids, a realistic mix of sampled tokens and mask-0 tool/template tokens,
recorded logprobs, GRPO groups of `--group` rollouts) on a randomly initialised causal LM:
- default (GPU): a Qwen3-0.6B-shaped model (28 layers, hidden 1024, GQA 16/8 heads, vocab 151,936,
  tied embeddings), bf16 weights and AdamW states, SDPA attention;
- `--quick` (CPU): a small fp32 shape, for this 2-core machine and CI.
Prints tokens/s (every non-pad position is forwarded and backpropagated) and trained tokens/s (mask 1),
and on GPU the MFU: 6 * N * tokens / step time / peak, with N the parameters that take part in matmuls
(all parameters; the tied embedding counted once, as the LM head) and the bf16 dense peak looked up by
device name (override with `--peak-tflops`). Attention's own FLOPs (quadratic in length) are not in
6N, so MFU is slightly understated at long lengths. Runs in well under five minutes on one H100/H200.

    python benchmarks/train_step.py --quick          # CPU
    python benchmarks/train_step.py                  # GPU, Qwen3-0.6B shape
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass

import torch

from openforgerl.records import Sample
from openforgerl.train.update import UpdateSettings, grpo_update

PEAK_BF16_TFLOPS = {  # dense, no sparsity
    "H200": 989.0,
    "H100": 989.0,  # SXM; PCIe is lower, see below
    "H100 PCIE": 756.0,
    "H800": 989.0,
    "A100": 312.0,
    "A800": 312.0,
    "L40S": 362.0,
    "B200": 2250.0,
}


@dataclass(frozen=True)
class Shape:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int


QWEN3_06B = Shape(
    hidden=1024, intermediate=3072, layers=28, heads=16, kv_heads=8, head_dim=128, vocab=151_936
)
QUICK = Shape(hidden=256, intermediate=768, layers=4, heads=4, kv_heads=2, head_dim=64, vocab=8_192)


def build_model(shape: Shape, dtype: torch.dtype, device: str) -> torch.nn.Module:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    cfg = Qwen3Config(
        vocab_size=shape.vocab,
        hidden_size=shape.hidden,
        intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim,
        tie_word_embeddings=True,
        max_position_embeddings=32_768,
        attn_implementation="sdpa",
    )
    with torch.device(device):
        model = Qwen3ForCausalLM(cfg)
    return model.to(dtype).eval()


def synthetic_samples(
    n: int, group: int, prompt_len: int, response_len: int, vocab: int, seed: int = 0
) -> tuple[list[Sample], dict[str, float]]:
    """`n` samples in groups of `group`; responses alternate sampled turns
    (mask 1) and tool output (mask 0)."""
    rng = random.Random(seed)
    samples, advantages = [], {}
    for i in range(n):
        mask = _turn_mask(rng, response_len)
        ids = [rng.randrange(vocab) for _ in range(prompt_len + response_len)]
        lps = [-rng.random() * 3 if m else 0.0 for m in mask]
        rid = f"r{i}"
        samples.append(
            Sample(
                prompt_ids=ids[:prompt_len],
                response_ids=ids[prompt_len:],
                response_mask=mask,
                response_logprobs=lps,
                rollout_id=rid,
                group_id=f"g{i // group}",
                reward_score=1.0,
            )
        )
        advantages[rid] = rng.choice([-1.0, 1.0]) * rng.random()
    return samples, advantages


def _turn_mask(rng: random.Random, length: int) -> list[int]:
    mask: list[int] = []
    sampled = True
    while len(mask) < length:
        run = rng.randint(32, 256) if sampled else rng.randint(16, 96)
        mask.extend([int(sampled)] * run)
        sampled = not sampled
    mask = mask[:length]
    mask[0] = 1
    return mask


def matmul_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())  # tied embedding counted once (as the LM head)


def peak_tflops(device_name: str) -> float | None:
    name = device_name.upper()
    for key in sorted(PEAK_BF16_TFLOPS, key=len, reverse=True):
        if key in name:
            return PEAK_BF16_TFLOPS[key]
    return None


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def run(args: argparse.Namespace) -> dict[str, object]:
    device = "cuda" if (args.device == "auto" and torch.cuda.is_available()) else args.device
    device = "cpu" if device == "auto" else device
    shape = QUICK if args.quick else QWEN3_06B
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    torch.manual_seed(0)
    model = build_model(shape, dtype, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=device == "cuda")
    samples, adv = synthetic_samples(
        args.samples, args.group, args.prompt_len, args.response_len, shape.vocab
    )
    settings = UpdateSettings(micro_batch=args.micro_batch)
    # grpo_update builds its batch tensors with default factory calls: make them land on the model's device.
    if device != "cpu":  # (a default-device mode costs every op a Python hook: not on CPU)
        torch.set_default_device(device)
    times = []
    for step in range(args.warmup + args.steps):
        _sync(device)
        t0 = time.perf_counter()
        stats = grpo_update(model, opt, samples, adv, settings)
        _sync(device)
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
    torch.set_default_device(None)
    step_s = sorted(times)[len(times) // 2]
    tokens = sum(len(s.prompt_ids) + len(s.response_ids) for s in samples)
    n_params = matmul_params(model)
    result: dict[str, object] = {
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "shape": "quick" if args.quick else "qwen3-0.6b",
        "params": n_params,
        "dtype": str(dtype),
        "samples": len(samples),
        "tokens_per_step": tokens,
        "trained_tokens_per_step": stats.trained_tokens,
        "step_s_median": round(step_s, 4),
        "tokens_per_s": round(tokens / step_s, 1),
        "trained_tokens_per_s": round(stats.trained_tokens / step_s, 1),
    }
    if device == "cuda":
        peak = args.peak_tflops or peak_tflops(str(result["device"]))
        achieved = 6 * n_params * tokens / step_s / 1e12
        result.update(
            achieved_tflops=round(achieved, 1),
            peak_tflops=peak,
            mfu=None if peak is None else round(achieved / peak, 4),
            max_memory_gib=round(torch.cuda.max_memory_allocated() / 2**30, 1),
        )
    return result


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small fp32 shape on CPU")
    p.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    p.add_argument("--samples", type=int, default=None)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--prompt-len", type=int, default=None)
    p.add_argument("--response-len", type=int, default=None)
    p.add_argument("--micro-batch", type=int, default=None)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--peak-tflops", type=float, default=None)
    args = p.parse_args(argv)
    if args.quick and args.device == "auto":
        args.device = "cpu"
    defaults = (8, 128, 256, 4, 2) if args.quick else (32, 1024, 1024, 4, 5)
    for name, value in zip(
        ("samples", "prompt_len", "response_len", "micro_batch", "steps"), defaults, strict=True
    ):
        if getattr(args, name) is None:
            setattr(args, name, value)
    result = run(args)
    print(
        f"train step [{result['shape']} on {result['device']}]: {result['tokens_per_s']:,} tokens/s "
        f"({result['trained_tokens_per_s']:,} trained tokens/s), median step {result['step_s_median']} s"
        + (f", MFU {result['mfu']:.1%}" if result.get("mfu") is not None else "")
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main()
