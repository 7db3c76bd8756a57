"""`LocalEngine`: the asyncio face of the generation core, used by the HTTP server and in-process.

The trainer can hold a `LocalEngine` directly and push new weights with `load_state_dict(sd, version)`
(no disk round trip); the server exposes the same swap as vLLM's dev-mode
`/collective_rpc {"method": "reload_weights"}`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openforgerl.engines import base
from openforgerl.engines.local import chat as chat_face
from openforgerl.engines.local.core import EngineCore, Sequence, StepEvent
from openforgerl.engines.local.generation import Generation
from openforgerl.engines.local.memory import budget_for
from openforgerl.engines.local.model import LoadedModel, load_model
from openforgerl.engines.local.requests import ApiError
from openforgerl.engines.local.sampling import SamplingParams
from openforgerl.engines.local.vlm import ProcessedImages


class StopStrings:
    """Detects stop strings in the decoded output; remembers where the text must be cut."""

    def __init__(self, decode: Any, stops: tuple[str, ...]) -> None:
        self._decode, self._stops = decode, stops

    def __call__(self, ids: list[int]) -> str | None:
        tail = self._decode(ids[-64:])
        return next((s for s in self._stops if s in tail), None)


def read_safetensors(path: Path) -> dict[str, Any]:
    """All tensors of a .safetensors file or of every such file in a directory."""
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors")) if path.is_dir() else [path]
    if not files:
        raise FileNotFoundError(f"no .safetensors under {path}")
    sd: dict[str, Any] = {}
    for f in files:
        sd.update(load_file(str(f)))
    return sd


class LocalEngine:
    """A transformers model behind a continuous-batching core.

    It is an `Engine` (`complete`/`stream` take the gateway's `EngineCall`; their bodies and chunks are
    what `openforgerl engine` would send, built by the same code, `chat.py`), and a token model under
    it (`stream_tokens`/`generate` take prompt ids and `SamplingParams`).
    """

    def __init__(
        self,
        loaded: LoadedModel,
        *,
        max_batch: int = 256,
        engine_id: str = "local",
        memory_budget: str | int | None = None,
    ) -> None:
        """`memory_budget`: bytes (or a size such as "4GiB") the running sequences may take, see `memory.py`;
        None = half of the memory available now."""
        self.loaded = loaded
        self.chat = loaded.chat
        self.budget = budget_for(loaded.model, loaded.dtype_bytes, memory_budget)
        self.core = EngineCore(loaded.model, loaded.eos_token_ids, max_batch=max_batch, budget=self.budget)
        self.weight_version: str | int | None = 0
        self.engine_id = engine_id

    @classmethod
    def from_pretrained(cls, model: str | Path, **kw: Any) -> LocalEngine:
        load_kw = {k: kw.pop(k) for k in ("dtype", "threads") if k in kw}
        return cls(load_model(str(model), **load_kw), **kw)

    @property
    def model_name(self) -> str:
        return self.loaded.name

    @property
    def max_model_len(self) -> int:
        return self.loaded.max_model_len

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        return self.loaded.eos_token_ids

    @property
    def vision(self) -> Any:
        return self.loaded.vision

    def render_prompt(self, body: dict[str, Any], tools: list[dict[str, Any]] | None) -> list[int]:
        return chat_face.render_prompt(self.chat, body, tools)

    # -- the Engine protocol ----------------------------------------------------------------------
    async def complete(self, call: base.EngineCall) -> base.EngineResult:
        return await chat_face.complete(self, call, self.engine_id)

    def stream(self, call: base.EngineCall) -> AsyncIterator[base.EngineChunk]:
        return chat_face.stream(self, call, self.engine_id)

    async def models(self) -> list[str]:
        return [self.model_name]

    async def aclose(self) -> None:
        await asyncio.to_thread(self.shutdown)

    # -- tokens -------------------------------------------------------------------------------
    def stream_tokens(
        self, prompt_ids: list[int], params: SamplingParams, images: ProcessedImages | None = None
    ) -> AsyncGenerator[StepEvent, None]:
        """Yield one event per sampled token; the last one carries the finish reason.

        `images`: the prompt's processed images (a vision-language model; pads already expanded).
        Raises `ApiError` (a 400) at once, before anything is queued, for a request that could not fit the
        memory budget even alone; closing the generator (its client went away) drops the sequence."""
        why = self.budget.refusal(len(prompt_ids), len(prompt_ids) + params.max_tokens)
        if why is not None:
            raise ApiError(why)
        return self._stream_tokens(prompt_ids, params, images)

    async def _stream_tokens(
        self, prompt_ids: list[int], params: SamplingParams, images: ProcessedImages | None
    ) -> AsyncGenerator[StepEvent, None]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[StepEvent] = asyncio.Queue()
        stops = StopStrings(self.chat.decode, params.stop) if params.stop else None

        def deliver(ev: StepEvent) -> None:  # called on the core's thread
            loop.call_soon_threadsafe(queue.put_nowait, ev)

        seq = Sequence(list(prompt_ids), params, deliver, stops, images=images)
        self.core.submit(seq)
        try:
            while True:
                ev = await queue.get()
                yield ev
                if ev.finish_reason:
                    return
        finally:
            self.core.cancel(seq)

    async def generate(
        self, prompt_ids: list[int], params: SamplingParams, images: ProcessedImages | None = None
    ) -> Generation:
        ids, lps, tops = [], [], []
        last = StepEvent(None, "abort")
        async for ev in self.stream_tokens(prompt_ids, params, images):
            if ev.sample is not None:
                ids.append(ev.sample.token_id)
                lps.append(ev.sample.logprob)
                tops.append(ev.sample.top)
            last = ev
        return Generation(ids, lps, tops, last.finish_reason or "abort", last.stop_reason)

    # -- weights ------------------------------------------------------------------------------
    async def load_state_dict(self, state_dict: Mapping[str, Any], version: str | int | None = None) -> int:
        """Swap weights between decode steps; returns the number of tensors loaded."""
        fut = self.core.call(lambda: self._copy_weights(state_dict))
        count: int = await asyncio.wrap_future(fut)
        if version is not None:
            self.weight_version = version
        return count

    def load_state_dict_sync(self, state_dict: Mapping[str, Any], version: str | int | None = None) -> int:
        """Same as `load_state_dict` for a caller without an event loop (blocks until swapped)."""
        count: int = self.core.call(lambda: self._copy_weights(state_dict)).result()
        if version is not None:
            self.weight_version = version
        return count

    async def reload_weights(self, weights_path: str | Path) -> int:
        """vLLM dev-mode `reload_weights`: read every *.safetensors file of a directory."""
        return await self.load_state_dict(await asyncio.to_thread(read_safetensors, Path(weights_path)))

    def _copy_weights(self, state_dict: Mapping[str, Any]) -> int:
        import torch

        params = self.loaded.model.state_dict(keep_vars=True)  # includes tied aliases (lm_head.weight)
        unknown = [k for k in state_dict if k not in params]
        if unknown:
            raise KeyError(f"unknown weight names: {unknown[:5]}")
        with torch.no_grad():
            for name, tensor in state_dict.items():
                params[name].copy_(tensor.to(params[name].dtype))
        return len(state_dict)

    # -- control ------------------------------------------------------------------------------
    async def pause(self, mode: str = "abort") -> None:
        """vLLM RL `/pause`: abort (finish running requests), wait (let them finish), keep (freeze)."""
        if mode == "wait":
            await asyncio.to_thread(self._wait_idle)
        self.core.set_paused(True)
        if mode == "abort":
            await asyncio.wrap_future(self.core.call(self.core.abort_all))

    def _wait_idle(self) -> None:
        while self.core.num_running or self.core.num_waiting:
            time.sleep(0.01)

    def resume(self) -> None:
        self.core.set_paused(False)

    def shutdown(self) -> None:
        self.core.shutdown()


if TYPE_CHECKING:  # mypy checks these structurally: LocalEngine is an Engine, and a token model

    def _an_engine(engine: LocalEngine) -> base.Engine:
        return engine

    def _a_token_model(engine: LocalEngine) -> chat_face.TokenModel:
        return engine
