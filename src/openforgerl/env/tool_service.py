"""A world's tool service, both sides: `serve` runs in the sandbox, the host reads its state.

An environment whose world is a state its tools change (a `synth.ToolEnv` session, or any object with a
`call(tool, args) -> (status, body)` and a `state()`) needs no service code of its own:

- `serve(port, token, call, state)` is the task's service (`TaskRuntime.service_argv`): `POST
  /call/<tool>` (MCP servers, shell CLIs) and `/tools/<tool>` (direct-tool harnesses) answer the agent's
  tool calls, and `GET /state` answers only the bearer of `token`. The token is in the service's argv,
  which no process of the agent can read (in a local sandbox each exec and service has its own PID
  namespace), so the state the host reads is what the tools did: the agent cannot write it without
  doing the task;
- `read_state` reads that state from the host: in `service_started`, waiting until it answers, so the
  agent starts only once the service holds its port (an agent that bound it first could serve a state
  of its own), and in `verify`, a `VerifierError` when the service does not answer;
- `function_tools` lists tools (a name, a description, `input_schema()`) as OpenAI function schemas.

The service side imports the stdlib only (it starts in every sandbox, on the rollout's clock).
"""

from __future__ import annotations

import hmac
import json
import sys
import threading
from collections.abc import Callable, Iterable
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from openforgerl.env.json_service import JsonHandler

if TYPE_CHECKING:
    from openforgerl.env.mcp_server import ListedTool
    from openforgerl.sandbox.base import Sandbox

__all__ = ["function_tools", "read_state", "serve"]

ToolCall = Callable[[str, Any], tuple[int, Any]]
MAX_BODY = 1 << 20

# Run with `python -I` in the sandbox: nothing is imported from the agent's workdir (cwd) or environment.
_READ = (
    "import json, sys\n"
    "from openforgerl.env.tool_client import get_json\n"
    "url, token, wait = sys.argv[1], sys.argv[2], float(sys.argv[3])\n"
    "print(json.dumps(get_json('/state', url=url, token=token, wait_s=wait)))\n"
)


def _answer(status: int, body: Any) -> tuple[int, Any]:
    """A tool's (status, body) in the shape the MCP bridge and `zero` read: `result` or `error`."""
    if status == 200:
        return status, {"result": body}
    return status, body if isinstance(body, dict) and "error" in body else {"error": body}


def serve(
    port: int, token: str, call: ToolCall, state: Callable[[], Any], *, host: str = "127.0.0.1"
) -> None:
    """Serve the world's tools and its host-only `/state` on `host:port` until the process is killed.
    Calls run one at a time (the world is one state; the server's threads only keep a slow client from
    blocking the others)."""
    lock = threading.Lock()
    bearer = f"Bearer {token}".encode()

    class Handler(JsonHandler):
        def do_GET(self) -> None:
            given = (self.headers.get("Authorization") or "").encode()
            if self.path != "/state" or not hmac.compare_digest(given, bearer):
                return self._send(404, {"error": "not found"})
            with lock:
                now = state()
            self._send(200, now)

        def do_POST(self) -> None:
            raw = self._read_body(MAX_BODY)
            if raw is None:
                return

            def run(tool: str, args: Any) -> tuple[int, Any]:
                if not isinstance(args, dict):
                    return 400, {"error": "the arguments must be a JSON object"}
                with lock:
                    return _answer(*call(tool, args))

            self._answer_tool_call(raw, run)

    with ThreadingHTTPServer((host, port), Handler) as server:
        server.serve_forever()


async def read_state(
    sandbox: Sandbox, url: str, token: str, *, python: str = sys.executable, wait_s: float = 5.0
) -> Any:
    """The service's state, read with the host's token by a program run in the sandbox's network (where
    the service listens) once the agent is not running: before it starts (`service_started`, with a
    `wait_s` long enough for the service to start) or after its harness is gone (`verify`). The program is
    `python -I`, so nothing in the agent's workdir or environment is imported into it. A service that does
    not answer within `wait_s` is a `VerifierError` (the environment's fault, never the agent's 0)."""
    from openforgerl.env.contract import VerifierError  # here: the service side stays stdlib-only

    argv = [python, "-I", "-c", _READ, url, token, str(wait_s)]
    result = await sandbox.exec(argv, timeout_s=wait_s + 30)
    if result.returncode != 0:
        tail = result.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise VerifierError(f"the tool service at {url} did not answer its state: {tail[0]}")
    try:
        return json.loads(result.stdout)
    except ValueError as exc:
        raise VerifierError(f"the tool service at {url} answered no JSON state: {exc}") from None


def function_tools(tools: Iterable[ListedTool]) -> list[dict[str, Any]]:
    """OpenAI function schemas of `tools` (`TaskRuntime.function_tools`)."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.input_schema()},
        }
        for t in tools
    ]
