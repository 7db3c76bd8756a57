"""The generation loop: one thread that owns the model and steps every running sequence together.

Continuous batching: a request joins the running batch right after its own prefill; each loop turn
runs one [B, 1] forward for all running sequences against a shared left-padded KV cache (`BatchKV`)
and hands each sampled token to its request through a callback. A vision-language model prefills
each request alone with its own images (so images of any size share a batch) and decodes with
M-RoPE positions: the text position plus the sequence's rope delta from its prefill. Weight swaps, pause and
abort run on this same thread between steps, so a swap never lands in the middle of a forward.
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import DynamicCache

from openforgerl.engines.local.batch import BatchKV
from openforgerl.engines.local.memory import MemoryBudget
from openforgerl.engines.local.sampling import SamplingParams, TokenSample, make_generator, sample_rows
from openforgerl.engines.local.vlm import ProcessedImages, is_vision_model, rope_positions

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepEvent:
    """One generated token (or a bare finish) delivered to the request that owns the sequence."""

    sample: TokenSample | None
    finish_reason: str | None = None  # "stop" | "length" | "abort"
    stop_reason: str | int | None = None  # the stop string / stop token id that ended it


@dataclass
class Sequence:
    """A running request. `emit` is called on the core thread and must be thread-safe."""

    prompt_ids: list[int]
    params: SamplingParams
    emit: Callable[[StepEvent], None]
    stop_checker: Callable[[list[int]], str | None] | None = None
    output_ids: list[int] = field(default_factory=list)
    cancelled: bool = False
    generator: torch.Generator | None = None
    images: ProcessedImages | None = None  # the prompt's images (vision-language models)
    rope_delta: int = 0  # M-RoPE: decode position = text position + rope_delta (set at prefill)
    finished: bool = False  # ended by the engine (stop, length, abort, error), not by its client going away
    waited_for_memory: bool = False

    def __post_init__(self) -> None:
        self.generator = make_generator(self.params.seed)

    @property
    def total_len(self) -> int:
        """The length it may reach: what admission reserves room for."""
        return len(self.prompt_ids) + self.params.max_tokens


def _cache_kwarg(model: Any) -> str:
    """transformers >= 5.2x renamed `past_key_values` to `cache`; support both."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _keeps_last_logits(model: Any) -> bool:
    """The forward can return the last position's logits only (`logits_to_keep=1`): an 8000-token prefill
    of SmolLM2 otherwise materialises [8000, 49152] float32 logits, 1.5 GiB that no one reads."""
    return "logits_to_keep" in inspect.signature(model.forward).parameters


