"""`python -m openforgerl.engines.local --model tiny --port 8000` (same as `openforgerl engine`)."""

from __future__ import annotations

import argparse

from openforgerl.engines.local.standalone import run
from openforgerl.extras import require_extra


def main() -> None:
    ap = argparse.ArgumentParser(description="Serve a local model with vLLM's token API.")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--served-model-name", default=None)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--max-batch", type=int, default=256)
    ap.add_argument("--max-model-len", type=int, default=None)
    ap.add_argument(
        "--memory-budget", default=None, help="e.g. 4GiB (default: half the memory available at start)"
    )
    a = ap.parse_args()
    require_extra("engine", "openforgerl engine")
    run(
        a.model,
        host=a.host,
        port=a.port,
        served_model_name=a.served_model_name,
        dtype=a.dtype,
        threads=a.threads,
        max_batch=a.max_batch,
        max_model_len=a.max_model_len,
        memory_budget=a.memory_budget,
    )


if __name__ == "__main__":
    main()
