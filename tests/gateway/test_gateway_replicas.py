"""Several `openforgerl gateway` processes on one PostgreSQL call log (`--store postgresql://...`).

The load test: three real gateway processes sharing one database and one key secret, a scripted
engine behind them, many short rollouts driven by the OpenAI SDK, each rollout's calls spread over
the replicas, and one replica SIGKILLed midway. Clients fail over to a live replica as a load balancer
would. What must hold: every call a client saw finish has exactly one record, with the text the
client got (lost: none; overwritten or doubled: none; no conflict kept aside), and every rollout that
was ever stored ends closed with a status, the orchestrator's verdict written through whichever
replica is alive.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import aiohttp
import pytest
from openai import AsyncOpenAI

from openforgerl.engines.scripted import Faults, ScriptedEngine, Turn
from openforgerl.engines.scripted_server import start_scripted_server
from openforgerl.store import open_store

TOKEN, SECRET = "replica-test-admin-token", "replica-test-key-secret"
ROLLOUTS = 210
IN_FLIGHT = 21  # rollouts driven at once
CALLS_PER_ROLLOUT = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _gateway_args(engine_url: str, store: str, port: int, admin: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "openforgerl.gateway",
        "--engine",
        engine_url,
        "--model",
        "m",
        "--port",
        str(port),
        "--admin-port",
        str(admin),
        "--store",
        store,
    ]


def _log_file(path: Path) -> BinaryIO:
    return open(path, "wb")


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-2000:]


@dataclass
class Replica:
    name: str
    proc: asyncio.subprocess.Process
    model_url: str
    admin_url: str

    @classmethod
    async def start(cls, name: str, engine_url: str, store: str, log: Path) -> Replica:
        port, admin = _free_port(), _free_port()
        env = {**os.environ, "OPENFORGERL_ADMIN_TOKEN": TOKEN, "OPENFORGERL_GATEWAY_SECRET": SECRET}
        with _log_file(log) as out:
            proc = await asyncio.create_subprocess_exec(
                *_gateway_args(engine_url, store, port, admin), env=env, stdout=out, stderr=subprocess.STDOUT
            )
        replica = cls(name, proc, f"http://127.0.0.1:{port}", f"http://127.0.0.1:{admin}")
        async with aiohttp.ClientSession() as http:
            for _ in range(600):
                if proc.returncode is not None:
                    raise AssertionError(f"gateway {name} exited: {_tail(log)}")
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(replica.admin_url + "/healthz") as r:
                        if r.status == 200:
                            return replica
                await asyncio.sleep(0.1)
        raise AssertionError(f"gateway {name} did not come up: {_tail(log)}")

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    async def kill(self) -> None:
        if self.proc.returncode is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()


def _echo_nonce(turn: Turn) -> str:
    """The engine's decision: repeat the nonce it was asked about (an answer names its call)."""
    return f"answer to {turn.messages[-1].get('content', '')} " + "tok " * 6


