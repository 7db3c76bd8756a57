"""`python -I -m openforgerl.envs.toolworld.service PORT TOKEN FOLDER`: a task's world in its sandbox.

FOLDER holds `world.json` (`synth.world_doc`), `state.json` and `faults.json`, laid out by the runtime;
they are read before the service listens, so the agent (which starts once the service answers the
host) cannot change them for it. Tool calls are a `StubSession`'s (the same semantics, audit and fault
injection as synthesis validated the task with); `/state`, for the host's token only, answers the
state and the audit together.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from openforgerl.env.tool_service import serve
from openforgerl.synth.toolenv import StubSession, env_from_document


def main(argv: list[str] | None = None) -> None:
    port, token, folder = argv or sys.argv[1:]
    root = Path(folder)
    env = env_from_document(json.loads((root / "world.json").read_text()))
    state = json.loads((root / "state.json").read_text())
    session = StubSession(env, state, {}, json.loads((root / "faults.json").read_text()))
    serve(int(port), token, session.call, lambda: {"state": session.state(), "audit": session.audit})


if __name__ == "__main__":
    main()
