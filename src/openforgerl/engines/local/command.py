"""`openforgerl engine --model PATH --port P`: serve a local model with vLLM's token API."""

from __future__ import annotations

import asyncio


def command(
    model: str = "tiny",
    host: str = "127.0.0.1",
    port: int = 8000,
    served_model_name: str | None = None,
    dtype: str = "float32",
    threads: int | None = None,
    max_batch: int = 256,
    max_model_len: int | None = None,
    memory_budget: str | None = None,
) -> None:
    """Serve MODEL (a model directory, `tiny` for the bundled tool-calling model, `tiny-vl` for the
    bundled vision-language model, or `smollm2`).

    Speaks the subset of vLLM's OpenAI API the gateway uses (chat/completions with return_token_ids
    and logprobs, streaming, hermes tool calls, image_url parts for a vision model, /tokenize,
    dev-mode weight reload).

    --memory-budget (e.g. 4GiB; default half the memory available at start) bounds the KV cache and
    working memory of the running sequences: requests beyond it wait, one that cannot fit alone gets a 400.
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
