"""Run a command as the leader of its own process group; on SIGTERM take the whole group down.

    python process_group_guard.py <command...>

Started by `vllm_cpu.start_vllm` with `start_new_session=True` and `terminate_with_parent` (so the guard
gets SIGTERM when whoever started it dies, even by SIGKILL). Why a guard and not the hook on vLLM's
API server itself: measured with vllm-cpu 0.32, a SIGTERM in the first ~30 s of start-up (before the
engine core's handshake) is swallowed: the API server waits on its engine core, which sleeps, and the
three processes stayed up for minutes. The guard sends the group SIGTERM (vLLM's clean shutdown),
then SIGKILL after `GRACE_S`. Standard library only: it runs on the vLLM venv's python.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

GRACE_S = 10.0


def main(argv: list[str]) -> int:
    child = subprocess.Popen(argv)

    def down(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the group's SIGTERM reaches us too
        os.killpg(0, signal.SIGTERM)
        try:
            child.wait(GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(0, signal.SIGKILL)  # whatever is left of the group, this guard included

    signal.signal(signal.SIGTERM, down)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
