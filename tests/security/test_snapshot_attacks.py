"""Attacks on upstream Claw-Eval's `env_snapshot` (envs/claw/snapshot.py): the host takes it after the
harness is gone, on a copy of the agent's final workdir, pushes in upstream's grader-only files (scripts
that hold the answer) and runs the task's commands there. Real bubblewrap sandboxes, gateway, verifier
and `zero`; a scripted engine stands in for the policy's decisions only.

The attacker 1. looks for the grader-only files (the check script, the ground truth, the manifest) during
its run, where they could be; 2. plants what the snapshot will read: a forged check script where the real
one will go (behind a link), links to `/etc/shadow`, to a host folder and to the ground truth's host path
under the globbed names, a FIFO and an oversized file.

Done when: the probes find nothing of the grader's (the control: the same probe finds the attacker's own
decoy); every planted entry reaches the grader as an `{error}`, never as the linked file's bytes; the
reward is the no-op's, scored (`ok`), not infra; and with the grader-only file left out of the copy the
same forged check is believed (the control that shows the push matters).
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from openforgerl.tasks.importing import import_any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs"))
from scripted_eval import bash_steps, run_eval

DATA = Path(__file__).resolve().parents[1] / "envs" / "data" / "claw_eval_snapshot"
TASK = "T908_ledger_total"
pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
FORGED = "import json; print(json.dumps({'correct': True}))\n"
PROBE = (
    "echo decoy-file > /workspace/decoy_marker.txt; "
    "find / \\( -name 'check_total*' -o -name 'expected_total*' "
    "-o -name 'env_snapshot.json' -o -name grader.py "
    "-o -name 'decoy_marker*' \\) -not -path '/proc/*' 2>/dev/null; env; cat /proc/self/cmdline; "
    "ls -laR /workspace/ /tmp"
)


def _plant(truth: Path) -> str:
    return (
        "mkdir -p /workspace/out /workspace/fixtures && "
        f'printf "{FORGED}" > /workspace/fake.py && ln -sf '
        "/workspace/fake.py /workspace/fixtures/check_total.py && "
        "ln -sf /etc/shadow /workspace/out/total.txt && "
        f"ln -sf {truth} /workspace/out/notes.md && ln -sf {truth} /workspace/out/truth.txt && "
        "mkfifo /workspace/out/pipe.txt && head -c 20000000 /dev/zero > /workspace/out/big.txt"
    )


def _eval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, steps: list[str], seen: list[str]
) -> dict[str, Any]:
    """`eval` with `zero`; `seen` gets what reached the agent: its context, its
    tools and every tool result."""

    def policy(turn: Any) -> str:
        if turn.tools:
            seen.extend(str(m.get("content")) for m in turn.messages if m.get("role") != "assistant")
            seen.append(json.dumps(turn.tools, ensure_ascii=False))
        return bash_steps(steps)(turn)

    [record] = run_eval(tmp_path / "tasks", tmp_path / "r", monkeypatch, policy)
    return dict(record)


def test_the_grader_only_files_are_out_of_reach_and_planted_links_are_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    [folder] = import_any(DATA / TASK, tmp_path / "tasks")
    truth = folder / "tests/claw_eval/local_grader_files/fixtures/expected_total.txt"
    seen: list[str] = []
    record = _eval(tmp_path, monkeypatch, [PROBE, _plant(truth)], seen)
    said = "\n".join(seen)
    assert "/workdir/decoy_marker.txt" in said  # control: the probe finds what is there
    for secret in (
        "check_total",
        "expected_total",
        "env_snapshot.json",
        "grader.py",
        "EXPECTED = 1234",
        "1234",
    ):
        assert secret not in said, secret
    assert record["status"] == "ok" and record["reward"] == pytest.approx(0.2)  # the no-op's score, not infra

    # the same attack with upstream's check script left out of the copy: the forged one is believed
    from openforgerl.envs.claw import snapshot

    real = snapshot.SnapshotSpec.from_tests

    def without_push(tests: Path) -> snapshot.SnapshotSpec | None:
        spec = real(tests)
        return None if spec is None else snapshot.SnapshotSpec(spec.commands, spec.files, spec.timeout_s, {})

    monkeypatch.setattr(snapshot.SnapshotSpec, "from_tests", staticmethod(without_push))
    shutil.rmtree(tmp_path / "r")
    unpushed = _eval(tmp_path, monkeypatch, [_plant(truth)], [])
    assert unpushed["reward"] == pytest.approx(0.8 * 0.6 + 0.2)


def test_planted_files_reach_the_grader_as_errors_never_as_the_linked_bytes(tmp_path: Path) -> None:
    from openforgerl.envs.claw.snapshot import SnapshotSpec, collect_env_snapshot
    from openforgerl.sandbox.base import SandboxSpec
    from openforgerl.sandbox.local import LocalBackend

    secret = tmp_path / "host_secret.txt"
    secret.write_text("host-only ground truth\n")

    async def main() -> dict[str, Any]:
        backend = LocalBackend(tmp_path / "sbx")
        try:
            sbx = await backend.open_sandbox(SandboxSpec(rollout_id="attack"))
            res = await sbx.exec(
                ["sh", "-c", _plant(secret) + f" && ln -s {secret.parent} /workspace/hostdir"]
            )
            assert res.returncode == 0, res.stderr
            spec = SnapshotSpec(
                commands=("python3 /workspace/fixtures/check_total.py",),
                files=(
                    "/workspace/out/*.txt",
                    "/workspace/out/notes.md",
                    "/workspace/hostdir/*",
                    "/workspace/hostdir/host_secret.txt",
                ),
                timeout_s=5,
                grader_files={"fixtures/check_total.py": b"print('the real check')\n"},
            )
            snap = await collect_env_snapshot(sbx, spec)
            await sbx.aclose()
            return snap
        finally:
            await backend.aclose()

    snap = asyncio.run(main())
    assert snap["cmd:python3 /workspace/fixtures/check_total.py"]["stdout"] == "the real check\n"
    for name in ("total.txt", "truth.txt", "big.txt", "notes.md"):
        entry = snap.get(f"file:/workspace/out/{name}")
        assert entry is not None and set(entry) == {"error"}, (name, entry)
    assert "file:/workspace/out/pipe.txt" not in snap  # a FIFO is left out of the copy
    assert not any(
        k.startswith("file:/workspace/hostdir/") and k != "file:/workspace/hostdir/host_secret.txt"
        for k in snap
    )  # a glob never enters a linked folder
    assert set(snap["file:/workspace/hostdir/host_secret.txt"]) == {"error"}  # nor does a plain path
    assert "host-only ground truth" not in json.dumps(snap)


# prints what the real check prints for a right answer, then ends the interpreter before the check runs
SHADOW = (
    "import os, sys\n"
    'sys.stdout.write(\'{"file_exists": true, "value": 1234, "correct": true}\\n\')\n'
    "sys.stdout.flush()\nos._exit(0)\n"
)


def test_planted_python_modules_never_run_inside_the_check_scripts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check script imports `json`; the agent plants a `json.py` beside it (where the script's folder puts
    it first on sys.path), in the workdir (the cwd of `python -c`) and as a user-site `usercustomize.py`
    (HOME was the workdir): each prints the check's passing verdict and exits. None runs: the reward is the
    no-op's. Control: with the hardening env left out, the same plant is believed."""
    from openforgerl.envs.claw import snapshot

    site = "/workspace/.local/lib/python3.11/site-packages"
    b64 = base64.b64encode(SHADOW.encode()).decode()
    plant = (
        f"mkdir -p /workspace/fixtures {site} && echo {b64} | base64 -d > /workspace/fixtures/json.py && "
        "cp /workspace/fixtures/json.py /workspace/json.py && "
        f"cp /workspace/fixtures/json.py {site}/usercustomize.py"
    )
    import_any(DATA / TASK, tmp_path / "tasks")
    record = _eval(tmp_path, monkeypatch, [plant], [])
    assert record["status"] == "ok" and record["reward"] == pytest.approx(0.2), record  # the no-op's score

    monkeypatch.setattr(snapshot, "SAFE_PYTHON", {})
    shutil.rmtree(tmp_path / "r")
    believed = _eval(tmp_path, monkeypatch, [plant], [])
    assert believed["reward"] > 0.2, believed


