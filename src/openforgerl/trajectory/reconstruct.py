"""Calls of one rollout -> training samples (pure; no I/O).

Rule for rewards and groups (documented contract, see README "Trajectory reconstruction"):
- The **final chain** is the main agent's chain holding its last trainable call. It is emitted last
  (veRL V1: the last output of a session carries the reward and alone enters GRPO group statistics).
- **Every chain gets the rollout's reward** (``reward_score``), so every chain shares the rollout's
  advantage; only the final chain should enter group statistics (``is_final_chain``).
- **Per-rollout loss weight** ``weight = 1 / number of samples`` of the rollout, so a rollout that
  split into many chains gets no extra weight in the loss.
- Only a rollout that passes ``trainable.untrainable_reason`` (the one rule export, the trainer and
  the veRL loop share: not infra, in the batch, a valid group, a reward) produces samples; any other
  gives **no samples** and that reason as ``dropped_reason``. An infra-tainted rollout is dropped from
  its group, never trained as reward 0.

Images (``images.py``): a sample carries its chain's images in pad-run order as
``multi_modal_data = {"images": [ImageRef dict, ...]}`` (``sha256``, ``media_type``, ``width``,
``height``, ``grid_thw``, ``tokens``: references, never pixels; export turns them into what its
consumer wants) and the engine's processor identity in ``extra_fields["image_processor"]``. A text
sample has ``multi_modal_data == {}``. A sample whose ``<|image_pad|>`` count disagrees with its images'
token counts drops the whole rollout with reason ``image_tokens_mismatch (...)``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from openforgerl.records import CallRecord, RolloutRecord, Sample
from openforgerl.trajectory.building import ChainBuild, build_chains
from openforgerl.trajectory.chains import Chain
from openforgerl.trajectory.fitting import FittedChain, fit_chain
from openforgerl.trajectory.images import image_token_id, pad_mismatch
from openforgerl.trajectory.metrics import RolloutMetrics
from openforgerl.trajectory.options import ReconstructionOptions
from openforgerl.trajectory.trainable import untrainable_reason

DEFAULT_OPTIONS = ReconstructionOptions()


@dataclass(frozen=True, slots=True)
class ReconstructionResult:
    rollout_id: str
    samples: tuple[Sample, ...]
    """Final chain last; empty when the rollout is dropped."""
    metrics: RolloutMetrics
    dropped_reason: str | None = None

    @property
    def final_sample(self) -> Sample | None:
        return self.samples[-1] if self.samples else None


def reconstruct_samples(
    calls: Sequence[CallRecord],
    rollout: RolloutRecord,
    *,
    options: ReconstructionOptions = DEFAULT_OPTIONS,
) -> ReconstructionResult:
    """Turn one rollout's calls (any order) into chains and samples, with metrics."""
    ordered = sorted(calls, key=lambda c: c.index)
    reason = untrainable_reason(rollout, ordered)
    if reason is not None:
        return _dropped(ordered, rollout, reason)
    build = build_chains(ordered, options)
    if not build.chains:
        return _dropped(ordered, rollout, "no_trainable_calls", build)
    return _emit(ordered, rollout, build, options)


def _dropped(
    calls: Sequence[CallRecord], rollout: RolloutRecord, reason: str, build: ChainBuild | None = None
) -> ReconstructionResult:
    metrics = RolloutMetrics(
        rollout_id=rollout.rollout_id,
        harness=rollout.harness,
        calls=len(calls),
        excluded=build.excluded if build else {},
        dropped_reason=reason,
    )
    return ReconstructionResult(rollout.rollout_id, (), metrics, reason)


def _emit(
    calls: Sequence[CallRecord], rollout: RolloutRecord, build: ChainBuild, options: ReconstructionOptions
) -> ReconstructionResult:
    fitted = [(chain, fit_chain(chain, options)) for chain in build.chains]
    kept = [(c, f) for c, f in fitted if not f.dropped]
    final = _final_chain([c for c, _ in kept], build.main_agent)
    ordered = [(c, f) for c, f in kept if c is not final] + [(c, f) for c, f in kept if c is final]
    weight = 1.0 / len(ordered) if ordered else 0.0
    samples = tuple(_sample(c, f, rollout, c is final, weight) for c, f in ordered)
    mismatch = _image_mismatch(ordered, options)
    if mismatch is not None:
        return _dropped(calls, rollout, mismatch, build)
    metrics = _metrics(calls, rollout, build, fitted, samples)
    reason = None if samples else "all_chains_dropped"
    return ReconstructionResult(rollout.rollout_id, samples, metrics, reason)


