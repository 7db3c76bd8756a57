"""`python -m openforgerl.envs.claw.verify.pygrade`: run a QwenClawBench-style `grade(transcript, workspace)`.

The grade function comes from the task's own files (tests/grade.py, converted by the importer) and
returns {dimension: score in [0, 1]}; reward = their mean. Exit 2 when the grader itself breaks.
"""

from __future__ import annotations

import argparse
import json
import math
import runpy
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m openforgerl.envs.claw.verify.pygrade")
    ap.add_argument("--grade", type=Path, required=True)
    ap.add_argument("--workspace", required=True)
    ap.add_argument("--transcript", type=Path, default=None, help="JSON list of session events")
    ap.add_argument("--out", type=Path, required=True)
    ns = ap.parse_args(argv)
    transcript = json.loads(ns.transcript.read_text()) if ns.transcript else []
    try:
        scores = runpy.run_path(str(ns.grade))["grade"](transcript, ns.workspace)
        clean = {str(k): float(v) for k, v in dict(scores).items()}
    except Exception as exc:  # the grader is third-party code: any failure is a verifier failure
        print(f"grader error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    if not clean or not all(math.isfinite(v) for v in clean.values()):
        print(f"grader returned no finite scores: {clean}", file=sys.stderr)
        return 2
    reward = sum(clean.values()) / len(clean)
    ns.out.write_text(json.dumps({"reward": reward, **{f"check.{k}": v for k, v in clean.items()}}))
    print("\n".join(f"{k}: {v:.3f}" for k, v in clean.items()) + f"\nreward={reward:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
