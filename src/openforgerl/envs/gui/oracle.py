"""`python -I -m openforgerl.envs.gui.oracle --actions FILE --token T`: replay a task's oracle.

The oracle (`solution/actions.json`) is a list of actions of the public action API; a pointer action
may name a `target` (CSS selector) instead of `x, y`: it is resolved to screen pixels through the
computer service's token-guarded `POST /locate` right before the action, then executed as a plain
pixel action through `POST /act` — the same input path as the agent. `at` picks the point:
`center` (default), `left` / `right` (a few pixels in from that edge: slider ends). Drags take
`to_target` + `to_at` for the end point. `{"action": "wait", "seconds": s}` waits.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from openforgerl.env.computer.actions import ActionError
from openforgerl.env.computer.client import HttpComputer

__all__ = ["main", "resolve", "run_oracle"]

EDGE_PX = 4
LOCATE_TRIES = 3


def _point(box: dict[str, int], at: str) -> tuple[int, int]:
    x = {"left": box["x"] + EDGE_PX, "right": box["x"] + box["width"] - EDGE_PX}.get(at, box["cx"])
    return x, box["cy"]


def _locate(computer: HttpComputer, selector: str) -> dict[str, int]:
    """The element's box; retried: under heavy load a page can take longer than one lookup's wait."""
    for attempt in range(LOCATE_TRIES):
        try:
            return computer.locate(selector)
        except ActionError:
            if attempt == LOCATE_TRIES - 1:
                raise
            time.sleep(1.0)
    raise AssertionError("unreachable")


def resolve(computer: HttpComputer, step: dict[str, Any]) -> dict[str, Any]:
    """Turn `target`/`to_target` into pixel coordinates; other fields pass through."""
    out = {k: v for k, v in step.items() if k not in ("target", "at", "to_target", "to_at")}
    if "target" in step:
        out["x"], out["y"] = _point(_locate(computer, step["target"]), step.get("at", "center"))
    if "to_target" in step:
        out["to_x"], out["to_y"] = _point(_locate(computer, step["to_target"]), step.get("to_at", "center"))
    return out


def run_oracle(computer: HttpComputer, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run every step; returns the executed pixel actions (for logs)."""
    computer.wait_ready()
    done = []
    for step in steps:
        action = resolve(computer, step)
        computer.act(action)
        done.append(action)
    return done


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m openforgerl.envs.gui.oracle")
    ap.add_argument("--actions", type=Path, required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--url", default="http://127.0.0.1:8765")
    ns = ap.parse_args(argv)
    steps = json.loads(ns.actions.read_text())
    for action in run_oracle(HttpComputer(ns.url, token=ns.token), steps):
        print(json.dumps(action))


if __name__ == "__main__":
    main()
