"""The token view on real multimodal traffic: the local engine serving `tiny-vl` behind the real gateway
expands each screenshot into its `<|image_pad|>` run (the engine's count is recorded as `ImageRef.tokens`);
the viewer shows each run as one chip whose count is that number, and the screenshots as the stored bytes."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import sys
from pathlib import Path

import pytest

from openforgerl.viewer.render import Renderer
from openforgerl.viewer.site import Links, Site

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "export"))
PAD = 4104  # tiny-vl's <|image_pad|>


@pytest.fixture(scope="module")
def vl_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    from vlm_traffic import record_gui_rollouts, screenshot

    run = tmp_path_factory.mktemp("vl")
    [rid] = asyncio.run(record_gui_rollouts(run / "calls.db", [[screenshot(i) for i in range(3)]]))
    return run, rid


def test_each_recorded_image_is_one_chip_of_the_engines_pad_count(vl_run: tuple[Path, str]) -> None:
    run, rid = vl_run
    site = Site.open([run], tokenizer="tiny-vl")
    page = site.rollout_page(0, rid)
    assert page is not None
    last = max(site.runs[0].calls(rid), key=lambda c: c.index)
    expected = [ref.tokens for ref in last.images]
    assert len(expected) == 3 and all(expected)
    [chain] = page.context["chains"]
    chips = [t for t in (*chain.prompt, *chain.response) if t.count > 1]
    assert [(c.label, c.count) for c in chips] == [
        (f"image {k} · {n} tokens", n) for k, n in enumerate(expected, 1)
    ]
    html = Renderer(Links()).render(page)
    tokens = html[html.index('<section id="tokens">') : html.index('<section id="gui">')]
    # one chip per image (the tiny model may sample a lone pad token itself: that one stays a token)
    assert len(re.findall(r'<span class="img [^"]*" title="image \d · \d+ tokens: ', tokens)) == 3
    assert not [t for t in chain.prompt if t.token_id == PAD and t.count == 1]
    # every screen is the stored blob the call names
    for href, sha in zip(
        re.findall(r'<image href="(data:image/png;base64,[^"]+)"', html),
        [c.images[-1].sha256 for c in sorted(site.runs[0].calls(rid), key=lambda c: c.index)],
        strict=True,
    ):
        assert hashlib.sha256(base64.b64decode(href.split(",", 1)[1])).hexdigest() == sha
    # control: without the tokenizer the pads are not recognisable, and each is a token of its own
    bare = Site.open([run], tokenizer="none").rollout_page(0, rid)
    assert bare is not None
    [plain] = bare.context["chains"]
    spans = [t for t in (*plain.prompt, *plain.response) if t.token_id == PAD]
    assert all(t.count == 1 for t in spans) and len(spans) == sum(expected)
