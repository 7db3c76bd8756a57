"""`openforgerl gateway`: serve the recording gateway in front of one or more engine replicas.

Two listeners: `--host/--port` for model calls (the only one sandboxes may reach) and
`--admin-host/--admin-port` for the admin API (loopback by default). The admin token comes from
`--admin-token-file` (first line), else `$OPENFORGERL_ADMIN_TOKEN`; when neither holds one it is
generated, and written to `--admin-token-file` (mode 0600) when that names a file not there yet,
so a separately started orchestrator can read it. The token is never printed.

Settings come from the one config schema (`openforgerl.config`), as `train`, `eval` and `rollout` take
it: `--config FILE` (its `engine`, `store` and `gateway` sections; e.g. the training config whose
gateway this serves) with the flags given on top. Where neither says, a standalone gateway's own
defaults hold (`STANDALONE`): model calls on port 8080, the admin API on 127.0.0.1:8081, the call log in
`runs/calls.db`. Replicas share one call log through `--store postgresql://user@host/db` and one
`--secret` (rollout keys are derived from it). It serves engine URLs only
(`engine.urls` or `--engine`), never an embedded engine.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
from pathlib import Path
from typing import Annotated

import typer

from openforgerl.config import Config

STANDALONE: dict[str, object] = {
    "engine.kind": "remote",
    "store.path": "runs/calls.db",
    "gateway.port": 8080,
    # the admin API stays on loopback even when `host` is public (the schema's default is `host`)
    "gateway.admin_host": "127.0.0.1",
    "gateway.admin_port": 8081,
}
"""A standalone gateway's defaults, under the YAML and the flags (embedded gateways take any free port)."""


def command(
    config: Annotated[Path | None, typer.Option(help="a config YAML (openforgerl.config); flags win")] = None,
    engine: Annotated[
        list[str] | None,
        typer.Option(
            "--engine", help="engine base URL (repeat for replicas; default: the config's engine.urls)"
        ),
    ] = None,
    host: Annotated[
        str | None, typer.Option(help="address to bind (keep it loopback unless fronted)")
    ] = None,
    port: Annotated[int | None, typer.Option(help="port to serve on (8080)")] = None,
    store: Annotated[
        str | None,
        typer.Option(
            help="call log: a SQLite file (runs/calls.db), or postgresql://user@host/db shared by replicas"
        ),
    ] = None,
    dialect: Annotated[str | None, typer.Option(help="engine dialect: vllm (default) or sglang")] = None,
    model: Annotated[str | None, typer.Option(help="served model name (default: ask the engine)")] = None,
    call_deadline_s: Annotated[
        float | None, typer.Option(help="per-call upstream deadline, seconds (600)")
    ] = None,
    pause_wait_s: Annotated[
        float | None, typer.Option(help="how long a call waits while paused before 503")
    ] = None,
    max_in_flight: Annotated[int | None, typer.Option(help="calls in flight before answering 503")] = None,
    max_in_flight_per_rollout: Annotated[
        int | None,
        typer.Option(
            help=(
                "one rollout's calls in flight before a 429 to that "
                "rollout (64; at most half of --max-in-flight)"
            )
        ),
    ] = None,
    max_log_bytes_per_rollout: Annotated[
        int | None,
        typer.Option(
            help="one rollout's call-log bytes, records and images, before a 413 to that rollout (512 MiB)"
        ),
    ] = None,
    policy_version: Annotated[int | None, typer.Option(help="policy version to start from")] = None,
    max_tokens_cap: Annotated[int | None, typer.Option(help="clamp clients' max_tokens to this")] = None,
    secret: Annotated[
        str | None,
        typer.Option(
            envvar="OPENFORGERL_GATEWAY_SECRET", help="key-derivation secret shared by gateway replicas"
        ),
    ] = None,
    admin_host: Annotated[
        str | None, typer.Option(help="address the admin API binds (never a sandbox's; 127.0.0.1)")
    ] = None,
    admin_port: Annotated[int | None, typer.Option(help="port of the admin API listener (8081)")] = None,
    admin_token_file: Annotated[
        Path | None,
        typer.Option(
            help="admin bearer token file (read; written when absent and no $OPENFORGERL_ADMIN_TOKEN)"
        ),
    ] = None,
    allow_image_urls: Annotated[
        bool | None,
        typer.Option(
            "--allow-image-urls/--no-allow-image-urls",
            help="forward http(s) image URLs for the engine to fetch (recorded by URL only)",
        ),
    ] = None,
    max_image_bytes: Annotated[int | None, typer.Option(help="largest decoded prompt image, bytes")] = None,
    max_image_pixels: Annotated[int | None, typer.Option(help="largest prompt image, width x height")] = None,
) -> None:
    """Serve `/r/<rollout>/v1` (OpenAI) and `/r/<rollout>` (Anthropic) plus the admin API."""
    # every flag names a key of the one config schema (openforgerl.config); None: not given
    flags: dict[str, object] = {
        "engine.dialect": dialect,
        "engine.served_model": model,
        "engine.max_tokens_cap": max_tokens_cap,
        "store.path": store,
        "gateway.host": host,
        "gateway.port": port,
        "gateway.admin_host": admin_host,
        "gateway.admin_port": admin_port,
        "gateway.call_deadline_s": call_deadline_s,
        "gateway.pause_wait_s": pause_wait_s,
        "gateway.max_in_flight": max_in_flight,
        "gateway.max_in_flight_per_rollout": max_in_flight_per_rollout,
        "gateway.max_log_bytes_per_rollout": max_log_bytes_per_rollout,
        "gateway.policy_version": policy_version,
        "gateway.allow_image_urls": allow_image_urls,
        "gateway.max_image_bytes": max_image_bytes,
        "gateway.max_image_pixels": max_image_pixels,
        **({"engine.kind": "remote", "engine.urls": engine} if engine else {}),
    }
    serve(gateway_config(config, flags), admin_token(admin_token_file), secret)