@dataclass
class Run:
    replicas: list[Replica]
    http: aiohttp.ClientSession
    finished: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # nonce -> rollout, text, replica
    cut: int = 0  # calls that failed (their replica was killed under them)
    abandoned: list[str] = field(default_factory=list)  # opens whose answer never came
    done: int = 0
    halfway: asyncio.Event = field(default_factory=asyncio.Event)

    def live(self, n: int) -> list[Replica]:
        """The live replicas, starting at the n-th (a round-robin balancer)."""
        ring = self.replicas[n % len(self.replicas) :] + self.replicas[: n % len(self.replicas)]
        return [r for r in ring if r.alive]

    async def admin(self, n: int, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        """POST to the first live replica from n that answers (failing over on a dead one)."""
        for replica in self.live(n):
            try:
                async with self.http.post(
                    replica.admin_url + path, json=body, headers={"Authorization": f"Bearer {TOKEN}"}
                ) as r:
                    return r.status, await r.json()
            except (TimeoutError, aiohttp.ClientError):
                continue
        raise AssertionError("no replica answered")

    async def call(self, n: int, ro: dict[str, str]) -> None:
        """One model call, retried (as a new call) on the next live replica when its replica dies."""
        rid = ro["rollout_id"]
        for replica in self.live(n):
            nonce = uuid.uuid4().hex
            client = AsyncOpenAI(
                base_url=f"{replica.model_url}/r/{rid}/v1", api_key=ro["api_key"], max_retries=0, timeout=30
            )
            try:
                out = await client.chat.completions.create(
                    model="m", messages=[{"role": "user", "content": nonce}]
                )
            except Exception:  # its replica was killed under it: not finished, nothing promised
                self.cut += 1
                continue
            finally:
                await client.close()
            self.finished[nonce] = (rid, out.choices[0].message.content or "", replica.name)
            return
        raise AssertionError("no replica served the call")

    async def rollout(self, n: int) -> None:
        rid = f"ro-{n:04d}-{uuid.uuid4().hex[:8]}"
        try:
            status, ro = await self.admin(n, "/rollouts", {"rollout_id": rid, "task_id": "t"})
        except AssertionError:
            raise
        if status != 200:  # its replica died after storing it, or before: the orchestrator ends it
            self.abandoned.append(rid)
            await self.admin(n + 1, f"/rollouts/{rid}/outcome", {"status": "infra_error:gateway"})
            return
        for i in range(CALLS_PER_ROLLOUT):
            await self.call(n + 1 + i, ro)
        status, body = await self.admin(n + 2, f"/rollouts/{rid}/outcome", {"status": "ok", "reward": 1.0})
        assert status == 200, body
        self.done += 1
        if self.done >= ROLLOUTS // 3:
            self.halfway.set()


@pytest.mark.timeout(240)
async def test_three_replicas_on_one_postgres_lose_nothing_when_one_is_killed(postgres_url, tmp_path, fmt):
    engine = ScriptedEngine(_echo_nonce, fmt=fmt, faults=Faults(token_delay_s=0.002), keep_produced=False)
    server = await start_scripted_server(engine)
    replicas = await asyncio.gather(
        *(Replica.start(f"g{i}", server.url + "/v1", postgres_url, tmp_path / f"g{i}.log") for i in range(3))
    )
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            run = Run(list(replicas), http)
            queue: asyncio.Queue[int] = asyncio.Queue()
            for n in range(ROLLOUTS):
                queue.put_nowait(n)

            async def worker() -> None:
                while not queue.empty():
                    await run.rollout(queue.get_nowait())

            async def killer() -> None:
                await run.halfway.wait()
                await replicas[0].kill()  # mid-load: its in-flight calls are cut

            kill = asyncio.create_task(killer())
            await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
            await kill
    finally:
        for replica in replicas:
            await replica.kill()
        await server.aclose()

    served = Counter(name for _, _, name in run.finished.values())
    assert served["g0"] > 0 and served["g1"] > 0 and served["g2"] > 0  # every replica took load
    assert run.cut > 0  # the kill did cut calls in flight (else this test shows nothing)
    assert len(run.finished) >= ROLLOUTS * CALLS_PER_ROLLOUT - len(run.abandoned) * CALLS_PER_ROLLOUT

    store = open_store(postgres_url)
    try:
        rollouts = store.read_rollouts()
        by_nonce: dict[str, list[Any]] = {}
        for ro in rollouts:
            calls = store.read_calls(ro.rollout_id)
            assert len({c.index for c in calls}) == len(calls)
            for rec in calls:
                by_nonce.setdefault(rec.request["messages"][-1]["content"], []).append(rec)
        conflicts = store.read_conflicts()
    finally:
        store.close()
    lost = [nonce for nonce in run.finished if nonce not in by_nonce]
    assert lost == [], f"{len(lost)} finished calls lost of {len(run.finished)}"
    for nonce, (rid, text, _) in run.finished.items():
        (rec,) = by_nonce[nonce]  # exactly one record: never overwritten, never doubled
        assert rec.rollout_id == rid and rec.error is None and rec.response_text == text and nonce in text
    assert conflicts == []
    unfinished = [ro.rollout_id for ro in rollouts if not (ro.closed and ro.status is not None)]
    assert unfinished == []  # every stored rollout ended with a status
    assert len(rollouts) >= ROLLOUTS - len(run.abandoned)
    print(
        f"{len(run.finished)} finished calls over {len(rollouts)} rollouts, {run.cut} cut by the kill, "
        f"{len(run.abandoned)} opens unanswered; served per replica: {dict(served)}"
    )


def test_an_unreachable_or_refused_postgres_is_one_line_and_exit_2(postgres_server, tmp_path):
    """Wrong credentials, or nothing listening: `error: ...` on one line, exit 2, no traceback, and the
    password never printed. Control: the right URL serves."""
    port = postgres_server.port
    bad = f"postgresql://postgres:not-the-password@127.0.0.1:{port}/postgres"
    closed = f"postgresql://postgres@127.0.0.1:{_free_port()}/postgres"
    env = {**os.environ, "OPENFORGERL_ADMIN_TOKEN": TOKEN}
    cli = [str(Path(sys.executable).with_name("openforgerl")), "gateway"]
    for url, why, entry in (
        (bad, "password authentication failed", cli),
        (closed, "Connection refused", [sys.executable, "-m", "openforgerl.gateway"]),
    ):
        proc = subprocess.run(
            [*entry, *_gateway_args("http://127.0.0.1:9/v1", url, 0, 0)[3:]],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
        assert lines[0].startswith("error: cannot open the PostgreSQL call log") and why in lines[0]
        assert "not-the-password" not in proc.stderr + proc.stdout and "Traceback" not in proc.stderr
    good = postgres_server.create_database()
    log = tmp_path / "good.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*cli, *_gateway_args("http://127.0.0.1:9/v1", good, 0, 0)[3:]],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        for _ in range(600):
            if "openforgerl gateway: model calls on" in log.read_text() or proc.poll() is not None:
                break
            time.sleep(0.1)
        text = log.read_text()
        assert proc.poll() is None and "model calls on" in text, text[-2000:]
        assert postgres_server.password not in text  # the store is named without its password
    finally:
        proc.kill()
        proc.wait()


# ---------------------------------------------------------------------------- close across replicas


@pytest.mark.parametrize("shared", ["postgres", "sqlite"])
async def test_a_close_on_one_replica_cuts_the_calls_in_flight_on_another(shared, request, tmp_path, fmt):
    """Replica A closes a rollout while replica B serves one of its calls. On PostgreSQL the close is
    announced (NOTIFY) and B cuts the call at once and refuses the next. Control: two replicas on one
    SQLite file, which announces nothing: B serves the call to its end (and would serve more)."""
    import openai

    from openforgerl.gateway.server import start_gateway
    from openforgerl.records import CallErrorKind

    location = (
        str(request.getfixturevalue("postgres_url")) if shared == "postgres" else str(tmp_path / "calls.db")
    )
    engine = ScriptedEngine(
        lambda turn: "word " * 60, fmt=fmt, faults=Faults(token_delay_s=0.05)
    )  # ~3 s a call
    stores = [open_store(location) for _ in range(2)]
    a, b = [await start_gateway(engine, store, secret=SECRET) for store in stores]
    try:
        ro = await a.open_rollout(task_id="t")
        rid = ro["rollout_id"]
        client = AsyncOpenAI(
            base_url=f"{b.model_url}/r/{rid}/v1", api_key=ro["api_key"], max_retries=0, timeout=30
        )
        msgs = [{"role": "user", "content": "go"}]
        call = asyncio.create_task(client.chat.completions.create(model="m", messages=msgs))
        for _ in range(200):  # until B's engine step runs
            state = b.gateway.registry._cache.get(rid)
            if state is not None and state.inflight:
                break
            await asyncio.sleep(0.02)
        else:
            raise AssertionError("the call never reached the engine")
        async with (
            aiohttp.ClientSession(headers=a.admin_headers()) as http,
            http.post(f"{a.admin_url}/rollouts/{rid}/close") as r,
        ):
            assert r.status == 200
        closed_at = time.monotonic()
        if shared == "postgres":
            with pytest.raises(openai.PermissionDeniedError):
                await call
            assert time.monotonic() - closed_at < 1.5  # cut, not served to its end (~3 s)
            with pytest.raises(openai.PermissionDeniedError):  # and the next call is refused on B
                await client.chat.completions.create(model="m", messages=msgs)
            (rec,) = await stores[1].list_calls(rid)
            assert rec.error is not None and rec.error.kind == CallErrorKind.CLIENT_DISCONNECTED
        else:
            answer = await call  # B never learns of the close
            assert answer.choices[0].finish_reason == "stop" and time.monotonic() - closed_at > 1.5
        await client.close()
    finally:
        for gw in (a, b):
            await gw.aclose()
        for store in stores:
            await store.aclose()


@pytest.mark.parametrize("shared", ["postgres", "sqlite"])
async def test_an_agents_rollout_id_with_a_nul_is_a_404(shared, request, tmp_path, fmt):
    """The rollout id in a model URL is the agent's to choose: `%00` in it is an unknown rollout (404 in
    the OpenAI error shape) on either store, not a 500 from the PostgreSQL driver (the store test holds
    the control: the driver raises on such a key)."""
    from openforgerl.gateway.server import start_gateway

    location = (
        str(request.getfixturevalue("postgres_url")) if shared == "postgres" else str(tmp_path / "calls.db")
    )
    store = open_store(location)
    gw = await start_gateway(ScriptedEngine(lambda turn: "hi", fmt=fmt), store, secret=SECRET)
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.post(
                f"{gw.model_url}/r/abc%00def/v1/chat/completions",
                headers={"Authorization": "Bearer ofr-x"},
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
            ) as r,
        ):
            assert r.status == 404, await r.text()
            assert (await r.json())["error"]["code"] == "rollout_not_found"
    finally:
        await gw.aclose()
        await store.aclose()


@pytest.mark.parametrize("shared", ["postgres", "sqlite"])
async def test_a_taint_on_one_replica_wakes_the_taint_long_poll_on_another(shared, request, tmp_path, fmt):
    """The orchestrator long-polls `GET /rollouts/{id}/taint` on replica A; the engine fails a call the
    rollout makes through replica B (an infra fault: B taints the rollout). On PostgreSQL A answers at
    once with the taint; the control, two replicas on one SQLite file, answers only when its wait ends."""
    import openai

    from openforgerl.gateway.server import start_gateway

    location = (
        str(request.getfixturevalue("postgres_url")) if shared == "postgres" else str(tmp_path / "calls.db")
    )
    engine = ScriptedEngine(lambda turn: "hi", fmt=fmt, faults=Faults(http_errors=1, http_status=500))
    stores = [open_store(location) for _ in range(2)]
    a, b = [await start_gateway(engine, store, secret=SECRET) for store in stores]
    try:
        ro = await a.open_rollout(task_id="t")
        wait_s = 4.0
        async with aiohttp.ClientSession(headers=a.admin_headers()) as http:
            poll = asyncio.create_task(
                http.get(f"{a.admin_url}/rollouts/{ro['rollout_id']}/taint?wait_s={wait_s}")
            )
            await asyncio.sleep(0.3)  # the poll is parked on A
            client = AsyncOpenAI(
                base_url=f"{b.model_url}/r/{ro['rollout_id']}/v1", api_key=ro["api_key"], max_retries=0
            )
            started = time.monotonic()
            with pytest.raises(openai.APIStatusError):
                await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
            await client.close()
            async with await poll as r:
                record = await r.json()
            waited = time.monotonic() - started
        assert record["infra_tainted"] is True  # read from the store at the end either way
        if shared == "postgres":
            assert waited < 2.0
        else:
            assert waited > wait_s - 1.0
    finally:
        for gw in (a, b):
            await gw.aclose()
        for store in stores:
            await store.aclose()
