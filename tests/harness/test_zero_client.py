"""zero's stdlib Chat Completions client keeps the openai SDK's retry contract."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from openforgerl.harness.zero.client import ChatClient, ModelAPIError, drop_none


def _serve(statuses: list[int], seen: list[dict]) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append({"path": self.path, "auth": self.headers["Authorization"], "body": body})
            status = statuses.pop(0) if statuses else 200
            answer = {"choices": [{"message": {"role": "assistant", "content": "ok", "reasoning": None}}]}
            data = json.dumps(answer if status == 200 else {"error": {"message": "busy"}}).encode()
            self.send_response(status)
            if status == 429:
                self.send_header("Retry-After-Ms", "50")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_retries_503_and_429_then_answers() -> None:
    seen: list[dict] = []
    server = _serve([503, 429], seen)
    client = ChatClient(f"http://127.0.0.1:{server.server_port}/v1", "k", max_retries=2)
    answer = client.create({"model": "m", "messages": []}, timeout=5)
    server.shutdown()
    assert drop_none(answer["choices"][0]["message"]) == {"role": "assistant", "content": "ok"}
    assert len(seen) == 3 and seen[0]["path"] == "/v1/chat/completions" and seen[0]["auth"] == "Bearer k"


def test_gives_up_after_retries_and_never_retries_400() -> None:
    seen: list[dict] = []
    server = _serve([500, 500, 500, 500], seen)
    client = ChatClient(f"http://127.0.0.1:{server.server_port}/v1", "k", max_retries=1)
    with pytest.raises(ModelAPIError) as err:
        client.create({"model": "m", "messages": []}, timeout=5)
    assert err.value.status == 500 and len(seen) == 2
    seen.clear()
    server_400 = _serve([400], seen)
    client = ChatClient(f"http://127.0.0.1:{server_400.server_port}/v1", "k", max_retries=3)
    with pytest.raises(ModelAPIError) as err:
        client.create({"model": "m", "messages": []}, timeout=5)
    assert err.value.status == 400 and len(seen) == 1
    server.shutdown()
    server_400.shutdown()


def test_connection_refused_is_a_model_error_within_the_deadline() -> None:
    client = ChatClient("http://127.0.0.1:9/v1", "k", max_retries=5)
    t0 = time.monotonic()
    with pytest.raises(ModelAPIError):
        client.create({"model": "m", "messages": []}, timeout=1, deadline=time.monotonic() + 1.0)
    assert time.monotonic() - t0 < 2.0
