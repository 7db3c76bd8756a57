"""Fixtures for the harness tests: the tools dir (installed CLIs) and a gateway over a scripted engine."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from harness_e2e import HARNESS_FIGURES

from openforgerl.engines.scripted import Faults, ScriptedEngine
from openforgerl.gateway.server import RunningGateway, start_gateway
from openforgerl.store.sqlite import SQLiteCallStore


@pytest.fixture
async def make_gateway(
    tmp_path: Path,
) -> AsyncIterator[Callable[..., Awaitable[tuple[RunningGateway, ScriptedEngine]]]]:
    """Factory: `await make_gateway(policy, faults=..., call_deadline_s=...)` -> (gateway, engine)."""
    opened: list[tuple[RunningGateway, SQLiteCallStore]] = []

    async def make(
        policy: Callable[..., str],
        faults: Faults | None = None,
        call_deadline_s: float = 60.0,
        verbatim_history: bool = True,
    ) -> tuple[RunningGateway, ScriptedEngine]:
        engine = ScriptedEngine(policy, faults=faults)
        store = SQLiteCallStore(tmp_path / f"calls{len(opened)}.db")
        gw = await start_gateway(
            engine, store, call_deadline_s=call_deadline_s, verbatim_history=verbatim_history
        )
        opened.append((gw, store))
        return gw, engine

    yield make
    for gw, store in opened:
        await gw.aclose()
        await store.aclose()


def pytest_sessionfinish(session: pytest.Session) -> None:
    """An xdist worker prints no summary: it hands its figures to the controller (tests/conftest.py)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["harness_figures"] = json.dumps(HARNESS_FIGURES)


def pytest_terminal_summary(terminalreporter: object) -> None:
    if not HARNESS_FIGURES:
        return
    write = terminalreporter.write_line  # type: ignore[attr-defined]
    write(
        "harness figures: name | version | protocol | calls "
        "(side) | chains | merge rate | first call s | run s"
    )
    for f in HARNESS_FIGURES:
        merge = "n/a" if f["merge_rate"] is None else f"{f['merge_rate']:.2f}"
        first = "n/a" if f["first_call_s"] is None else f"{f['first_call_s']:.1f}"
        write(
            f"  {f['harness']} | {f['version']} | {f['protocol']} | {f['calls']} ({f['side_calls']}) | "
            f"{f['chains']} | {merge} | {first} | {f['run_s']:.1f}"
        )
