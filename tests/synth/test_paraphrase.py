"""Paraphrases are kept only when every slot value survives verbatim; a tiny local engine stands in."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from openforgerl.synth import synthesize
from openforgerl.synth.paraphrase import accept, paraphrase

TEXT = 'Send an email to bob@x.io with subject "Budget" and body "The numbers are final."'
SLOTS = ["bob@x.io", "Budget", "The numbers are final."]


def test_the_verbatim_rule() -> None:
    good = 'Please email bob@x.io; use the subject "Budget" and write "The numbers are final."'
    assert accept(TEXT, good, SLOTS)
    assert not accept(TEXT, good.replace("bob@x.io", "Bob"), SLOTS)  # a slot lost
    assert not accept(TEXT, TEXT, SLOTS) and not accept(TEXT, None, SLOTS)
    assert not accept(TEXT, " ".join(SLOTS) * 20, SLOTS)  # runaway length
    assert paraphrase(TEXT, SLOTS, lambda t, s: "Email Bob.") == (TEXT, False)
    assert paraphrase(TEXT, SLOTS, lambda t, s: good) == (good, True)


def test_a_paraphrasing_engine_only_ever_keeps_slots(tmp_path: Path) -> None:
    def engine(text: str, slots: list[str]) -> str:  # rewords half the tasks, mangles the other half
        return ("Could you do this for me? " + text) if len(text) % 2 else text.lower() + " please"

    report, paths, _ = synthesize("claw", 30, tmp_path, seed=1, paraphraser=engine)
    assert 0 < report.paraphrased < 30
    for p in paths:
        synth = tomllib.loads((p / "task.toml").read_text())["metadata"]["synth"]
        text = (p / "instruction.md").read_text()
        assert all(s in text for s in synth["slots"])
        assert synth["paraphrased"] == text.startswith("Could you")


def test_the_tiny_local_engine_as_paraphraser(tmp_path: Path) -> None:
    from openforgerl.engines.chat_format import TINY_ASSETS
    from openforgerl.engines.local.background import BackgroundServer
    from openforgerl.synth.paraphrase import http_paraphraser

    if not os.path.exists(os.path.join(TINY_ASSETS, "config.json")):
        pytest.skip("tiny model weights not built")
    server = BackgroundServer.start("tiny")
    try:
        http = http_paraphraser(server.url, "tiny", max_tokens=48)
        answers: list[str | None] = []

        def engine(text: str, slots: list[str]) -> str | None:
            answers.append(http(text, slots))  # raises if the engine did not answer
            return answers[-1]

        report, paths, _ = synthesize("claw", 4, tmp_path, seed=2, paraphraser=engine)
    finally:
        server.close()
    assert report.kept == 4 and len(answers) >= 4  # the engine answered every request (text or a tool call)
    for p in paths:  # whatever the tiny model wrote, a kept instruction still has every slot verbatim
        synth = tomllib.loads((p / "task.toml").read_text())["metadata"]["synth"]
        assert all(s in (p / "instruction.md").read_text() for s in synth["slots"])
