"""Trajectory reconstruction throughput (tokens/s on one core).

Workload (the README's figure): 1,000 rollouts x 40 calls, prompts averaging 8k tokens, append-only
histories with small gaps (tool output / template glue) between calls. Token ids are fresh Python
ints per call, as after JSON decoding of a call log, so list compares do real work. ``tokens`` =
prompt + completion tokens of every call (what the engine processed), i.e. what reconstruction reads.

    python benchmarks/reconstruct.py            # full: 1,000 rollouts
    python benchmarks/reconstruct.py --quick    # 50 rollouts
"""

from __future__ import annotations

import argparse
import random
import time

import orjson

from openforgerl.records import CallRecord, RolloutRecord, RolloutStatus, WireProtocol
from openforgerl.trajectory import reconstruct_samples


def synth_rollout(
    rng: random.Random, rid: str, calls: int, mean_prompt: int, completion: int, gap: int, moved: int = 0
) -> list[CallRecord]:
    """``moved`` > 0: an ephemeral context message of that many tokens sits at the end of every
    prompt and changes each call (OpenClaw), so every call breaks the prefix and starts a chain."""
    step = completion + gap
    history = [rng.randrange(150_000) for _ in range(mean_prompt - (calls // 2) * step)]
    out = []
    for i in range(calls):
        comp = [rng.randrange(150_000) for _ in range(completion)]
        out.append(
            CallRecord.model_construct(
                rollout_id=rid,
                index=i,
                protocol=WireProtocol.CHAT,
                prompt_token_ids=_fresh(history + [rng.randrange(150_000) for _ in range(moved)]),
                completion_token_ids=comp,
                completion_logprobs=[-rng.random() for _ in comp],
                policy_version=0,
                side_call=False,
                error=None,
                agent_id=None,
                parent_agent_id=None,
            )
        )
        history = (
            history + comp + [rng.randrange(150_000) for _ in range(rng.randint(gap // 2, gap * 3 // 2))]
        )
    return out


def _fresh(ids: list[int]) -> list[int]:
    """New int objects, as a JSON decoder would produce (no identity shortcut in compares)."""
    return orjson.loads(orjson.dumps(ids))


def run(
    rollouts: int, distinct: int, calls: int, mean_prompt: int, completion: int, gap: int, moved: int = 0
) -> dict[str, float]:
    rng = random.Random(0)
    pool = [synth_rollout(rng, f"r{i}", calls, mean_prompt, completion, gap, moved) for i in range(distinct)]
    meta = RolloutRecord(rollout_id="r", status=RolloutStatus.OK, reward=1.0, harness="bench")
    tokens = chains = 0
    t0 = time.process_time()
    for i in range(rollouts):
        result = reconstruct_samples(pool[i % distinct], meta)
        tokens += result.metrics.tokens_seen
        chains += result.metrics.chains
    cpu = time.process_time() - t0
    expected = rollouts * (calls if moved else 1)
    assert chains == expected, f"expected {expected} chains, got {chains}"
    return {
        "rollouts": rollouts,
        "calls": rollouts * calls,
        "tokens": tokens,
        "cpu_s": cpu,
        "tokens_per_s": tokens / cpu,
        "calls_per_s": rollouts * calls / cpu,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="50 rollouts instead of 1,000")
    ap.add_argument("--rollouts", type=int, default=1000)
    ap.add_argument("--distinct", type=int, default=8, help="distinct synthetic rollouts cycled through")
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--mean-prompt", type=int, default=8192)
    ap.add_argument("--completion", type=int, default=100)
    ap.add_argument("--gap", type=int, default=50)
    ap.add_argument(
        "--moved-context", type=int, default=0, help="tokens of a per-call moved message (OpenClaw)"
    )
    args = ap.parse_args()
    n = 50 if args.quick else args.rollouts
    r = run(
        n, min(args.distinct, n), args.calls, args.mean_prompt, args.completion, args.gap, args.moved_context
    )
    print(
        f"reconstruct{' (moved context: every call forks)' if args.moved_context else ''}: "
        f"{r['rollouts']} rollouts x {args.calls} calls, mean prompt {args.mean_prompt} tokens: "
        f"{r['tokens'] / 1e6:.1f} M tokens in {r['cpu_s']:.2f} s CPU -> "
        f"{r['tokens_per_s'] / 1e6:.1f} M tokens/s/core ({r['calls_per_s']:.0f} calls/s)"
    )


if __name__ == "__main__":
    main()
