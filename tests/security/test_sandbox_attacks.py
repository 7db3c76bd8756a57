"""Attacks on the sandbox and the verifier, from inside a real bubblewrap sandbox, as the harness,
through the real gateway and orchestrator. Each must fail: the reward stays
what the work earned (0 here), the status is the agent's (`ok`/`agent_failed`, never infra) unless
the fault was truly outside the agent's reach, and the orchestrator keeps finishing rollouts.

Tasks: `easy-write-file-01` (a file check: plan.md == "budget review"; the honest harness gets 1.0),
`calendar-create-01` (a record check against the calendar service), and `ProofFileTask` below, whose
verifier reads /workdir/proof.txt in-process through `sandbox.read_file` (as a user's own task would).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from openforgerl.harness.generic import CommandHarness
from openforgerl.records import RolloutStatus
from openforgerl.sandbox.base import Limits
from openforgerl.testing.harnesses import after_a_model_call
from openforgerl.testing.markers import needs_bwrap
from openforgerl.testing.tasks import ProofFileTask

SUITE = Path(__file__).resolve().parents[2] / "src/openforgerl/envs/claw/suite/tasks"
pytestmark = [needs_bwrap]

HONEST = "echo 'budget review' > /workdir/plan.md"


def proof_task() -> ProofFileTask:
    """Reward 1 iff /workdir/proof.txt holds the magic word (read through the sandbox, `read_file`)."""
    return ProofFileTask(instruction="write the magic word to proof.txt", budget_s=60.0)


def attacker(script: str) -> CommandHarness:
    """A harness that asks the model once, then runs `script` with sh (the instruction arrives as $0)."""
    return after_a_model_call(script)


async def _one(env, task, script: str, **config: Any):
    (rec,) = (await env.run([task], attacker(script), **config)).records
    return rec


def _agent_outcome(rec) -> None:
    assert not rec.status.is_infra, (rec.status, rec.metadata)
    assert rec.reward == 0.0, (rec.reward, rec.verifier_log)


async def test_honest_harness_earns_the_reward(attack_env, claw_task) -> None:
    """The baseline the attacks are measured against: the same task, done honestly, pays 1.0."""
    rec = await _one(attack_env, claw_task("easy-write-file-01"), HONEST)
    assert rec.status is RolloutStatus.OK and rec.reward == 1.0, rec.verifier_log


async def test_shadow_verifier_module_in_workdir_is_never_imported(attack_env, claw_task) -> None:
    """Before: the verifier ran `python -m openforgerl.envs.claw.verify` with cwd /workdir -> reward 1.0."""
    forged = (
        "import json, pathlib\\nfor p in ('/workdir/.claw/reward.json', '/verifier/out/reward.json'):\\n"
        "    try: pathlib.Path(p).write_text(json.dumps({'reward': 1.0}))\\n    except OSError: pass\\n"
    )
    script = (
        "set -e; mkdir -p /workdir/openforgerl/envs/claw/verify /workdir/.claw; "
        "touch /workdir/openforgerl/__init__.py /workdir/openforgerl/envs/__init__.py "
        "/workdir/openforgerl/envs/claw/verify/__init__.py; "
        f"printf '{forged}' > /workdir/openforgerl/envs/claw/verify/__main__.py; "
        f"printf '{forged}' > /workdir/sitecustomize.py; cp /workdir/sitecustomize.py /workdir/json.py; "
        "echo '{\"reward\": 1.0}' > /workdir/.claw/reward.json"
    )
    rec = await _one(attack_env, claw_task("easy-write-file-01"), script)
    _agent_outcome(rec)
    assert rec.status is RolloutStatus.OK and "FAIL file_written" in rec.verifier_log


async def test_planted_lenient_checks_are_not_used(attack_env, claw_task) -> None:
    """The task's checks used to be copied into /workdir/.claw/tests/ before the verifier ran; a
    pre-planted folder there (a FIFO, or checks that always pass) must change nothing."""
    lenient = '[[checks]]\\nkind = \\"file\\"\\npath = \\"README.md\\"\\nexists = false\\n'
    script = (
        f"mkdir -p /workdir/.claw/tests; printf '{lenient}' > /workdir/.claw/tests/checks.toml; "
        "mkfifo /workdir/.claw/tests/test.sh; mkdir -p /workdir/verifier/in/tests"
    )
    rec = await _one(attack_env, claw_task("easy-write-file-01"), script)
    _agent_outcome(rec)
    assert rec.status is RolloutStatus.OK and "FAIL file_written" in rec.verifier_log


async def test_task_solution_and_tests_are_not_visible(attack_env, claw_task) -> None:
    """Before: the host root was bound read-only, so `solution/solve.sh` gave 1.0 with no model call."""
    task_dir = SUITE / "calendar-create-01"
    script = (
        f"export OPENFORGERL_PYTHON={sys.executable}; "
        f"cat {task_dir}/tests/checks.toml; ls {task_dir}; bash {task_dir}/solution/solve.sh; "
        f"ls /work /root 2>&1 | head -3; exit 0"
    )
    rec = await _one(attack_env, claw_task("calendar-create-01"), script)
    _agent_outcome(rec)
    err = rec.metadata["harness_stderr_tail"]
    assert "No such file or directory" in err and "Design review" not in rec.metadata["harness_stdout_tail"]


async def test_forged_reward_json_is_never_read(attack_env, claw_task) -> None:
    """Before: a reward.json symlinked out of /workdir ended `infra_error:sandbox` (dropped, not 0).
    Now the verifier writes its reward in its own folder; nothing at /workdir/.claw/reward.json counts."""
    script = (
        "mkdir -p /workdir/.claw; ln -sf /etc/passwd "
        "/workdir/.claw/reward.json; mkfifo /workdir/.claw/verifier.log"
    )
    rec = await _one(attack_env, claw_task("easy-write-file-01"), script)
    _agent_outcome(rec)
    assert rec.status is RolloutStatus.OK and "FAIL file_written" in rec.verifier_log


@pytest.mark.parametrize("link", ["/etc/passwd", "/workdir/real.md"])
async def test_symlinked_checked_file_scores_zero_not_infra(attack_env, claw_task, link: str) -> None:
    """The checked file as a link — out of /workdir, or even to a right answer inside it — is refused."""
    script = f"echo 'budget review' > /workdir/real.md; ln -s {link} /workdir/plan.md"
    rec = await _one(attack_env, claw_task("easy-write-file-01"), script)
    _agent_outcome(rec)
    assert rec.status is RolloutStatus.AGENT_FAILED and "VIOLATION" in rec.verifier_log
    assert "symlink" in rec.verifier_log and "root:x:" not in rec.verifier_log


async def test_symlink_to_shadow_never_reaches_the_verifier_log(attack_env) -> None:
    rec = await _one(attack_env, proof_task(), "ln -s /etc/shadow /workdir/proof.txt")
    _agent_outcome(rec)
    assert rec.status is RolloutStatus.AGENT_FAILED and "symlink" in rec.verifier_log
    assert "root:" not in rec.verifier_log


async def test_eight_fifos_score_zero_and_later_rollouts_still_finish(attack_env, claw_task) -> None:
    """Before: each FIFO proof.txt blocked a worker thread forever and ended `infra_error:verifier`;
    after six of them no rollout finished and the process could not exit."""
    fifo = await attack_env.run(
        [proof_task(), claw_task("easy-write-file-01")],
        attacker("mkfifo /workdir/proof.txt /workdir/plan.md"),
        group_size=8,
        min_group_size=1,
    )
    assert len(fifo.records) == 16
    for rec in fifo.records:
        _agent_outcome(rec)
        assert rec.status is RolloutStatus.AGENT_FAILED and "not a regular file" in rec.verifier_log
    later = await asyncio.wait_for(_one(attack_env, claw_task("easy-write-file-01"), HONEST), 120)
    assert later.status is RolloutStatus.OK and later.reward == 1.0


async def test_late_writer_cannot_change_the_work_after_the_harness(attack_env) -> None:
    """A daemon left behind (setsid, ignoring SIGTERM) that writes the answer once the harness is gone
    is killed with the harness's PID namespace before the verifier reads anything."""
    script = (
        "echo wrong > /workdir/proof.txt; "
        "setsid sh -c 'trap \"\" TERM; sleep 1; echo abracadabra > /workdir/proof.txt' & exit 0"
    )
    rec = await _one(attack_env, proof_task(), script)
    await asyncio.sleep(1.5)
    _agent_outcome(rec)
    assert rec.verifier_log == "proof.txt = 'wrong\\n'"


