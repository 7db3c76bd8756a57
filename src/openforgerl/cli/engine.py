"""`openforgerl engine --model PATH --port P`: serve a local model with vLLM's token API."""

from __future__ import annotations

import asyncio
import socket
from typing import Annotated

import typer


def command(
    model: Annotated[str, typer.Option(
        help="a model directory, `tiny` (bundled tool-calling model), `tiny-vl` (bundled vision-language "
             "model) or `smollm2`")] = "tiny",
    host: Annotated[str, typer.Option(help="address to bind (keep it loopback)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to serve on")] = 8000,
    served_model_name: Annotated[str | None, typer.Option(help="model name clients send (default: MODEL's)")] = None,
    dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16")] = "float32",
    threads: Annotated[int | None, typer.Option(help="torch threads (default: torch's)")] = None,
    max_batch: Annotated[int, typer.Option(help="sequences decoded together at most")] = 256,
    max_model_len: Annotated[int | None, typer.Option(
        help="context length in tokens (default: the model's); longer prompts get a 400")] = None,
    memory_budget: Annotated[str | None, typer.Option(
        help="KV cache and working memory of running sequences, e.g. 4GiB (default: half the memory "
             "available at start); requests beyond it wait, one that can never fit gets a 400")] = None,
) -> None:
    """Serve a local model behind vLLM's token API.

    Speaks the subset of vLLM's OpenAI API the gateway uses: chat/completions with return_token_ids
    and logprobs, streaming, hermes tool calls, image_url parts for a vision model, /tokenize and
    dev-mode weight reload.
    """
    import logging

    from openforgerl.extras import require_extra

    require_extra("engine", "openforgerl engine")
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
    engine = LocalEngine.from_pretrained(model, dtype=dtype, threads=threads, max_batch=max_batch,
                                         memory_budget=memory_budget)
    if served_model_name:
        engine.loaded.name = served_model_name
    if max_model_len:  # vLLM's --max-model-len: past the trained context the text degrades, the ids stay exact
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
