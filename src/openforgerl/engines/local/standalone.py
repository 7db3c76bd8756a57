"""The local engine as a server of its own until interrupted (`openforgerl engine`, `python -m
openforgerl.engines.local`): the user's mistakes are found before the weights load, not after."""

from __future__ import annotations

import asyncio
import logging
import socket

__all__ = ["run"]


def run(
    model: str,
    *,
    host: str,
    port: int,
    served_model_name: str | None,
    dtype: str,
    threads: int | None,
    max_batch: int,
    max_model_len: int | None,
    memory_budget: str | None,
) -> None:
    """Load `model` and serve it on host:port until SIGINT (a bad `memory_budget`: `UserError`; a port
    another server holds: the bind's own OSError, both one line from the CLI)."""
    from openforgerl.engines.local.engine import LocalEngine
    from openforgerl.engines.local.server import serve

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from openforgerl.engines.local.memory import parse_size
    from openforgerl.errors import UserError

    try:
        if memory_budget is not None:  # before the model loads, not after
            parse_size(memory_budget)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    _check_port_free(host, port)  # before the weights load (18 s for smollm2), not after
    engine = LocalEngine.from_pretrained(
        model, dtype=dtype, threads=threads, max_batch=max_batch, memory_budget=memory_budget
    )
    if served_model_name:
        engine.loaded.name = served_model_name
    if (
        max_model_len
    ):  # vLLM's --max-model-len: past the trained context the text degrades, the ids stay exact
        engine.loaded.max_model_len = max_model_len
    logging.getLogger(__name__).info("%s", engine.budget.startup_line(engine.max_model_len, max_batch))

    async def main() -> None:
        runner = await serve(engine, host, port)
        logging.getLogger(__name__).info("engine %s serving on http://%s:%d", engine.model_name, host, port)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()
            engine.shutdown()

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass


def _check_port_free(host: str, port: int) -> None:
    """Raise the bind's own OSError (EADDRINUSE: one line from the CLI) when another server listens there."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is fine
        probe.bind((host, port))
