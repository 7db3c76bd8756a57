"""`python -I -m openforgerl.envs.tau2.oracle --actions FILE --url URL`: the scripted oracle of `tasks validate`.

It replays the task's gold actions (`solution/actions.json`: `[{tool, args}]`, upstream's `actions` with
requestor `assistant`) through the very route the agent's tools use (`POST /call/<tool>`), so the
verifier judges the oracle exactly as it judges an agent. An upstream `Error: …` reply is not a failure
of the oracle: upstream's own gold replay ignores such errors too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from openforgerl.envs.claw.client import ServiceUnreachable, call_tool


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m openforgerl.envs.tau2.oracle")
    ap.add_argument("--actions", type=Path, required=True)
    ap.add_argument("--url", required=True)
    ns = ap.parse_args(argv)
    for action in json.loads(ns.actions.read_text()):
        try:
            status, _ = call_tool(str(action["tool"]), dict(action["args"]), url=ns.url)
        except ServiceUnreachable as exc:
            raise SystemExit(f"tau2 oracle: {exc}") from None
        print(f"{action['tool']}: {status}", file=sys.stderr)


if __name__ == "__main__":
    main()
