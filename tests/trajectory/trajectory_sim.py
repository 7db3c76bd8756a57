"""A conversation simulator that produces CallRecords the way a harness + gateway would.

Messages render to token segments ``[ROLE, *content, END]``; a call's prompt ids are the rendered
history plus the generation prompt, its completion ids are drawn at random (the model's decision),
with random logprobs. Drift is what real harnesses do (reference/harnesses.md §4): re-serialize an
earlier assistant message, move an ephemeral context message to the end, compact the history,
spawn sub-agents, send side calls, have calls fail. The invariant checker is shared with the
gateway-traffic tests.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from openforgerl.records import CallError, CallErrorKind, CallRecord, Sample, WireProtocol

SYS, USER, ASSISTANT, TOOL, END, GEN, SUMMARY = 1, 2, 3, 4, 5, 6, 7
VOCAB = range(10, 60)  # small on purpose: random collisions must not fool reconstruction


def segment(role: int, content: Sequence[int]) -> list[int]:
    return [role, *content, END]


@dataclass
class Agent:
    agent_id: str | None
    parent: str | None
    history: list[list[int]]
    ephemeral: list[int] | None = None


@dataclass
class Simulator:
    rng: random.Random
    rollout_id: str = "r0"
    calls: list[CallRecord] = field(default_factory=list)

    def content(self, lo: int = 1, hi: int = 8) -> list[int]:
        return [self.rng.choice(VOCAB) for _ in range(self.rng.randint(lo, hi))]

    def new_agent(self, agent_id: str | None, parent: str | None = None) -> Agent:
        history = [segment(SYS, self.content(16, 24)), segment(USER, self.content())]
        return Agent(agent_id, parent, history)

    def prompt(self, agent: Agent) -> list[int]:
        ids = [t for seg in agent.history for t in seg]
        if agent.ephemeral is not None:
            ids += segment(USER, agent.ephemeral)
        return [*ids, ASSISTANT]

    def call(
        self,
        agent: Agent,
        *,
        side: bool = False,
        error: bool = False,
        version: int = 0,
        prompt: list[int] | None = None,
    ) -> CallRecord:
        """One model call by ``agent``; ``prompt`` overrides its rendered history (an unflagged side call)."""
        completion = [*self.content(1, 6), END]
        rec = CallRecord(
            rollout_id=self.rollout_id,
            index=len(self.calls),
            protocol=WireProtocol.CHAT,
            prompt_token_ids=prompt if prompt is not None else self.prompt(agent),
            completion_token_ids=completion,
            completion_logprobs=[-self.rng.random() for _ in completion],
            policy_version=version,
            side_call=side,
            error=CallError(kind=CallErrorKind.CLIENT_DISCONNECTED, message="gone") if error else None,
            agent_id=agent.agent_id,
            parent_agent_id=agent.parent,
        )
        self.calls.append(rec)
        return rec

    def answer(self, agent: Agent, rec: CallRecord, *, reserialize: bool = False) -> None:
        """The harness appends the assistant message and a tool result to its history."""
        body = rec.completion_token_ids[:-1]
        if reserialize:
            body = self.content(1, 6)
        agent.history.append([ASSISTANT, *body, END])
        agent.history.append(segment(TOOL, self.content()))

    def rewrite_old_message(self, agent: Agent) -> None:
        i = self.rng.randrange(1, len(agent.history))
        agent.history[i] = [agent.history[i][0], *self.content(), END]

    def compact(self, agent: Agent) -> None:
        agent.history = [agent.history[0], segment(USER, [SUMMARY, *self.content(1, 3)])]


def trainable(call: CallRecord) -> bool:
    return call.trainable and len(call.completion_logprobs) == len(call.completion_token_ids)


def check_invariants(calls: Sequence[CallRecord], samples: Sequence[Sample]) -> None:
    """Each sampled token exactly once with mask 1 and its logprob; nothing else has mask 1; each
    merged call's prompt ids are reproduced exactly by its chain's prompt+response ids."""
    by_index = {c.index: c for c in calls}
    seen: list[int] = []
    for sample in samples:
        assert len(sample.response_ids) == len(sample.response_mask) == len(sample.response_logprobs)
        seen += _check_chain(sample, [by_index[i] for i in sample.extra_fields["call_indices"]])
    assert sorted(seen) == sorted(c.index for c in calls if trainable(c)), "each trainable call exactly once"


def _check_chain(sample: Sample, chain_calls: list[CallRecord]) -> list[int]:
    full = sample.prompt_ids + sample.response_ids
    offset = len(sample.prompt_ids)
    mask = [0] * offset + sample.response_mask
    logprobs = [0.0] * offset + sample.response_logprobs
    expected_mask = [0] * len(full)
    for call in chain_calls:
        start, comp = len(call.prompt_token_ids), call.completion_token_ids
        assert full[:start] == call.prompt_token_ids, f"call {call.index}: prompt not reproduced"
        assert full[start : start + len(comp)] == comp, f"call {call.index}: completion moved"
        assert logprobs[start : start + len(comp)] == call.completion_logprobs
        expected_mask[start : start + len(comp)] = [1] * len(comp)
    assert start + len(comp) == len(full), "chain ends with its last call's completion"
    assert mask == expected_mask, "mask 1 exactly on sampled tokens"
    assert all(lp == 0.0 for lp, m in zip(logprobs, mask, strict=True) if m == 0)
    return [c.index for c in chain_calls]
