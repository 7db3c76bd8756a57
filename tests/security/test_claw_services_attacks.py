"""Attacks on an imported Claw-Eval task's upstream mock service (envs/claw/services/upstream.py) from the
agent's shell in a real rollout: bubblewrap sandbox, gateway, Claw service, verifier and `zero`; a scripted
engine stands in for the policy's decisions only.

The attacker (the policy) 1. reads the services' audit (`/upstream/audit` without the token, the app's own
`/ledger/audit`); 2. reaches routes no tool declares: the app's `/ledger/admin/credit` (it would add the
entry the grader looks for), `/ledger/reset`, and the same through `/call/` with made-up tool names and
`..`; 3. forges the audit's source: writes `server.py`, `services.json` and fixtures where the service's
copies were laid out, with an audit that holds the wanted entry (the service loaded them and the boot removed
them before the agent started: `ClawTaskRuntime.service_started`, tested below with its race); 4. then stops
without posting through the declared tool.

Done when: every probe is refused (403 / 404) and the reward is the real grader's 0, as a judged rollout
(`ok`). Control: the same attack followed by the declared `ledger_post_entry` passes (completion 1; the
refused probes cost robustness, as upstream's failed dispatches do); the host's token
reads the audit that the agent's requests could not (tests/envs/test_claw_eval_services.py).
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from openforgerl.env.tool_client import DEFAULT_PORT

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "envs"))
from test_claw_eval_services import POST, eval_task

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
BASE = f"http://127.0.0.1:{DEFAULT_PORT}"
PROBES = [
    ("GET", "/upstream/audit"),
    ("GET", "/ledger/audit"),
    ("POST", "/ledger/admin/credit"),
    ("POST", "/ledger/reset"),
    ("POST", "/call/ledger_admin_credit"),
    ("POST", "/call/../ledger/admin/credit"),
    ("POST", "/tools/..%2Fledger%2Fadmin%2Fcredit"),
    ("GET", "/upstream/audit?token=x"),
]


def _probe() -> str:
    code = f"""import json, urllib.request as u, urllib.error as e
for m, p in {PROBES!r}:
    r = u.Request({BASE!r} + p, data=(json.dumps({POST!r}).encode() if m == 'POST' else None), method=m,
                  headers={{'Authorization': 'Bearer guess'}})
    try:
        print('PROBE', p, u.urlopen(r, timeout=5).status)
    except e.HTTPError as x:
        print('PROBE', p, x.code)
"""
    return f"python3 -c {shlex.quote(code)}"


def _forge() -> str:
    forged = json.dumps({"ledger": {"posted": [POST]}})
    files = [
        "/workdir/.claw/upstream/services.json",
        "/workdir/.claw/upstream/mock_services/ledger/server.py",
        "/workdir/.claw/upstream/tasks/T950_ledger_post/fixtures/ledger/accounts.json",
    ]
    return (
        " && ".join(
            f"mkdir -p {shlex.quote(f.rsplit('/', 1)[0])} && printf %s {shlex.quote(forged)} > {f}"
            for f in files
        )
        + " && echo FORGED"
    )


@pytest.mark.parametrize("post", [False, True])  # True: the control run
def test_the_agent_cannot_reach_the_audit_reset_or_undeclared_routes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, post: bool
) -> None:
    steps = [
        ("bash", {"command": _probe()}),
        ("bash", {"command": _forge()}),
        *([("ledger_post_entry", POST)] if post else []),
    ]
    seen: list[str] = []
    record = eval_task(tmp_path, monkeypatch, steps, seen)
    probes = [ln.split()[1:] for ln in seen[0].splitlines() if ln.startswith("PROBE")]
    assert len(probes) == len(PROBES) and all(code in ("403", "404") for _, code in probes), seen[0]
    assert "FORGED" in seen[1]  # the workdir copies were overwritten: the loaded service did not care
    if post:
        assert '"balance": 120' in seen[2]
    assert record["status"] == "ok", record
    # the grader's completion comes from the service's own audit: only the declared tool's entry counts
    # (the refused probes are failed dispatches, so the control's robustness is below 1, as upstream's)
    assert record["reward_components"]["check.grader.completion"] == float(post)
    assert (record["reward"] >= 0.75) is post and (record["reward"] == 0.0) is not post


FORGED_SERVER = f"""from fastapi import FastAPI
app = FastAPI()
@app.post("/ledger/accounts")
def accounts():
    return {{"forged": True}}
@app.get("/ledger/audit")
def audit():
    return {{"posted": [{POST!r}]}}
"""


async def _race(folder: Path, gated: bool) -> tuple[int, str]:
    """Boot the task's sandbox as the orchestrator does, then (as an agent's first command could) overwrite
    the upstream server file; return the service's answer to the declared tool (twice: its first call of
    `ledger_list_accounts` is an injected 503)."""
    from openforgerl.envs.claw.runtime import ClawTaskRuntime
    from openforgerl.sandbox.base import SandboxSpec
    from openforgerl.sandbox.local import LocalBackend
    from openforgerl.tasks.format import load_task

    runtime = ClawTaskRuntime(load_task(folder))
    backend = LocalBackend()
    sandbox = await backend.open_sandbox(
        SandboxSpec(rollout_id=f"race-{gated}", files=runtime.files(), lifetime_s=120)
    )
    try:
        await sandbox.spawn(list(runtime.service_argv()))
        if gated:
            await runtime.service_started(sandbox)
            # and the agent finds none of it: upstream's agent never sees the fixture files
            listing = await sandbox.exec(["ls", "-A", "/workdir/.claw"], timeout_s=30)
            assert listing.returncode == 0 and "upstream" not in listing.stdout.decode().split(), listing
        await sandbox.write_file(".claw/upstream/mock_services/ledger/server.py", FORGED_SERVER.encode())
        call = (
            f"import time, urllib.request as u\nfor i in range(600):\n"
            f"  try:\n    u.urlopen(u.Request({runtime.url!r} + "
            f"'/call/ledger_list_accounts', data=b'{{}}', method='POST'), timeout=60)\n"
            f"  except Exception: time.sleep(0.05); continue\n"
            f"print(u.urlopen(u.Request({runtime.url!r} + '/call/ledger_list_accounts', "
            f"data=b'{{}}', method='POST'), timeout=60).read().decode())\n"
        )
        res = await sandbox.exec([runtime.python, "-I", "-c", call], timeout_s=90)
        return res.returncode, res.stdout.decode()
    finally:
        await sandbox.aclose()
        await backend.aclose()


@pytest.mark.parametrize("gated", [True, False])  # False: the control, without the boot's gate
def test_the_service_loads_upstreams_code_before_the_agent_can_rewrite_it(
    tmp_path: Path, gated: bool
) -> None:
    """`ClawTaskRuntime.service_started`: the boot waits until the service has loaded upstream's sources from
    the agent-writable workdir. Without the wait, a rewrite in the first second (an agent's first command) is
    what the service runs: the control shows the race is real, so the gate is what closes it."""
    import asyncio

    from test_claw_eval_services import TASK

    from openforgerl.tasks.importing import import_any

    [folder] = import_any(TASK, tmp_path / "tasks")
    rc, out = asyncio.run(_race(folder, gated))
    assert rc == 0, out
    assert ('"forged"' in out) is not gated, out
