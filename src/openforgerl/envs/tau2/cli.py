"""`python -m openforgerl.envs.tau2.cli TOOL [JSON]`: one tau2 tool call from a shell (shell-only harnesses).

Posts the JSON arguments to the rollout's tau2 service (`OPENFORGERL_CLAW_URL`) like the MCP server and
`zero` do, prints the reply as JSON, and exits 1 on an error reply (upstream's `Error: …`), 2 when the
service cannot be reached.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from openforgerl.env.tool_client import ServiceUnreachable, call_tool

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip().splitlines()[0])
        return 0 if args else 2
    try:
        status, body = call_tool(args[0], json.loads(args[1]) if len(args) > 1 else {})
    except ServiceUnreachable as exc:
        print(f"tau2 service unreachable: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"the arguments must be one JSON object: {exc}", file=sys.stderr)
        return 1
    ok = status == 200 and isinstance(body, dict)
    print(json.dumps(body.get("result") if ok else body, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