def _image_mismatch(chains: list[tuple[Chain, FittedChain]], options: ReconstructionOptions) -> str | None:
    """The first chain whose pad count disagrees with its images, as a drop reason."""
    for chain, fit in chains:
        token = image_token_id(chain.processor, options.image_token_id)
        problem = pad_mismatch(fit.prompt_ids + fit.response_ids, chain.images, token, chain.processor)
        if problem is not None:
            return f"image_tokens_mismatch (chain {chain.index}: {problem})"
    return None


def _final_chain(chains: list[Chain], main: str | None) -> Chain | None:
    """The main agent's chain holding its latest call (any chain if no main-agent chain is left)."""
    main_chains = [c for c in chains if c.agent == main] or chains
    return max(main_chains, key=lambda c: c.call_indices[-1], default=None)


def _sample(chain: Chain, fit: FittedChain, rollout: RolloutRecord, is_final: bool, weight: float) -> Sample:
    return Sample.model_construct(
        prompt_ids=fit.prompt_ids,
        response_ids=fit.response_ids,
        response_mask=fit.response_mask,
        response_logprobs=fit.response_logprobs,
        multi_modal_data={"images": [dict(i) for i in chain.images]} if chain.images else {},
        reward_score=rollout.reward,
        num_turns=len(chain.call_indices),
        rollout_id=rollout.rollout_id,
        group_id=rollout.group_id,
        chain_index=chain.index,
        is_final_chain=is_final,
        weight=weight,
        harness=rollout.harness,
        task_id=rollout.task_id,
        agent_id=chain.agent,
        policy_version_min=chain.version_min,
        policy_version_max=chain.version_max,
        status=rollout.status.value if rollout.status is not None else None,
        extra_fields={
            "call_indices": list(chain.call_indices),
            "started_by": chain.started_by.label if chain.started_by else None,
            "prompt_tokens_truncated": fit.prompt_tokens_truncated,
            "sampled_tokens_truncated": fit.sampled_tokens_truncated,
            "reward_components": dict(rollout.reward_components),
            **({"image_processor": dict(chain.processor)} if chain.processor else {}),
        },
    )


def _metrics(
    calls: Sequence[CallRecord],
    rollout: RolloutRecord,
    build: ChainBuild,
    fitted: list[tuple[Chain, FittedChain]],
    samples: tuple[Sample, ...],
) -> RolloutMetrics:
    fits = [f for _, f in fitted]
    return RolloutMetrics(
        rollout_id=rollout.rollout_id,
        harness=rollout.harness,
        calls=len(calls),
        trainable_calls=sum(len(c.call_indices) for c, _ in fitted),
        chains=len(build.chains),
        agents=build.agents,
        merged_calls=build.merged_calls,
        tokens_seen=sum(c.tokens_seen for c, _ in fitted),
        tokens_in_samples=sum(len(s.prompt_ids) + len(s.response_ids) for s in samples),
        tokens_trained=sum(sum(s.response_mask) for s in samples),
        tokens_sampled=sum(sum(c.mask) for c, _ in fitted),
        sampled_tokens_truncated=sum(f.sampled_tokens_truncated for f in fits),
        sampled_tokens_dropped=sum(f.sampled_tokens_dropped for f in fits),
        prompt_tokens_truncated=sum(f.prompt_tokens_truncated for f in fits),
        chains_truncated=sum(f.truncated for f in fits),
        chains_dropped=sum(f.dropped for f in fits),
        images_in_samples=sum(len(s.multi_modal_data.get("images", ())) for s in samples),
        break_causes=dict(Counter(b.label for b in build.breaks)),
        excluded=build.excluded,
    )
