"""Process settings for a gateway that has its process to itself (`openforgerl gateway`, `python -m
openforgerl.gateway`); an embedded gateway shares its process and leaves them alone."""

from __future__ import annotations

import ctypes
import gc

__all__ = ["tune_dedicated_process"]


def tune_dedicated_process() -> None:
    """Both settings below, once the gateway has started (its start-up heap is then frozen with it)."""
    _tune_gc()
    _tune_malloc()


def _tune_gc() -> None:
    """Keep the cyclic GC off the hot path of a dedicated gateway process.

    Every call allocates hundreds of acyclic containers (parsed request and engine JSON), so the
    default gen-0 threshold (700) runs a collection every few calls, and each one at high
    concurrency walks every in-flight body; freezing the start-up heap also takes the imported
    modules out of every full collection. Measured in benchmarks/gateway_overhead.py at C=256:
    about a fifth of the gateway's CPU per call. Cycles are still collected, just in larger batches.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


# glibc's mallopt parameters (malloc.h): M_TRIM_THRESHOLD -1, M_TOP_PAD -2, M_MMAP_THRESHOLD -3
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3


def _tune_malloc() -> None:
    """Keep freed memory in a dedicated gateway process's heap instead of handing it back to the kernel.

    A call with screenshots allocates buffers of 55-330 KB (the body, the decoded image, the engine's
    payload, the record), and glibc's defaults return them to the kernel as they are freed: a chunk
    over the mmap threshold is unmapped, and a free top of heap over the trim threshold is trimmed.
    The next call's buffers then come back as fresh zeroed pages, a page fault per 4 KB: 68 faults
    per call with five screenshots, 22 with these settings (what is left is the seen-image cache
    growing until it is full; benchmarks/multimodal.py). In a micro-benchmark a 74 KB
    slice cost 50 us with the defaults and 6 us with these settings; in the gateway, 0.91-0.94x the CPU
    per call with screenshots (same interleaved run, with and without). Bounded: at most 128 MB of freed
    heap is kept. Nothing happens on a libc without `mallopt` (musl, macOS). (Touching the heap's pages
    once at start as well made no measurable difference.)"""
    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    for param, value in (
        (_M_MMAP_THRESHOLD, 32 << 20),
        (_M_TRIM_THRESHOLD, 128 << 20),
        (_M_TOP_PAD, 16 << 20),
    ):
        mallopt(ctypes.c_int(param), ctypes.c_int(value))
