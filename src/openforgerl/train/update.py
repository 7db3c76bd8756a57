"""A GRPO update on reconstructed samples: one optimizer step per pass over the batch, `epochs` passes
(torch; no I/O).

The batch's per-token weights are computed over the whole step (every rollout's trained tokens sum to
1 / num_rollouts), then the step is split into micro-batches whose gradients accumulate, so the
result does not depend on the micro-batch size.

A vision-language policy (`vision` given: a sample -> its processed images) is scored sample by sample
with its pixels and grids (`policy.vision_response_logprobs`), so the vision tower gets gradients too.
Every update also measures how far the trainer's logprobs (before the step) are from the ones the
engine recorded on the same tokens (`logprob_diff_max` / `_mean` over trained tokens): at step 0 they
are the same weights, so the difference must be numerical noise (`logprob_check`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from openforgerl.records import Sample
from openforgerl.train.grpo import clipped_policy_loss, k3_kl, per_rollout_token_weights
from openforgerl.train.policy import (
    TokenBatch,
    VisionInputs,
    collate,
    response_logprobs,
    vision_response_logprobs,
)


@dataclass(frozen=True)
class UpdateSettings:
    clip_low: float = 0.2
    clip_high: float = 0.28
    kl_coef: float = 0.0
    micro_batch: int = 16
    max_grad_norm: float = 1.0
    epochs: int = 1
    """Optimizer steps over each step's batch, at least 1 (veRL's `ppo_epochs`). The old logprobs stay the
    engine's, so from the second pass on the clipped ratio bounds how far the policy moves on those
    samples."""


@dataclass(frozen=True)
class UpdateStats:
    loss: float
    grad_norm: float
    clip_frac: float
    kl: float
    trained_tokens: int
    samples: int
    logprob_diff_max: float = 0.0
    """max |trainer - engine| logprob over trained tokens, before the step (0 at step 0 up to noise)."""
    logprob_diff_mean: float = 0.0


@dataclass(frozen=True)
class LogprobCheck:
    """Step-0 check: the trainer's recomputed logprobs match the engine's on the same tokens."""

    max_diff: float
    mean_diff: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return self.max_diff <= self.tolerance

    def as_row(self) -> dict[str, float | bool]:
        return {
            "step0_logprob_max_diff": self.max_diff,
            "step0_logprob_mean_diff": self.mean_diff,
            "step0_logprob_check": self.passed,
        }


def logprob_check(stats: UpdateStats, tolerance: float) -> LogprobCheck:
    return LogprobCheck(stats.logprob_diff_max, stats.logprob_diff_mean, tolerance)


def trainable_samples(samples: Sequence[Sample], advantages: Mapping[str, float]) -> list[Sample]:
    """Only samples of rollouts that got an advantage (valid, in-batch) and have a trained token."""
    return [s for s in samples if s.rollout_id in advantages and any(s.response_mask)]


def grpo_update(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    samples: Sequence[Sample],
    advantages: Mapping[str, float],
    settings: UpdateSettings,
    *,
    ref_model: torch.nn.Module | None = None,
    pad_id: int = 0,
    vision: VisionInputs | None = None,
) -> UpdateStats:
    rows = trainable_samples(samples, advantages)
    if not rows:
        return UpdateStats(0.0, 0.0, 0.0, 0.0, 0, 0)
    device = next(model.parameters()).device
    full_mask = collate(rows, pad_id).response_mask
    weights = per_rollout_token_weights([s.rollout_id for s in rows], full_mask).to(device)
    model.train()
    passes = [
        _one_pass(model, optimizer, rows, full_mask, weights, advantages, settings, ref_model, pad_id, vision)
        for _ in range(settings.epochs)
    ]
    model.eval()
    # the first pass's figures (its logprob difference is measured before any step: the step-0 check)
    # with the last pass's clip fraction (how much of the batch the ratio bound stopped)
    return dataclasses.replace(passes[0], clip_frac=passes[-1].clip_frac)


def _one_pass(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    rows: Sequence[Sample],
    full_mask: torch.Tensor,
    weights: torch.Tensor,
    advantages: Mapping[str, float],
    settings: UpdateSettings,
    ref_model: torch.nn.Module | None,
    pad_id: int,
    vision: VisionInputs | None,
) -> UpdateStats:
    """One optimizer step over the whole batch, its gradient accumulated over micro-batches."""
    device = weights.device
    optimizer.zero_grad(set_to_none=True)
    total_loss = clip_sum = kl_sum = diff_max = diff_sum = 0.0
    for start in range(0, len(rows), settings.micro_batch):
        part = rows[start : start + settings.micro_batch]
        batch = collate(part, pad_id).to(device)
        w = weights[start : start + len(part), : batch.response_mask.shape[1]]
        adv = torch.tensor([advantages[s.rollout_id] for s in part], device=device)[:, None]
        adv = adv.expand_as(batch.response_mask)
        logp = _logprobs(model, part, batch, vision)
        with torch.no_grad():
            diff = (logp.detach() - batch.old_logprobs).abs() * batch.response_mask
            diff_max = max(diff_max, float(diff.max()))
            diff_sum += float(diff.sum())
        loss, stats = clipped_policy_loss(
            logp,
            batch.old_logprobs,
            adv,
            batch.response_mask,
            w,
            clip_low=settings.clip_low,
            clip_high=settings.clip_high,
        )
        if ref_model is not None and settings.kl_coef > 0:
            with torch.no_grad():
                ref_logp = _logprobs(ref_model, part, batch, vision)
            kl = (k3_kl(logp, ref_logp) * batch.response_mask * w).sum()
            loss = loss + settings.kl_coef * kl
            kl_sum += float(kl)
        loss.backward()  # type: ignore[no-untyped-call]
        total_loss += float(loss.detach())
        clip_sum += stats["clip_frac"] * len(part)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), settings.max_grad_norm)
    optimizer.step()
    return UpdateStats(
        loss=total_loss,
        grad_norm=float(grad_norm),
        clip_frac=clip_sum / len(rows),
        kl=kl_sum,
        trained_tokens=int(full_mask.sum()),
        samples=len(rows),
        logprob_diff_max=diff_max,
        logprob_diff_mean=diff_sum / max(float(full_mask.sum()), 1.0),
    )


def _logprobs(
    model: torch.nn.Module, part: Sequence[Sample], batch: TokenBatch, vision: VisionInputs | None
) -> torch.Tensor:
    if vision is None:
        return response_logprobs(model, batch)
    return vision_response_logprobs(model, part, vision, batch.response_mask.shape[1])
