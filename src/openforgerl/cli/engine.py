"""`openforgerl engine --model PATH --port P`: serve a local model with vLLM's token API."""

from __future__ import annotations

from typing import Annotated

import typer


def command(
    model: Annotated[
        str,
        typer.Option(
            help="a model directory, `tiny` (bundled tool-calling model), `tiny-vl` (bundled vision-language "
            "model) or `smollm2`"
        ),
    ] = "tiny",
    host: Annotated[str, typer.Option(help="address to bind (keep it loopback)")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to serve on")] = 8000,
    served_model_name: Annotated[
        str | None, typer.Option(help="model name clients send (default: MODEL's)")
    ] = None,
    dtype: Annotated[str, typer.Option(help="float32, bfloat16 or float16")] = "float32",
    threads: Annotated[int | None, typer.Option(help="torch threads (default: torch's)")] = None,
    max_batch: Annotated[int, typer.Option(help="sequences decoded together at most")] = 256,
    max_model_len: Annotated[
        int | None,
        typer.Option(help="context length in tokens (default: the model's); longer prompts get a 400"),
    ] = None,
    memory_budget: Annotated[
        str | None,
        typer.Option(
            help="KV cache and working memory of running sequences, e.g. 4GiB (default: half the memory "
            "available at start); requests beyond it wait, one that can never fit gets a 400"
        ),
    ] = None,
) -> None:
    """Serve a local model behind vLLM's token API.

    Speaks the subset of vLLM's OpenAI API the gateway uses: chat/completions with return_token_ids
    and logprobs, streaming, hermes tool calls, image_url parts for a vision model, /tokenize and
    dev-mode weight reload.
    """
    from openforgerl.extras import require_extra

    require_extra("engine", "openforgerl engine")
    from openforgerl.engines.local.standalone import run

    run(
        model,
        host=host,
        port=port,
        served_model_name=served_model_name,
        dtype=dtype,
        threads=threads,
        max_batch=max_batch,
        max_model_len=max_model_len,
        memory_budget=memory_budget,
    )
