"""Every shipped GUI task is well posed in real sandboxes: no-op -> 0, oracle -> 1 (`envs.validate`).

One bubblewrap sandbox per task (its own netns, Chromium or Xvfb desktop, apps, computer service);
the oracle drives the screen through the computer service like a harness would; the verifier runs in
its own sandbox after the oracle's processes are gone. Tasks run `GUI_VALIDATE_CONCURRENCY` at a time
(default 4: Chromium start is CPU-bound on 2 cores). The per-task table goes to the test log.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest
from gui_helpers import GUI_SUITE, needs_gui

from openforgerl.tasks.format import find_tasks
from openforgerl.tasks.loader import load_runtime
from openforgerl.tasks.validate import validate_tasks

pytestmark = [pytest.mark.gui, needs_gui]


def test_every_gui_task_oracle_one_noop_zero():
    runtimes = [load_runtime(p) for p in find_tasks(GUI_SUITE)]
    t0 = time.monotonic()
    results = asyncio.run(
        validate_tasks(runtimes, concurrency=int(os.environ.get("GUI_VALIDATE_CONCURRENCY", "4")))
    )
    wall = time.monotonic() - t0
    for r in sorted(results, key=lambda r: -r.seconds):
        print(
            f"{r.task_id:32s} noop={r.noop_reward} oracle={r.oracle_reward} {r.seconds:5.1f}s {r.error[:200]}"
        )
    print(f"{len(results)} GUI tasks validated in {wall:.0f} s")
    bad = [(r.task_id, r.noop_reward, r.oracle_reward, r.error[:300]) for r in results if not r.ok]
    assert not bad
    assert len(results) >= 40
