"""Reconstruction with images: the image half of the prefix rule, image_pruned breaks, pad counts."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from image_sim import PAD, GuiSim, image, rollout

from openforgerl.records import CallRecord, WireProtocol
from openforgerl.trajectory import ReconstructionOptions, reconstruct_samples


def _pads(sample: object) -> int:
    return sum(t == PAD for t in sample.prompt_ids + sample.response_ids)  # type: ignore[attr-defined]


def _tokens(sample: object) -> int:
    return sum(i["tokens"] for i in sample.multi_modal_data.get("images", []))  # type: ignore[attr-defined]


def test_screenshot_per_step_is_one_chain_carrying_every_image_in_order() -> None:
    sim = GuiSim(random.Random(0))
    shots = []
    for _ in range(4):
        shots.append(sim.observe())
        sim.call()
    result = reconstruct_samples(sim.calls, rollout())
    (sample,) = result.samples
    assert [i["sha256"] for i in sample.multi_modal_data["images"]] == [s.sha256 for s in shots]
    assert sample.multi_modal_data["images"][0] == shots[0].model_dump(mode="json")
    assert _pads(sample) == _tokens(sample) == sum(s.tokens or 0 for s in shots)
    assert sample.extra_fields["image_processor"]["image_token_id"] == PAD
    assert result.metrics.merge_rate == 1.0 and result.metrics.images_in_samples == 4


def test_pruning_an_old_screenshot_breaks_the_chain_as_image_pruned() -> None:
    sim = GuiSim(random.Random(1))
    for _ in range(3):
        sim.observe()
        sim.call()
    assert sim.prune()
    sim.observe()
    sim.call()
    result = reconstruct_samples(sim.calls, rollout())
    assert len(result.samples) == 2
    assert result.metrics.break_causes == {"image_pruned": 1}
    final = result.samples[-1]
    assert final.is_final_chain and len(final.multi_modal_data["images"]) == 3
    assert all(_pads(s) == _tokens(s) for s in result.samples)


def test_same_ids_with_a_different_image_never_merge() -> None:
    sim = GuiSim(random.Random(2))
    sim.observe(tokens=4)
    first = sim.call()
    assert sim.swap()
    second = sim.call()
    assert second.prompt_token_ids[: len(first.prompt_token_ids)] == first.prompt_token_ids
    result = reconstruct_samples(sim.calls, rollout())
    assert len(result.samples) == 2
    assert result.metrics.break_causes == {"image_pruned": 1}


def test_text_only_calls_have_no_multimodal_data() -> None:
    rec = CallRecord(
        rollout_id="r0",
        index=0,
        protocol=WireProtocol.CHAT,
        prompt_token_ids=[1, 2, 3],
        completion_token_ids=[4],
        completion_logprobs=[-1.0],
    )
    (sample,) = reconstruct_samples([rec], rollout()).samples
    assert sample.multi_modal_data == {} and "image_processor" not in sample.extra_fields


@pytest.mark.parametrize("tokens", [3, 5])
def test_pad_count_mismatch_drops_the_rollout_with_a_reason(tokens: int) -> None:
    sim = GuiSim(random.Random(3))
    sim.observe(tokens=4)
    rec = sim.call()
    bad = rec.model_copy(update={"images": [rec.images[0].model_copy(update={"tokens": tokens})]})
    result = reconstruct_samples([bad], rollout())
    assert result.samples == ()
    assert result.dropped_reason == f"image_tokens_mismatch (chain 0: 4 pads for {tokens} image tokens)"


def test_pads_without_recorded_images_are_a_mismatch_too() -> None:
    sim = GuiSim(random.Random(4))
    sim.observe(tokens=4)
    rec = sim.call().model_copy(update={"images": []})
    result = reconstruct_samples([rec], rollout())
    assert result.dropped_reason == "image_tokens_mismatch (chain 0: 4 pads for 0 images)"


def test_grid_counts_when_tokens_are_not_recorded_and_option_gives_the_pad_id() -> None:
    sim = GuiSim(random.Random(5))
    sim.observe(tokens=4)
    rec = sim.call()
    ref = rec.images[0].model_copy(update={"tokens": None, "grid_thw": [1, 2, 8]})  # 16 / 2**2 = 4
    rec = rec.model_copy(update={"images": [ref], "processor": None})
    assert reconstruct_samples([rec], rollout(), options=ReconstructionOptions(image_token_id=PAD)).samples
    ref5 = ref.model_copy(update={"grid_thw": [1, 2, 10]})
    bad = rec.model_copy(update={"images": [ref5]})
    dropped = reconstruct_samples([bad], rollout(), options=ReconstructionOptions(image_token_id=PAD))
    assert dropped.dropped_reason is not None and dropped.dropped_reason.startswith("image_tokens_mismatch")


def test_a_multimodal_chain_that_overflows_is_dropped_not_cut() -> None:
    sim = GuiSim(random.Random(6))
    sim.observe(tokens=6)
    sim.call()
    result = reconstruct_samples(sim.calls, rollout(), options=ReconstructionOptions(max_prompt_len=10))
    assert result.samples == () and result.metrics.chains_dropped == 1


def test_rewind_with_fewer_images_is_a_rewind_not_a_prune() -> None:
    sim = GuiSim(random.Random(7))
    sim.observe()
    first = sim.call()
    sim.observe()
    sim.call()
    retry = first.model_copy(update={"index": 2, "completion_token_ids": [11], "completion_logprobs": [-0.1]})
    result = reconstruct_samples([*sim.calls, retry], rollout())
    assert result.metrics.break_causes == {"rewind": 1}


def test_image_url_without_bytes_is_keyed_by_its_url() -> None:
    sim = GuiSim(random.Random(8))
    sim.observe(tokens=2)
    rec = sim.call()
    url_a = rec.images[0].model_copy(update={"sha256": "", "url": "http://a/1.png"})
    url_b = url_a.model_copy(update={"url": "http://a/2.png"})
    first = rec.model_copy(update={"images": [url_a]})
    second = rec.model_copy(
        update={
            "index": 1,
            "images": [url_b],
            "prompt_token_ids": rec.prompt_token_ids + rec.completion_token_ids,
        }
    )
    assert len(reconstruct_samples([first, second], rollout()).samples) == 2


# ---- properties -----------------------------------------------------------------------------------

ACTIONS = ["step", "step", "step", "text", "prune", "swap"]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32), actions=st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=20))
def test_image_prefix_rule_properties(seed: int, actions: list[str]) -> None:
    sim = GuiSim(random.Random(seed))
    sim.observe()
    sim.call()
    broken = 0  # calls made after a prune/swap changed the history since the previous call
    dirty = False
    for action in actions:
        if action == "prune":
            dirty |= sim.prune()
        elif action == "swap":
            dirty |= sim.swap()
        else:
            if action == "step":
                sim.observe()
            sim.call()
            broken += dirty
            dirty = False
    result = reconstruct_samples(sim.calls, rollout())
    samples = result.samples
    # every chain break is an image prune/swap, one per call after one, and nothing else breaks
    assert len(samples) == 1 + broken
    assert dict(result.metrics.break_causes) == ({"image_pruned": broken} if broken else {})
    # each sample's pads are exactly its images' tokens, images in pad-run order
    for s in samples:
        assert _pads(s) == _tokens(s)
        assert [i["tokens"] for i in s.multi_modal_data.get("images", [])] == _runs(
            s.prompt_ids + s.response_ids
        )
    # every sampled token trained exactly once
    assert sum(sum(s.response_mask) for s in samples) == sum(len(c.completion_token_ids) for c in sim.calls)
    # a sample's last call holds exactly the sample's images
    by_index = {c.index: c for c in sim.calls}
    for s in samples:
        last = by_index[s.extra_fields["call_indices"][-1]]
        assert [i["sha256"] for i in s.multi_modal_data.get("images", [])] == [i.sha256 for i in last.images]


def _runs(ids: list[int]) -> list[int]:
    runs: list[int] = []
    prev = None
    for t in ids:
        if t == PAD:
            if prev == PAD:
                runs[-1] += 1
            else:
                runs.append(1)
        prev = t
    return runs


def test_image_helper_tokens_match_grid() -> None:
    ref = image(1, 4)
    assert ref.grid_thw is not None and ref.grid_thw[0] * ref.grid_thw[1] * ref.grid_thw[2] // 4 == 4
