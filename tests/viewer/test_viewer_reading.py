"""What the viewer reads off a run, in-process: image placeholder runs as one chip, one colour per result,
the side by side's default pair, the behaviour legend, and stored screenshots that are never shown as
anything but a raster image of the bytes their hash names (attacks with controls)."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest
from analytics._rundir import png

from openforgerl.store.blobfiles import BlobFiles
from openforgerl.trajectory.chains import Chain
from openforgerl.viewer.gui import resolve_image
from openforgerl.viewer.render import Renderer
from openforgerl.viewer.site import BEHAVIOUR_HELP, Links, Site, default_pair, outcome
from openforgerl.viewer.tokens import PROMPT_TAIL, chain_view, load_decoder
from viewer._fixture import MAIL_TASK

VS, VE, PAD = 4102, 4103, 4104  # tiny-vl's <|vision_start|>, <|vision_end|>, <|image_pad|>


def _chain(prompt: list[int], response: list[int], mask: list[int]) -> Chain:
    return Chain(
        index=0,
        agent=None,
        tokens=prompt + response,
        prompt_len=len(prompt),
        mask=mask,
        logprobs=[-0.1 * (i % 5) for i in range(len(response))],
        call_indices=[0, 1],
        version_min=0,
        version_max=0,
    )


def test_each_images_placeholder_run_is_one_chip_with_its_mask_in_the_title() -> None:
    decode = load_decoder("tiny-vl")
    text = [ord(c) for c in "look"]  # byte-level ids decode to text, never to a placeholder
    prompt = text + [VS] + [PAD] * 880 + [VE] + text
    response = text + [VS] + [PAD] * 64 + [VE] + text + [PAD] * 3
    mask = [1] * 4 + [0] * 66 + [1] * 4 + [1] * 3  # a screenshot the harness inserted, then 3 sampled pads
    view = chain_view(_chain(prompt, response, mask), decode)
    chips = [t for t in (*view.prompt, *view.response) if t.count > 1]
    assert [(c.label, c.trained) for c in chips] == [
        ("image 1 · 880 tokens", False),
        ("image 2 · 64 tokens", False),
        ("image 3 · 3 tokens", True),
    ]
    assert "mask 0, not trained" in chips[1].title and "mask 1, trained" in chips[2].title
    assert "mean logprob" in chips[2].title and chips[2].logprob is not None
    # nothing lost: the shown spans and the hidden head add up to every token of the chain
    assert view.prompt_hidden + sum(t.count for t in view.prompt) == len(prompt)
    assert sum(t.count for t in view.response) == len(response)
    # control: a repeated ordinary token is never folded
    plain = chain_view(_chain(text * 300, text, [1] * 4), decode)
    assert all(t.count == 1 for t in (*plain.prompt, *plain.response))
    assert len(plain.prompt) == PROMPT_TAIL and plain.prompt_hidden == 1200 - PROMPT_TAIL


def test_status_and_reward_never_disagree() -> None:
    assert outcome(False, "ok") == "fail"  # a reward-0 ok is a failure, shown red
    assert outcome(True, "ok") == "pass"
    assert outcome(False, "infra_error:engine") == outcome(True, "ok", tainted=True) == "infra"
    assert outcome(False, "config_error:context") == "infra"


@pytest.fixture(scope="module")
def run_a(runs: tuple[Path, Path]) -> Site:
    return Site.open([runs[0]], tokenizer="tiny")


def test_table_colours_the_reward_and_leaves_the_status_neutral(run_a: Site) -> None:
    html = Renderer(Links()).render(run_a.table_page(0, {}))  # type: ignore[arg-type]
    cells = {
        m.group(1): (m.group(2), m.group(3))
        for m in re.finditer(
            r'<a href="[^"]*">(r-[\w-]+)</a>.*?<td class="st">([^<]*)</td><td><span class="res (\w+)"',
            html,
            re.S,
        )
    }
    assert cells == {
        "r-mail-ok": ("ok", "pass"),
        "r-mail-bad": ("agent_failed", "fail"),
        "r-gui": ("ok", "pass"),
        "r-infra": ("infra_error:engine", "infra"),
    }, cells
    assert 'class="ok"' not in html and 'class="bad"' not in html  # no status coloured on its own


def test_side_by_side_of_one_run_opens_on_a_pass_and_a_fail(run_a: Site) -> None:
    page = run_a.compare_page(MAIL_TASK)
    assert page is not None
    assert [s["row"].rollout_id for s in page.context["sides"]] == ["r-mail-ok", "r-mail-bad"]
    html = Renderer(Links()).render(page)
    assert re.findall(r'class="res (\w+) side-result"', html) == ["pass", "fail"]
    rows = run_a.indexes[0].for_task(MAIL_TASK)
    # control: two failures only -> the first two, never one rollout against itself
    fails = [r for r in rows if not r.passed] * 2
    assert default_pair(fails, fails, same_run=True)[0] is fails[0]
    assert default_pair(rows[::-1], rows[::-1], same_run=True)[0].passed  # pass first whatever the order


def test_every_behaviour_column_is_explained_in_place(run_a: Site) -> None:
    html = Renderer(Links()).render(run_a.rollout_page(0, "r-mail-ok"))  # type: ignore[arg-type]
    section = html[html.index('<section id="behaviour">') : html.index('<section id="verifier">')]
    for key in ("sv", "tc_norm", "cfs", "iba", *BEHAVIOUR_HELP):
        assert re.search(rf'<th title="[^"]{{20,}}">{key}</th>', section), key
        assert f"<li><b>{key}</b>: " in section, key


# -- stored screenshots: only raster bytes that match their hash are shown ------------------------------
def test_a_blob_that_is_not_a_raster_image_is_never_shown_as_one() -> None:
    svg = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'
    ref = "openforgerl-blob:sha256:" + hashlib.sha256(svg).hexdigest()
    assert resolve_image(ref, lambda sha: svg) == ("", hashlib.sha256(svg).hexdigest(), True)
    # control: the same path with PNG bytes is a data: PNG of exactly those bytes
    raw = png(8, 8)
    url, _, missing = resolve_image(
        "openforgerl-blob:sha256:" + hashlib.sha256(raw).hexdigest(), lambda sha: raw
    )
    assert (
        not missing
        and url.startswith("data:image/png;base64,")
        and base64.b64decode(url.split(",")[1]) == raw
    )


def test_a_tampered_pack_or_a_bad_name_reads_nothing(tmp_path: Path) -> None:
    from openforgerl.analytics.rundir import RunDir
    from openforgerl.viewer.site import blob_reader

    raw = png(8, 8)
    sha = hashlib.sha256(raw).hexdigest()
    writer = BlobFiles(tmp_path / "calls.db.blobs")
    writer.put(sha, raw)
    writer.close()
    read = blob_reader(RunDir(tmp_path))
    assert read(sha) == raw  # control: the untouched pack is read
    assert read("../" * 8 + "etc/passwd") is None and read(sha.upper()) is None
    [pack] = (tmp_path / "calls.db.blobs" / "packs").iterdir()
    data = bytearray(pack.read_bytes())
    data[-10] ^= 0xFF  # one flipped byte inside the image
    pack.write_bytes(bytes(data))
    assert blob_reader(RunDir(tmp_path))(sha) is None
