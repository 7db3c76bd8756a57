"""Group one rollout's calls into chains (per agent), recording why each new chain started."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from openforgerl.records import CallRecord
from openforgerl.trajectory.breaks import BreakCause, BreakEvent, ExcludeCause, classify_break, closest_chain
from openforgerl.trajectory.chains import Chain, find_extended
from openforgerl.trajectory.images import call_images, image_keys
from openforgerl.trajectory.options import OverflowPolicy, ReconstructionOptions

_CLASSIFY_AGAINST = 4
"""A break is classified against the closest of the agent's most recently used chains."""


@dataclass(frozen=True, slots=True)
class ChainBuild:
    chains: tuple[Chain, ...]
    breaks: tuple[BreakEvent, ...]
    excluded: dict[str, int]
    merged_calls: int
    main_agent: str | None
    agents: int


def exclude_cause(call: CallRecord) -> ExcludeCause | None:
    """Why a call is not trained at all (None: it is trainable)."""
    if call.side_call:
        return ExcludeCause.SIDE_CALL
    if call.error is not None:
        return ExcludeCause.ERROR
    if not call.completion_token_ids or not call.prompt_token_ids:
        return ExcludeCause.EMPTY
    if len(call.completion_logprobs) != len(call.completion_token_ids):
        return ExcludeCause.BAD_LOGPROBS
    return None


def main_agent(calls: Sequence[CallRecord]) -> str | None:
    """The agent of the first top-level call (no parent), else of the first call."""
    for call in calls:
        if call.parent_agent_id is None:
            return call.agent_id
    return calls[0].agent_id if calls else None


def build_chains(calls: Sequence[CallRecord], options: ReconstructionOptions) -> ChainBuild:
    """Chains in creation order; ``calls`` must be sorted by index."""
    excluded: Counter[str] = Counter()
    trainable = []
    for call in calls:
        cause = exclude_cause(call)
        if cause is None:
            trainable.append(call)
        else:
            excluded[cause.value] += 1
    builder = _Builder(options, main_agent(trainable))
    for call in trainable:
        builder.add(call)
    return builder.finish(dict(excluded))


class _Builder:
    """Mutable state of one pass over the calls; per agent, chains kept most-recently-used last."""

    def __init__(self, options: ReconstructionOptions, main: str | None) -> None:
        self.options = options
        self.main = main
        self.chains: list[Chain] = []
        self.by_agent: dict[str | None, list[Chain]] = {}
        self.breaks: list[BreakEvent] = []
        self.merged = 0

    def add(self, call: CallRecord) -> None:
        agent = call.agent_id
        recent = self.by_agent.setdefault(agent, [])
        keys = image_keys(call_images(call))
        chain = find_extended(recent, call.prompt_token_ids, keys)
        if chain is not None and not self._overflows(chain, call):
            chain.append(call)
            self.merged += 1
            _touch(recent, chain)
            return
        event = self._break_event(call, keys, recent, overflow=chain)
        if event is not None:
            self.breaks.append(event)
        new = Chain.start(len(self.chains), agent, call, event)
        self.chains.append(new)
        recent.append(new)

    def _overflows(self, chain: Chain, call: CallRecord) -> bool:
        limit = self.options.max_response_len
        if self.options.overflow is not OverflowPolicy.SPLIT or limit is None:
            return False
        return chain.merged_response_len(call) > limit

    def _break_event(
        self, call: CallRecord, keys: tuple[str, ...], recent: list[Chain], overflow: Chain | None
    ) -> BreakEvent | None:
        prompt = call.prompt_token_ids
        if not recent:
            if call.agent_id == self.main:
                return None
            return BreakEvent(call.index, call.agent_id, BreakCause.SUB_AGENT, len(prompt), 0, 0, False)
        if overflow is not None:
            n = len(overflow.tokens)
            return BreakEvent(call.index, call.agent_id, BreakCause.LENGTH, len(prompt), n, n, False)
        ref, cpl = closest_chain(prompt, recent[-_CLASSIFY_AGAINST:])
        cause, at_sampled = classify_break(
            prompt,
            ref,
            cpl,
            compaction_ratio=self.options.compaction_ratio,
            related_prefix_tokens=self.options.related_prefix_tokens,
            image_keys=keys,
        )
        return BreakEvent(call.index, call.agent_id, cause, len(prompt), len(ref.tokens), cpl, at_sampled)

    def finish(self, excluded: dict[str, int]) -> ChainBuild:
        return ChainBuild(
            chains=tuple(self.chains),
            breaks=tuple(self.breaks),
            excluded=excluded,
            merged_calls=self.merged,
            main_agent=self.main,
            agents=len(self.by_agent),
        )


def _touch(recent: list[Chain], chain: Chain) -> None:
    if recent[-1] is not chain:
        recent.remove(chain)
        recent.append(chain)
