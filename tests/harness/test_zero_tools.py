"""zero's tool box and loop against a real in-process HTTP tool service (no model needed here)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from openforgerl.harness.zero.tools import load_toolbox


class _Service(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        args = json.loads(self.rfile.read(int(self.headers["content-length"])))
        name = self.path.removeprefix("/tools/")
        status, body = (
            (200, {"result": {"tool": name, "args": args}}) if name != "boom" else (400, {"error": "bad id"})
        )
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def service() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Service)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _schema(name: str) -> dict[str, object]:
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": {}}},
    }


def test_task_tools_go_to_the_service_and_override_builtins(service: str, tmp_path: Path) -> None:
    spec = tmp_path / "tools.json"
    spec.write_text(
        json.dumps(
            {"tools": [_schema("todo_add"), _schema("write_file"), _schema("boom")], "service_url": service}
        )
    )
    box = load_toolbox(spec, tmp_path)
    names = [s["function"]["name"] for s in box.schemas]
    assert names == ["todo_add", "write_file", "boom", "read_file", "bash"]
    assert json.loads(box.run("todo_add", '{"title": "x"}')) == {"tool": "todo_add", "args": {"title": "x"}}
    assert json.loads(box.run("write_file", '{"path": "a"}'))["tool"] == "write_file"  # the service's
    assert box.run("boom", "{}") == "error (400): bad id"
    assert not (tmp_path / "a").exists()


def test_builtins_act_on_the_workdir_and_errors_are_text(tmp_path: Path) -> None:
    box = load_toolbox(None, tmp_path)
    assert "wrote 2 characters" in box.run("write_file", '{"path": "d/f.txt", "content": "hi"}')
    assert box.run("read_file", '{"path": "d/f.txt"}') == "hi"
    assert box.run("bash", '{"command": "cat d/f.txt; exit 3"}') == "exit code 3\nhi"
    assert "outside the working directory" in box.run("write_file", '{"path": "../x", "content": ""}')
    assert box.run("nope", "{}") == "error: unknown tool 'nope'"
    assert box.run("bash", "not json").startswith("error: JSONDecodeError")
