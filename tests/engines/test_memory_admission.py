"""The local engine admits sequences by a memory budget, refuses what can never fit, and drops the
sequences of clients that went away. Real engine on the tiny model, real HTTP, concurrent clients."""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest

from openforgerl.engines.local.background import BackgroundServer
from openforgerl.engines.local.engine import LocalEngine
from openforgerl.engines.local.memory import ModelShape, parse_size

CONTEXT = 512
PROMPT = 200
MAX_TOKENS = CONTEXT - PROMPT  # every request may reach the full context: admission reserves all of it
CLIENTS = 6


def _server(tiny_dir: Path, budget: int | None, context: int = CONTEXT) -> BackgroundServer:
    engine = LocalEngine.from_pretrained(str(tiny_dir), memory_budget=budget)
    engine.loaded.max_model_len = context
    return BackgroundServer(engine)


def _shape(tiny_dir: Path) -> ModelShape:
    from transformers import AutoConfig

    return ModelShape.of(AutoConfig.from_pretrained(tiny_dir), 4)


def _post(url: str, body: dict, timeout: float = 600) -> tuple[int, dict]:
    req = urllib.request.Request(
        url + "/v1/completions", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def _metrics(url: str) -> dict[str, int]:
    with urllib.request.urlopen(url + "/metrics", timeout=60) as r:
        return {k: int(v) for k, v in (line.split() for line in r.read().decode().splitlines())}


def _idle(url: str) -> bool:
    m = _metrics(url)
    return m["openforgerl_engine_running"] == m["openforgerl_engine_waiting"] == 0


def _full_context(i: int) -> dict:
    return {
        "model": "tiny",
        "prompt": [10 + (i * 7 + j) % 3000 for j in range(PROMPT)],
        "max_tokens": MAX_TOKENS,
        "ignore_eos": True,
        "temperature": 1.0,
        "seed": i,
    }


def _load(url: str) -> list[tuple[int, dict]]:
    with ThreadPoolExecutor(CLIENTS) as pool:
        return list(pool.map(lambda i: _post(url, _full_context(i)), range(CLIENTS)))


@pytest.fixture(scope="module")
def two_fit(tiny_dir: Path) -> int:
    """A budget with room for two full-context sequences and not three."""
    shape = _shape(tiny_dir)
    budget = shape.need([CONTEXT], PROMPT, CONTEXT)
    assert shape.need([CONTEXT, CONTEXT], PROMPT, CONTEXT) > budget
    return budget


@pytest.fixture(scope="module")
def budgeted(tiny_dir: Path, two_fit: int) -> Iterator[BackgroundServer]:
    server = _server(tiny_dir, two_fit)
    yield server
    server.close()


def test_concurrent_full_context_prompts_queue_within_the_budget_and_all_answer(
    budgeted: BackgroundServer,
) -> None:
    answers = _load(budgeted.url)
    assert [status for status, _ in answers] == [200] * CLIENTS, answers
    assert all(body["usage"]["completion_tokens"] == MAX_TOKENS for _, body in answers)
    m = _metrics(budgeted.url)
    assert m["openforgerl_engine_peak_running"] == 2, m  # never three at once: their KV would pass the budget
    assert m["openforgerl_engine_memory_waits_total"] >= 1, m  # the rest queued instead of running
    assert _until(
        lambda: _idle(budgeted.url), 30
    )  # the last finished row leaves the batch on the core's next turn
    with urllib.request.urlopen(budgeted.url + "/health", timeout=30) as r:
        assert r.status == 200  # still up


def test_control_without_the_budget_the_same_load_runs_past_it(tiny_dir: Path, two_fit: int) -> None:
    """The same six clients on an engine with an unbounded budget decode more than two at once: the
    queueing above is the budget's doing, and that concurrency's estimate is over it."""
    server = _server(tiny_dir, 2**62)
    try:
        answers = _load(server.url)
        peak = _metrics(server.url)["openforgerl_engine_peak_running"]
    finally:
        server.close()
    assert [status for status, _ in answers] == [200] * CLIENTS
    assert peak > 2
    assert _shape(tiny_dir).need([CONTEXT] * (peak - 1), PROMPT, CONTEXT) > two_fit


def test_a_request_that_can_never_fit_is_a_400_and_a_smaller_one_runs(tiny_dir: Path) -> None:
    shape = _shape(tiny_dir)
    budget = shape.need([], PROMPT, PROMPT + 40)  # room for 40 new tokens, not for 300
    server = _server(tiny_dir, budget)
    try:
        status, body = _post(server.url, _full_context(0))
        assert status == 400 and "over the engine's memory budget" in body["error"]["message"], body
        chat = {
            "model": "tiny",
            "messages": [{"role": "user", "content": "hi " * 150}],
            "max_tokens": 200,
            "stream": True,
        }
        req = urllib.request.Request(
            server.url + "/v1/chat/completions",
            data=json.dumps(chat).encode(),
            headers={"Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=120)
        assert err.value.code == 400 and "memory budget" in json.loads(err.value.read())["error"]["message"]
        status, body = _post(server.url, {**_full_context(0), "max_tokens": 20})  # control: it fits
        assert status == 200 and body["usage"]["completion_tokens"] == 20
        assert _metrics(server.url)["openforgerl_engine_waiting"] == 0  # the refused ones were never queued
    finally:
        server.close()


@pytest.fixture(scope="module")
def roomy(tiny_dir: Path) -> Iterator[BackgroundServer]:
    server = _server(tiny_dir, None, context=8192)
    yield server
    server.close()


def _open(url: str, body: dict) -> http.client.HTTPConnection:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    conn.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    return conn


def _until(pred, timeout: float = 60.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


LONG = {
    "model": "tiny",
    "messages": [{"role": "user", "content": "Tell me everything."}],
    "max_tokens": 4000,
    "ignore_eos": True,
    "temperature": 1.0,
}


def test_a_disconnected_streaming_client_stops_its_generation(roomy: BackgroundServer) -> None:
    before = _metrics(roomy.url)
    conn = _open(roomy.url, {**LONG, "stream": True})
    resp = conn.getresponse()
    assert resp.status == 200
    for _ in range(5):
        assert resp.readline().startswith(b"data: ") and resp.readline() == b"\n"
    grown = _metrics(roomy.url)["openforgerl_engine_generated_tokens_total"]
    assert _until(
        lambda: _metrics(roomy.url)["openforgerl_engine_generated_tokens_total"] > grown + 20
    )  # control
    conn.sock.shutdown(2)
    conn.close()
    assert _until(
        lambda: (
            _metrics(roomy.url)["openforgerl_engine_aborted_total"]
            == before["openforgerl_engine_aborted_total"] + 1
        )
    ), _metrics(roomy.url)
    assert _until(lambda: _idle(roomy.url), 30)
    settled = _metrics(roomy.url)["openforgerl_engine_generated_tokens_total"]
    time.sleep(1.0)
    after = _metrics(roomy.url)["openforgerl_engine_generated_tokens_total"]
    assert after == settled and after - before["openforgerl_engine_generated_tokens_total"] < 4000


def test_a_disconnected_non_streaming_client_stops_its_generation(roomy: BackgroundServer) -> None:
    before = _metrics(roomy.url)
    conn = _open(roomy.url, LONG)
    start = before["openforgerl_engine_generated_tokens_total"]
    assert _until(
        lambda: _metrics(roomy.url)["openforgerl_engine_generated_tokens_total"] > start + 20
    )  # control
    conn.sock.shutdown(2)
    conn.close()
    assert _until(
        lambda: (
            _metrics(roomy.url)["openforgerl_engine_aborted_total"]
            == before["openforgerl_engine_aborted_total"] + 1
        )
    ), _metrics(roomy.url)
    assert _until(lambda: _idle(roomy.url), 30)
    settled = _metrics(roomy.url)["openforgerl_engine_generated_tokens_total"]
    time.sleep(1.0)
    assert _metrics(roomy.url)["openforgerl_engine_generated_tokens_total"] == settled < start + 4000


def test_the_startup_line_names_the_limit(roomy: BackgroundServer) -> None:
    line = roomy.engine.budget.startup_line(8192, 256)
    assert line.startswith("memory budget ") and "available at start" in line and "8192 tokens" in line, line
    assert "run at once" in line
    shape = roomy.engine.budget.shape
    budget = replace(
        roomy.engine.budget, limit=shape.need([CONTEXT], CONTEXT, CONTEXT), source="--memory-budget X"
    )
    assert budget.startup_line(CONTEXT, 256).endswith("so up to 2 run at once; the rest wait in order")
    assert budget.startup_line(CONTEXT, 1).endswith(
        "so up to 1 run at once (--max-batch); the rest wait in order"
    )
    assert "requests that long get a 400" in budget.startup_line(8192, 256)


@pytest.mark.parametrize(
    ("text", "size"),
    [("4GiB", 4 * 2**30), ("512MiB", 512 * 2**20), ("1.5G", 1_500_000_000), ("2000000", 2_000_000)],
)
def test_memory_budget_sizes_parse(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "4 parsecs", "-1G", "0"])
def test_a_bad_memory_budget_is_a_clear_error(text: str) -> None:
    with pytest.raises(ValueError, match="expected a size such as 4GiB"):
        parse_size(text)