def test_grader_code_runs_without_the_agents_modules_and_the_agents_program_with_its_own(
    tmp_path: Path,
) -> None:
    """Same sandbox, three commands: upstream's check script beside a planted `json.py` (ignored), a `-c` line
    with the cwd full of planted modules (ignored), the agent's own program importing its sibling module
    (works, as upstream runs it) and started by the check script
    (works too: the child gets upstream's env)."""
    from openforgerl.envs.claw.snapshot import SnapshotSpec, collect_env_snapshot, runs_agent_script
    from openforgerl.sandbox.base import SandboxSpec
    from openforgerl.sandbox.local import LocalBackend

    check = (
        b"import json, subprocess, sys\n"
        b"out = subprocess.run([sys.executable, '/workspace/decode.py'], "
        b"capture_output=True, text=True).stdout\n"
        b"print(json.dumps({'real': True, 'child': out.strip()}))\n"
    )
    commands = (
        "python /workspace/fixtures/check.py",
        "python -c 'import json; print(json.dumps([1]))'",
        "python /workspace/decode.py 2>&1; echo EXIT_CODE=$?",
    )
    assert [runs_agent_script(c, ["fixtures/check.py"]) for c in commands] == [False, False, True]
    b64 = base64.b64encode(SHADOW.encode()).decode()
    plant = (
        f"mkdir -p /workspace/fixtures && echo {b64} | base64 -d > /workspace/fixtures/json.py && "
        "cp /workspace/fixtures/json.py /workspace/json.py && "
        "printf 'def word():\\n    return \"sibling\"\\n' > /workspace/helper.py && "
        "printf 'import helper\\nprint(helper.word())\\n' > /workspace/decode.py"
    )

    async def main() -> dict[str, Any]:
        backend = LocalBackend(tmp_path / "sbx")
        try:
            sbx = await backend.open_sandbox(SandboxSpec(rollout_id="shadow"))
            res = await sbx.exec(["sh", "-c", plant])
            assert res.returncode == 0, res.stderr
            spec = SnapshotSpec(commands=commands, timeout_s=20, grader_files={"fixtures/check.py": check})
            snap = await collect_env_snapshot(sbx, spec, python_dir=str(Path(sys.executable).parent))
            await sbx.aclose()
            return snap
        finally:
            await backend.aclose()

    snap = asyncio.run(main())
    assert json.loads(snap[f"cmd:{commands[0]}"]["stdout"]) == {"real": True, "child": "sibling"}, snap
    assert snap[f"cmd:{commands[1]}"]["stdout"] == "[1]\n", snap
    assert snap[f"cmd:{commands[2]}"]["stdout"] == "sibling\nEXIT_CODE=0\n", snap