def gateway_config(config_file: Path | None, flags: dict[str, object]) -> Config:
    """The config a standalone gateway serves: `STANDALONE` < the YAML < the flags given."""
    from openforgerl.config import from_flags

    config = from_flags(config_file, flags, defaults=STANDALONE)
    if config.engine.kind != "remote" or not config.engine.urls:
        raise typer.BadParameter(
            "the gateway serves engine URLs: give --engine URL or engine.urls "
            "(with engine.kind: remote) in --config"
        )
    return config


def serve(config: Config, token: str, secret: str | None) -> None:
    """Run the gateway of `config` until SIGINT/SIGTERM."""
    try:  # a dependency on Linux (vLLM and SGLang serve on it too): ~15 % less CPU per call
        import uvloop

        uvloop.install()
    except ImportError:  # platforms without a uvloop wheel
        pass
    asyncio.run(_serve(config, token, secret))


def admin_token(token_file: Path | None) -> str:
    """The admin token: from the file, else the environment, else a new one (saved to the file)."""
    from openforgerl.gateway.access import read_admin_token

    if token_file is not None and token_file.exists():
        found = read_admin_token(token_file)
        if not found:
            raise typer.BadParameter(f"--admin-token-file {token_file} is empty")
        return found
    token = read_admin_token() or secrets.token_urlsafe(32)
    if token_file is not None:
        token_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
    return token


def _check_ports_free(config: Config) -> None:
    """Raise the bind's own OSError (one line from the CLI) for a port another server holds, before the call
    log is created or opened: a failed start leaves no new store behind."""
    import socket

    admin_host = config.gateway.admin_host or config.gateway.host  # unset: the model listener's address
    for host, port in ((config.gateway.host, config.gateway.port), (admin_host, config.gateway.admin_port)):
        if not port:  # 0: any free port
            continue
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds: TIME_WAIT is fine
            probe.bind((host, port))


async def _serve(config: Config, token: str, secret: str | None) -> None:
    from openforgerl.gateway.tuning import tune_dedicated_process
    from openforgerl.stack import open_gateway

    _check_ports_free(config)
    async with open_gateway(Path("."), config, admin_token=token, secret=secret) as opened:
        gw = opened.gateway
        tune_dedicated_process()
        print(
            f"openforgerl gateway: model calls on {gw.model_url}, admin API on {gw.admin_url} "
            f"(pid {os.getpid()}), store {opened.store.path}",
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