async def test_oversized_proof_is_refused(attack_env) -> None:
    rec = await _one(
        attack_env, proof_task(), "(echo abracadabra; head -c 9000000 /dev/zero) > /workdir/proof.txt"
    )
    _agent_outcome(rec)
    assert rec.status is RolloutStatus.AGENT_FAILED and "limit" in rec.verifier_log


async def test_shadow_and_root_are_unreadable(attack_env) -> None:
    script = (
        "cat /etc/shadow /root/.bashrc /root/.ssh/id_rsa > /workdir/proof.txt 2>/workdir/err.txt; "
        "cat /workdir/err.txt >&2; ls -A /root >&2; exit 0"
    )
    rec = await _one(attack_env, proof_task(), script)
    _agent_outcome(rec)
    err = rec.metadata["harness_stderr_tail"]
    assert err.count("No such file or directory") == 3 and "root:" not in rec.verifier_log


async def test_the_call_log_and_its_blob_files_are_unreachable(attack_env) -> None:
    """The call log's image blobs are pack files beside the database (`store/blobfiles.py`): the agent can
    neither read a stored screenshot nor plant forged pixels (a pack of its own, an old-style file under
    the hash) for the trainer and export to read."""
    import hashlib

    data = b"\x89PNG training pixels"
    sha = hashlib.sha256(data).hexdigest()
    forged = b"forged"
    forged_sha = hashlib.sha256(forged).hexdigest()
    await attack_env.store.put_blob(sha, data, "image/png")
    packs = attack_env.store.blob_files.packs
    (pack,) = packs.iterdir()
    head = b"OFB1" + bytes.fromhex(forged_sha) + len(forged).to_bytes(8, "big")
    entry = "".join(f"\\{b:03o}" for b in head) + "forged"  # printf's octal escapes (POSIX sh)
    script = (
        f"cat {pack} {attack_env.store.path} > /workdir/proof.txt; ls {packs} >&2; mkdir -p {packs}; "
        f"printf '{entry}' > {packs}/0-planted.pack; printf '{entry}' >> {pack}; "
        f"mkdir -p {packs.parent}/{sha[:2]}; printf forged > {packs.parent}/{sha[:2]}/{sha}; exit 0"
    )
    rec = await _one(attack_env, proof_task(), script)
    _agent_outcome(rec)
    assert "No such file or directory" in rec.metadata["harness_stderr_tail"]
    assert attack_env.store.read_blob(sha) == data  # the host's pack is untouched
    assert attack_env.store.read_blob(forged_sha) is None and list(packs.iterdir()) == [pack]
    assert attack_env.store.read_blob_usage() == (1, len(data))


