"""Attacks from inside a GUI sandbox: a script (the agent) runs where the harness would, next to the
live apps, browser and computer service. It must not read or forge the state the verifier reads, use
the oracle's element lookup, reach outside, read the oracle, or break the verdict."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from pathlib import Path

import pytest
from gui_helpers import GUI_SUITE, needs_gui

from openforgerl.sandbox.base import SandboxSpec
from openforgerl.sandbox.bwrap import MASKED_IN_PACKAGE
from openforgerl.tasks.loader import load_runtime

pytestmark = [pytest.mark.gui, needs_gui]
ATTACKER = Path(__file__).with_name("agents") / "gui_attacker.py"
TASK = GUI_SUITE / "board-move-01"


def _host_addr() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))
            return str(s.getsockname()[0])
        except OSError:
            return "127.0.0.1"


async def _attack() -> tuple[dict, object, object]:
    from openforgerl.sandbox.local import LocalBackend

    rt = load_runtime(TASK)
    backend = LocalBackend()
    files = {**rt.files(), "attacker.py": ATTACKER.read_bytes()}
    sbx = await backend.open_sandbox(SandboxSpec(rollout_id="gui-attack", files=files, lifetime_s=600))
    try:
        await sbx.spawn(list(rt.service_argv()))
        res = await sbx.exec(
            [
                sys.executable,
                "-I",
                "/workdir/attacker.py",
                str(TASK / "solution" / "actions.json"),
                _host_addr(),
            ],
            timeout_s=240,
        )
        assert res.stdout.strip(), res.stderr.decode()[-2000:]  # exit 137: it killed itself last
        report = json.loads(res.stdout.decode().strip().splitlines()[-1])
        verdict = await rt.verify(sbx)
        return report, rt, verdict
    finally:
        await sbx.aclose()
        await backend.aclose()


@pytest.fixture(scope="module")
def attack() -> tuple[dict, object, object]:
    return asyncio.run(_attack())


def test_state_is_unreadable_and_unwritable(attack):
    report, _, _ = attack
    assert report["state_plain"] == 404 and report["state_guess"] == 404
    assert report["state_post"] == 404 and report["state_put"] in (404, 501)


def test_oracle_lookup_needs_the_token(attack):
    assert attack[0]["locate_plain"] == 404


def test_token_is_nowhere_the_agent_can_read(attack):
    report, rt, _ = attack
    assert report["files_read"] > 10
    assert rt.token not in report["hex_candidates"]


def test_services_are_invisible_and_survive_kill_all(attack):
    report, _, verdict = attack
    assert len(report["pids_visible"]) <= 4  # sh wrapper, python, kill: its own PID namespace only
    assert verdict.reward == 0.0  # the verifier still reached the live apps after `kill -9 -1`


def test_forged_config_and_port_grab_do_not_change_the_verdict(attack):
    report, _, verdict = attack
    assert report["config_rewritten"] is True  # the agent may write its workdir ...
    assert report["port_taken"] != True  # noqa: E712  ... but not take over the apps' port
    assert verdict.reward == 0.0 and verdict.components["check.moved"] == 0.0


def test_only_the_apps_and_the_computer_listen(attack):
    assert attack[0]["listening"] == [8080, 8765]


def test_no_outside_network(attack):
    report, _, _ = attack
    assert all(v is not True for v in report["net"].values()), report["net"]
    assert report["dns"] is not True


def test_oracle_is_unreadable(attack):
    assert "envs/gui/suite/tasks" in MASKED_IN_PACKAGE
    assert attack[0]["solution"] is None
