"""Synthetic run directories (the layout `RunDir` reads), built without a model or a sandbox."""

from __future__ import annotations

import json
import random
import sqlite3
import struct
import zlib
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from openforgerl.records import CallRecord, RolloutRecord, RolloutStatus, WireProtocol

SCHEMA = """CREATE TABLE IF NOT EXISTS calls (rollout_id TEXT NOT NULL, idx INTEGER NOT NULL,
 body BLOB NOT NULL, PRIMARY KEY (rollout_id, idx));
CREATE TABLE IF NOT EXISTS rollouts (rollout_id TEXT PRIMARY KEY, body BLOB NOT NULL);"""


@cache
def _tokenizer() -> Any:
    from tokenizers import Tokenizer

    from openforgerl.engines.local.model import PRESETS

    return Tokenizer.from_file(str(PRESETS["tiny"] / "tokenizer.json"))


def enc(text: str) -> list[int]:
    return list(_tokenizer().encode(text).ids)


def png(width: int, height: int, colour: tuple[int, int, int] = (230, 235, 245)) -> bytes:
    """A plain PNG with a darker 'button' rectangle (no imaging library needed)."""
    rows = []
    for y in range(height):
        row = bytearray([0])
        for x in range(width):
            inside = width // 3 <= x < 2 * width // 3 and height // 3 <= y < height // 2
            row += bytes((40, 90, 200) if inside else colour)
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows)))
        + chunk(b"IEND", b"")
    )


def data_url(raw: bytes) -> str:
    import base64

    return "data:image/png;base64," + base64.b64encode(raw).decode()


class ChainWriter:
    """Calls of one rollout whose prompt ids extend each other (one chain), with tool history."""

    def __init__(
        self, rollout_id: str, protocol: WireProtocol = WireProtocol.CHAT, seed: int = 0, t0: float = 1000.0
    ) -> None:
        self.rid, self.protocol, self.rng, self.t = rollout_id, protocol, random.Random(seed), t0
        self.tokens: list[int] = enc("system: you are an agent.\nuser: do the task.\n")
        self.calls: list[CallRecord] = []

    def call(
        self,
        request: dict[str, Any],
        said: str,
        *,
        gap: str = "",
        reset_to: int | None = None,
        version: int = 0,
        finish: str = "tool_calls",
    ) -> CallRecord:
        if reset_to is not None:  # the harness rewrote its history: a chain break
            self.tokens = self.tokens[:reset_to] + enc("[summary of earlier turns]\n")
        prompt = self.tokens + enc(gap)
        completion = enc(said)
        logprobs = [-abs(self.rng.gauss(0.0, 0.8)) for _ in completion]
        rec = CallRecord(
            rollout_id=self.rid,
            index=len(self.calls),
            protocol=self.protocol,
            request=request,
            prompt_token_ids=prompt,
            completion_token_ids=completion,
            completion_logprobs=logprobs,
            response_text=None if finish == "tool_calls" else said,
            finish_reason=finish,
            policy_version=version,
            started_at=self.t,
            finished_at=self.t + 0.4,
        )
        self.t += 1.0
        self.tokens = prompt + completion
        self.calls.append(rec)
        return rec


def chat_history(steps: Sequence[tuple[str, str, dict[str, Any], Any]]) -> list[list[dict[str, Any]]]:
    """Requests 0..n for a chat rollout whose step k is (call id, tool, args, result content)."""
    msgs: list[dict[str, Any]] = [
        {"role": "system", "content": "you are an agent"},
        {"role": "user", "content": "do the task"},
    ]
    out = [list(msgs)]
    for cid, tool, args, result in steps:
        msgs.append(
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": cid, "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": cid, "content": result})
        out.append(list(msgs))
    return out


def record(
    rid: str,
    task: str,
    harness: str,
    status: RolloutStatus,
    reward: float | None,
    version: int = 0,
    t: float = 1000.0,
    **extra: Any,
) -> RolloutRecord:
    comps = {
        "reward": reward or 0.0,
        "pass": float((reward or 0.0) >= 1.0),
        "check.done": float((reward or 0.0) >= 1.0),
    }
    log = (
        f"reward={reward} pass={int((reward or 0) >= 1)}\n{'PASS' if (reward or 0) >= 1 else 'FAIL'} "
        "done: checked\n"
    )
    return RolloutRecord(
        rollout_id=rid,
        task_id=task,
        harness=harness,
        status=status,
        reward=reward,
        reward_components=comps if reward is not None else {},
        verifier_log=log,
        started_at=t,
        finished_at=t + 5,
        policy_versions=[version],
        infra_tainted=status.is_infra,
        closed=True,
        in_batch=True,
        **extra,
    )


def write_run(
    root: Path,
    rollouts: Sequence[tuple[RolloutRecord, Sequence[CallRecord]]],
    *,
    jsonl: str | None = "rollouts.jsonl",
    audits: dict[str, list[dict[str, Any]]] | None = None,
    files: dict[str, dict[str, bytes]] | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(root / "calls.db")
    conn.executescript(SCHEMA)
    conn.executemany(
        "INSERT INTO calls VALUES (?,?,?)",
        [(c.rollout_id, c.index, c.model_dump_json()) for _, calls in rollouts for c in calls],
    )
    conn.executemany(
        "INSERT INTO rollouts VALUES (?,?)", [(r.rollout_id, r.model_dump_json()) for r, _ in rollouts]
    )
    conn.commit()
    conn.close()
    if jsonl:
        (root / jsonl).write_text("".join(r.model_dump_json() + "\n" for r, _ in rollouts))
    for rid, audit in (audits or {}).items():
        (root / "rollouts" / rid).mkdir(parents=True, exist_ok=True)
        (root / "rollouts" / rid / "audit.json").write_text(json.dumps({"calls": audit}))
    for rid, tree in (files or {}).items():
        for rel, data in tree.items():
            path = root / "rollouts" / rid / "files" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    return root
