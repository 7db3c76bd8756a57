"""A screenshot-taking harness as the gateway records it: expanded pad runs plus ``ImageRef``s.

Each observation is ``[USER, VS, PAD * tokens, VE, *text, END]`` with one screenshot; the call's
``images`` list every screenshot still in the history, in order. ``prune`` drops the oldest
screenshot from the history (what a last-N-images harness does), ``swap`` replaces the newest with a
different image of the same size (same ids, other pixels).
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

from openforgerl.records import CallRecord, ImageRef, RolloutRecord, RolloutStatus, WireProtocol

SYS, USER, ASSISTANT, END = 1, 2, 3, 5
VS, VE, PAD = 4102, 4103, 4104
PROCESSOR = {"image_processor": "Qwen2VLImageProcessorPil", "merge_size": 2, "image_token_id": PAD}


def image(n: int, tokens: int = 4) -> ImageRef:
    return ImageRef(
        sha256=hashlib.sha256(str(n).encode()).hexdigest(),
        media_type="image/png",
        width=32 * tokens,
        height=32,
        grid_thw=[1, 2, 2 * tokens],
        tokens=tokens,
    )


def rollout(reward: float = 1.0) -> RolloutRecord:
    return RolloutRecord(
        rollout_id="r0",
        harness="gui",
        group_id="g",
        status=RolloutStatus.OK,
        reward=reward,
        in_batch=True,
        group_valid=True,
    )


@dataclass
class Segment:
    ids: list[int]
    image: ImageRef | None = None


@dataclass
class GuiSim:
    rng: random.Random
    history: list[Segment] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    shots: int = 0

    def __post_init__(self) -> None:
        self.history.append(Segment([SYS, *self.text(20, 24), END]))

    def text(self, lo: int = 1, hi: int = 6) -> list[int]:
        return [self.rng.randint(10, 60) for _ in range(self.rng.randint(lo, hi))]

    def observe(self, tokens: int | None = None) -> ImageRef:
        self.shots += 1
        ref = image(self.shots, tokens or self.rng.choice([2, 4, 6]))
        self.history.append(Segment([USER, VS, *[PAD] * (ref.tokens or 0), VE, *self.text(), END], ref))
        return ref

    def call(self, **record: object) -> CallRecord:
        prompt = [t for seg in self.history for t in seg.ids] + [ASSISTANT]
        images = [seg.image for seg in self.history if seg.image is not None]
        completion = self.text(1, 5)
        rec = CallRecord(
            rollout_id="r0",
            index=len(self.calls),
            protocol=WireProtocol.CHAT,
            prompt_token_ids=prompt,
            completion_token_ids=completion,
            completion_logprobs=[-0.5] * len(completion),
            images=images,
            processor=dict(PROCESSOR),
            **record,
        )  # type: ignore[arg-type]
        self.calls.append(rec)
        self.history.append(Segment([ASSISTANT, *completion, END]))
        return rec

    def prune(self) -> bool:
        """Drop the oldest screenshot's segment; False when there is none."""
        for i, seg in enumerate(self.history):
            if seg.image is not None:
                del self.history[i]
                return True
        return False

    def swap(self) -> bool:
        """Replace the newest screenshot by another image with the same token count (same ids)."""
        for seg in reversed(self.history):
            if seg.image is not None:
                self.shots += 1
                seg.image = image(self.shots, seg.image.tokens or 0)
                return True
        return False
