"""`openforgerl export --store postgresql://...`: the log the gateway replicas share exports exactly as
the same log in SQLite does."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from export_sim import simulated_rollout
from typer.testing import CliRunner

from openforgerl.cli.export import command
from openforgerl.export import read_jsonl_rows
from openforgerl.store import open_store
from openforgerl.testing.calls import stored


async def _write_log(location: str) -> None:
    store = open_store(location)
    for i, kw in enumerate([{}, {"infra_tainted": True}, {"harness": "codex"}]):
        calls, rollout = simulated_rollout(i, f"r{i}", **kw)
        for call in calls:
            await store.append_call(*stored(call))
        await store.put_rollout(rollout)
    await store.aclose()


def _export(location: str, out: Path) -> list[dict]:
    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(app, ["--store", location, "--out", str(out), "--format", "jsonl"])
    assert result.exit_code == 0, result.output
    return read_jsonl_rows(out)


async def test_a_postgres_log_exports_the_same_rows_as_sqlite(postgres_url: str, tmp_path: Path) -> None:
    await _write_log(postgres_url)
    await _write_log(str(tmp_path / "calls.db"))
    from_pg = _export(postgres_url, tmp_path / "pg.jsonl")
    from_sqlite = _export(str(tmp_path / "calls.db"), tmp_path / "sqlite.jsonl")
    assert len(from_pg) == 6 and from_pg == from_sqlite


def test_an_unreachable_postgres_log_is_one_line(tmp_path: Path) -> None:
    import socket

    from openforgerl.errors import UserError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = typer.Typer()
    app.command()(command)
    result = CliRunner().invoke(
        app,
        [
            "--store",
            f"postgresql://u:pw@127.0.0.1:{port}/db",
            "--out",
            str(tmp_path / "o.jsonl"),
            "--format",
            "jsonl",
        ],
    )
    assert isinstance(result.exception, UserError) and "pw@" not in str(result.exception)
    with pytest.raises(UserError, match="cannot open the PostgreSQL call log"):
        raise result.exception
