"""A world's tool service, both sides: `serve` runs in the sandbox, the host reads its state.

An environment whose world is a state its tools change (a `synth.ToolEnv` session, or any object with a
`call(tool, args) -> (status, body)` and a `state()`) needs no service code of its own:

- `serve(port, token, call, state)` is the task's service (`TaskRuntime.service_argv`): `POST
  /call/<tool>` (MCP servers, shell CLIs) and `/tools/<tool>` (direct-tool harnesses) answer the agent's
  tool calls, and `GET /state` answers only the bearer of `token`. The token is in the service's argv,
  which no process of the agent can read (in a local sandbox each exec and service has its own PID
  namespace), so the state the host reads is what the tools did: the agent cannot write it without
  doing the task;
- `wait_for_service` (in `service_started`) waits until the service answers the host's token, so the
  agent starts only once the service holds its port (an agent that bound it first could serve a state
  of its own), a `VerifierError` (infra) when it never answers; `read_state` (in `verify`) reads the
  state apart from the agent, as a verifier run (`sandbox.verifier.run_verifier`: on Kubernetes in the
  Pod's services container once the agent's container has ended). A service that answered before the
  agent and no longer does is the agent's outcome (`TamperError`: reward 0, `agent_failed`): the agent
  reached it all along, and a tool call can hang, crash or bloat a world, so whether it still answers
  follows from what the agent sent. Only the reader failing on its own is infra (`VerifierError`);
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
from typing import TYPE_CHECKING, Any, NoReturn

from openforgerl.env.json_service import JsonHandler

if TYPE_CHECKING:
    from openforgerl.env.mcp_server import ListedTool
    from openforgerl.sandbox.base import Sandbox

__all__ = ["STATE_FILE", "function_tools", "read_state", "serve", "wait_for_service"]

ToolCall = Callable[[str, Any], tuple[int, Any]]
MAX_BODY = 1 << 20

NO_ANSWER = 3  # the reader's exit when the service, not the reader, failed
# Run with `python -I` in the sandbox: nothing is imported from the agent's workdir (cwd) or environment.
# argv: url, token, how long to wait for the service to start, how long it may take to answer; the state
# goes to stdout, or to the file named by a fifth argument (a verifier run's output folder). Exit
# `NO_ANSWER` when the service, not this program, failed: refused, reset, timed out, or not a 200.
_READ = (
    "import json, sys\n"
    "from openforgerl.env.tool_client import get_json\n"
    "url, token, wait, answer = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])\n"
    "try:\n"
    "    state = json.dumps(get_json('/state', url=url, token=token, wait_s=wait, timeout_s=answer))\n"
    "except Exception as exc:\n"
    "    print(f'no answer: {type(exc).__name__}: {exc}'[:500], file=sys.stderr)\n"
    f"    sys.exit({NO_ANSWER})\n"
    "open(sys.argv[5], 'w').write(state) if len(sys.argv) > 5 else print(state)\n"
)
STATE_FILE = "state.json"
# How long the state may take once the service accepted the connection. A world's `state()` is quick
# (a synthesised world's state and audit after 50 calls: 0.2 ms as JSON); one that takes longer is
# stuck behind a tool call the agent made.
ANSWER_S = 15.0


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


async def wait_for_service(
    sandbox: Sandbox, url: str, token: str, *, python: str = sys.executable, wait_s: float = 30.0
) -> Any:
    """The service's first state, read with the host's token by a program run in the sandbox's network
    (where the service listens) before the agent starts (`service_started`), waiting up to `wait_s` for
    the service to start. `python -I`: nothing in the workdir or the environment is imported into it. A
    service that does not answer is a `VerifierError` (the environment's fault, never the agent's 0)."""
    argv = [python, "-I", "-c", _READ, url, token, str(wait_s), str(ANSWER_S)]
    result = await sandbox.exec(argv, timeout_s=wait_s + ANSWER_S + 30)
    if result.returncode != 0:
        _broken(url, result.stderr)
    return _parsed(url, result.stdout)


async def read_state(
    sandbox: Sandbox, url: str, token: str, *, python: str = sys.executable, wait_s: float = 5.0
) -> Any:
    """The service's state for `verify`, read apart from the agent: a verifier run (`run_verifier`: a
    fresh process tree in the sandbox's network after the harness is gone; on Kubernetes the services
    container, after the agent's container has ended), `python -I`, its answer in the verifier's output
    folder. A service that no longer answers (refused, reset, not a 200, or no answer within `ANSWER_S`)
    is a `TamperError`: it answered before the agent started (`wait_for_service`), and the agent could
    reach it since. A state over the host's 8 MiB read limit is one too (the sandbox refuses the file).
    The reader itself failing is a `VerifierError`."""
    from openforgerl.sandbox.base import TamperError
    from openforgerl.sandbox.verifier import VERIFIER_OUT, run_verifier

    argv = [python, "-I", "-c", _READ, url, token, str(wait_s), str(ANSWER_S), f"{VERIFIER_OUT}/{STATE_FILE}"]
    run = await run_verifier(
        sandbox, argv, inputs={}, outputs=(STATE_FILE,), timeout_s=wait_s + ANSWER_S + 30
    )
    if run.result.returncode == NO_ANSWER and not run.result.timed_out:
        raise TamperError(
            f"the tool service at {url} no longer answered after the agent ran: {_tail(run.result.stderr)}"
        )
    if run.result.returncode != 0 or STATE_FILE not in run.outputs:
        _broken(url, run.result.stderr)
    return _parsed(url, run.outputs[STATE_FILE])


def _broken(url: str, stderr: bytes) -> NoReturn:
    from openforgerl.env.contract import VerifierError  # here: the service side stays stdlib-only

    raise VerifierError(f"the tool service at {url} did not answer its state: {_tail(stderr)}")


def _tail(stderr: bytes) -> str:
    return (stderr.decode(errors="replace").strip().splitlines()[-1:] or ["no output"])[0]


def _parsed(url: str, raw: bytes) -> Any:
    from openforgerl.env.contract import VerifierError

    try:
        return json.loads(raw)
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