def _out_cache(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


class EngineCore:
    """Owns the torch module; all model access happens on its thread."""

    def __init__(
        self,
        model: Any,
        eos_token_ids: tuple[int, ...],
        max_batch: int = 256,
        budget: MemoryBudget | None = None,
    ) -> None:
        self.model = model
        self.eos_token_ids = eos_token_ids
        self.max_batch = max_batch
        self.budget = budget
        self._cache_kw = _cache_kwarg(model)
        self._last_logits = {"logits_to_keep": 1} if _keeps_last_logits(model) else {}
        self._mrope = is_vision_model(getattr(model, "config", None))
        self._cv = threading.Condition()
        self._waiting: deque[Sequence] = deque()
        self._calls: deque[tuple[Callable[[], Any], Future[Any]]] = deque()
        self._running: list[Sequence] = []
        self._kv = BatchKV()
        self._paused = False
        self._stopped = False
        self.steps = 0  # decode forwards run (batching metric)
        self.batched_tokens = 0  # tokens produced by those forwards
        self.generated_tokens = 0  # every sampled token, prefill's first ones included
        self.peak_running = 0  # the most sequences ever decoding together
        self.memory_waits = 0  # sequences that waited because the batch with them would pass the budget
        self.aborted = 0  # sequences dropped because their client went away before they finished
        self._thread = threading.Thread(target=self._loop, name="openforgerl-engine-core", daemon=True)
        self._thread.start()

    # -- API used from other threads -------------------------------------------------------------
    def submit(self, seq: Sequence) -> None:
        with self._cv:
            self._waiting.append(seq)
            self._cv.notify()

    def call(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run `fn` on the core thread between steps (weight loads, pause, abort)."""
        fut: Future[Any] = Future()
        with self._cv:
            self._calls.append((fn, fut))
            self._cv.notify()
        return fut

    def cancel(self, seq: Sequence) -> None:
        seq.cancelled = True
        with self._cv:
            self._cv.notify()

    def set_paused(self, paused: bool) -> None:
        with self._cv:
            self._paused = paused
            self._cv.notify()

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    def shutdown(self) -> None:
        with self._cv:
            self._stopped = True
            self._cv.notify()
        self._thread.join(timeout=10)

    def abort_all(self) -> None:
        """Finish every running and waiting sequence with finish_reason 'abort' (core thread only)."""
        with self._cv:
            waiting, self._waiting = list(self._waiting), deque()
        for seq in [*self._running, *waiting]:
            seq.finished = True
            seq.emit(StepEvent(None, "abort"))
        self._running, self._kv = [], BatchKV()

    # -- the loop ---------------------------------------------------------------------------------
    def _loop(self) -> None:
        torch.set_grad_enabled(False)
        while True:
            admitted = self._wait_for_work()
            if admitted is None:
                return
            try:
                self._step(admitted)
            except Exception as exc:  # a bad step must not kill the server: fail the batch, go on
                log.exception("engine step failed")
                for seq in [*self._running, *admitted]:
                    seq.finished = True
                    seq.emit(StepEvent(None, f"error:{exc}"))
                self._running, self._kv = [], BatchKV()

    def _wait_for_work(self) -> list[Sequence] | None:
        with self._cv:
            while True:
                if self._stopped:
                    return None
                if self._calls:
                    break
                idle = not self._running and not self._waiting
                if not self._paused and not idle:
                    break
                self._cv.wait()
            calls, self._calls = list(self._calls), deque()
            admitted = [] if self._paused else self._admit()
        self._run_calls(calls)
        return admitted

    def _admit(self) -> list[Sequence]:
        """Waiting sequences that join now, in arrival order: while the batch has rows left and, with a
        budget, while the batch with the next one fits it (that one then waits at the head: first come,
        first served, so a long prompt is not starved by short ones behind it). Called under the lock."""
        admitted: list[Sequence] = []
        lengths = [s.total_len for s in self._running if not s.cancelled]
        while self._waiting and len(lengths) < self.max_batch:
            head = self._waiting[0]
            if head.cancelled:  # its client left while it waited
                self._waiting.popleft()
                self.aborted += not head.finished
                continue
            if self.budget is not None and not self.budget.fits(
                lengths, len(head.prompt_ids), head.total_len
            ):
                if lengths:
                    self.memory_waits += not head.waited_for_memory
                    head.waited_for_memory = True
                    break
                self._waiting.popleft()  # alone it cannot fit: the HTTP layer refuses these; say so anyway
                head.finished = True
                head.emit(
                    StepEvent(
                        None,
                        "error:"
                        + (
                            self.budget.refusal(len(head.prompt_ids), head.total_len)
                            or "over the memory budget"
                        ),
                    )
                )
                continue
            admitted.append(self._waiting.popleft())
            lengths.append(head.total_len)
        return admitted

    @staticmethod
    def _run_calls(calls: list[tuple[Callable[[], Any], Future[Any]]]) -> None:
        for fn, fut in calls:
            try:
                fut.set_result(fn())
            except Exception as exc:
                fut.set_exception(exc)

    def _step(self, admitted: list[Sequence]) -> None:
        self._drop_finished()  # rows whose clients left free their KV before the next prefill needs it
        for seq in admitted:
            if not seq.cancelled:
                self._prefill(seq)
        self._drop_finished()
        if self._running and not self._paused:
            self._decode()
            self._drop_finished()

    def _prefill(self, seq: Sequence) -> None:
        ids = torch.tensor([seq.prompt_ids], dtype=torch.long)
        out = self.model(input_ids=ids, use_cache=True, **self._last_logits, **self._prefill_inputs(seq))
        cache = _out_cache(out)
        self._kv.add([layer.keys for layer in cache.layers], [layer.values for layer in cache.layers])
        self._running.append(seq)
        self.peak_running = max(self.peak_running, len(self._running))
        self._deliver([seq], out.logits[:, -1, :])

    def _prefill_inputs(self, seq: Sequence) -> dict[str, Any]:
        if not self._mrope:
            return {}
        grid = seq.images.image_grid_thw if seq.images is not None else None
        positions, seq.rope_delta = rope_positions(
            self.model, seq.prompt_ids, grid, self.model.config.image_token_id
        )
        if seq.images is None:
            return {"position_ids": positions}
        return {"position_ids": positions, "pixel_values": seq.images.pixel_values, "image_grid_thw": grid}

    def _mrope_positions(self, pos: torch.Tensor) -> torch.Tensor:
        """[B, 1] text positions → [4, B, 1]: the text row, then T/H/W rows shifted by each rope delta."""
        delta = torch.tensor([[s.rope_delta] for s in self._running], dtype=pos.dtype)
        return torch.stack([pos, pos + delta, pos + delta, pos + delta])

    def _decode(self) -> None:
        attn, pos = self._kv.decode_inputs()
        if self._mrope:
            pos = self._mrope_positions(pos)
        ids = torch.tensor([[s.output_ids[-1]] for s in self._running], dtype=torch.long)
        cache = DynamicCache(ddp_cache_data=list(zip(self._kv.keys, self._kv.values, strict=True)))
        self._kv.release()  # the cache holds them now: each layer's old tensor is freed as it grows
        kw = {self._cache_kw: cache}
        out = self.model(input_ids=ids, attention_mask=attn, position_ids=pos, use_cache=True, **kw)
        layers = _out_cache(out).layers
        self._kv.absorb([la.keys for la in layers], [la.values for la in layers])
        self.steps += 1
        self.batched_tokens += len(self._running)
        self._deliver(self._running, out.logits[:, -1, :])

    def _banned(self, seq: Sequence) -> tuple[int, ...]:
        return self.eos_token_ids if len(seq.output_ids) < seq.params.min_tokens else ()

    def _deliver(self, seqs: list[Sequence], logits: torch.Tensor) -> None:
        samples = sample_rows(
            logits, [s.params for s in seqs], [s.generator for s in seqs], [self._banned(s) for s in seqs]
        )
        self.generated_tokens += len(seqs)
        for seq, sample in zip(seqs, samples, strict=True):
            seq.output_ids.append(sample.token_id)
            reason, stop_reason = self._finish_reason(seq, sample.token_id)
            if reason:
                seq.cancelled = seq.finished = True  # leaves the batch at the next _drop_finished
            seq.emit(StepEvent(sample, reason, stop_reason))

    def _finish_reason(self, seq: Sequence, tid: int) -> tuple[str | None, str | int | None]:
        p = seq.params
        if len(seq.output_ids) >= p.min_tokens:
            if tid in self.eos_token_ids and not p.ignore_eos:
                return "stop", None
            if tid in p.stop_token_ids:
                return "stop", tid
            hit = seq.stop_checker(seq.output_ids) if seq.stop_checker else None
            if hit is not None:
                return "stop", hit
        if len(seq.output_ids) >= p.max_tokens:
            return "length", None
        return None, None

    def _drop_finished(self) -> None:
        keep = [i for i, s in enumerate(self._running) if not s.cancelled]
        self.aborted += sum(1 for s in self._running if s.cancelled and not s.finished)
        if len(keep) != len(self._running):
            self._running = [self._running[i] for i in keep]
            self._kv.keep(keep)