async def test_host_unix_socket_outside_tmp_is_unreachable(attack_env) -> None:
    path = Path(f"/var/tmp/ofrl-attack-{os.getpid()}.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    srv.listen(4)
    srv.setblocking(False)
    probe = (
        f"{sys.executable} -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); "
        "print('CONNECTED')\""
    )
    try:
        rec = await _one(attack_env, proof_task(), f"{probe}; ls /var/tmp /run 2>&1 >&2; exit 0")
        with pytest.raises(BlockingIOError):
            srv.accept()  # nobody ever connected
    finally:
        srv.close()
        path.unlink()  # noqa: ASYNC240
    _agent_outcome(rec)
    assert "CONNECTED" not in rec.metadata["harness_stdout_tail"]
    assert "FileNotFoundError" in rec.metadata["harness_stderr_tail"]


async def test_writing_300_mb_is_stopped_by_the_quota(attack_env) -> None:
    if os.geteuid() != 0:
        pytest.skip("the disk quota needs root")
    script = (
        "dd if=/dev/zero of=/workdir/big bs=1M count=300 || exit 3; echo abracadabra > /workdir/proof.txt"
    )
    rec = await _one(attack_env, proof_task(), script, limits=Limits(disk_mb=64))
    _agent_outcome(rec)
    assert rec.status is RolloutStatus.AGENT_FAILED and rec.metadata["harness_returncode"] == 3
    assert "No space left on device" in rec.metadata["harness_stderr_tail"]
    assert "disk" in rec.metadata["limits_hit"]


async def test_fork_bomb_is_stopped_by_the_pids_limit(attack_env) -> None:
    if os.geteuid() != 0:
        pytest.skip("cgroups need root")
    rec = await _one(
        attack_env, proof_task(), "bomb() { bomb | bomb & }; bomb; sleep 3; exit 0", limits=Limits(pids=64)
    )
    assert rec.status is not RolloutStatus.TIMEOUT and not rec.status.is_infra
    assert rec.reward == 0.0 and "pids" in rec.metadata["limits_hit"]


async def test_memory_hog_is_the_agents_failure(attack_env) -> None:
    if os.geteuid() != 0:
        pytest.skip("cgroups need root")
    rec = await _one(
        attack_env, proof_task(), "awk 'BEGIN{s=\"x\"; while(1) s=s s}'", limits=Limits(memory_mb=64)
    )
    _agent_outcome(rec)
    assert rec.status is RolloutStatus.AGENT_FAILED and "memory" in rec.metadata["limits_hit"]


async def test_harness_sigkilled_from_outside_is_infra_and_never_rerun(attack_env) -> None:
    """Before: `exec` took the missing exit code for a bwrap setup failure and ran the harness again in
    the same sandbox (28 of 28 injected kills ended `ok`, trained on a log mixing two runs)."""
    script = "echo ran >> /workdir/runs.txt; sleep 60"  # after the one model call `attacker` makes
    running = asyncio.ensure_future(_one(attack_env, proof_task(), script))
    proc = await _harness_launcher(attack_env)
    os.kill(proc.pid, signal.SIGKILL)
    rec = await asyncio.wait_for(running, 60)
    assert rec.status is RolloutStatus.INFRA_SANDBOX and rec.reward is None, rec.metadata
    assert "signal 9" in rec.metadata.get("error", "")
    calls = await attack_env.store.list_calls(rec.rollout_id)
    assert len(calls) == 1  # one run's calls only: the harness was not started again


async def _harness_launcher(env) -> Any:
    """The harness's bwrap launcher, once its first model call is recorded."""
    for _ in range(600):
        for sbx in list(env.backend._open):
            if sbx._execs and (sbx.host_workdir / "runs.txt").exists():
                return next(iter(sbx._execs))
        await asyncio.sleep(0.05)
    raise AssertionError("the harness never made its model call")
