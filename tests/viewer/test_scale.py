"""A 10,000-rollout run: the table pages from SQLite without loading every rollout.

Measures index build, page and rollout-page times and the memory they take (tracemalloc peak);
prints them (`-s`) and keeps generous bounds for a shared 2-core machine.
"""

from __future__ import annotations

import json
import sqlite3
import time
import tracemalloc
from pathlib import Path

import pytest
from analytics._rundir import SCHEMA, enc

from openforgerl.records import CallRecord, RolloutRecord, RolloutStatus, WireProtocol
from openforgerl.viewer.render import Renderer
from openforgerl.viewer.site import Links, Site

N = 10_000
STATUSES = [RolloutStatus.OK, RolloutStatus.AGENT_FAILED, RolloutStatus.TIMEOUT, RolloutStatus.INFRA_ENGINE]


def _build(root: Path) -> None:
    root.mkdir(parents=True)
    prompt = enc("system: you are an agent.\nuser: send the mail.\n" * 4)
    conn = sqlite3.connect(root / "calls.db")
    conn.executescript(SCHEMA)
    lines = []
    for i in range(N):
        rid = f"r{i:05d}"
        status = STATUSES[i % 4]
        rec = RolloutRecord(
            rollout_id=rid,
            task_id=f"claw/task-{i % 97:02d}",
            harness=("zero", "codex")[i % 2],
            status=status,
            reward=None if status.is_infra else float(i % 3 == 0),
            verifier_log="reward=...\n" * 20,
            started_at=1000.0 + i,
            policy_versions=[i // 2500],
            infra_tainted=status.is_infra,
            metadata={"harness_stdout_tail": "x" * 2000},
        )
        lines.append(rec.model_dump_json() + "\n")
        conn.execute("INSERT INTO rollouts VALUES (?,?)", (rid, lines[-1]))
        for k in range(3):
            msgs = [{"role": "user", "content": "send it"}] + [
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": f"c{j}",
                            "type": "function",
                            "function": {"name": "mail_send", "arguments": "{}"},
                        }
                    ],
                }
                for j in range(k)
            ]
            call = CallRecord(
                rollout_id=rid,
                index=k,
                protocol=WireProtocol.CHAT,
                request={"messages": msgs},
                prompt_token_ids=prompt * (k + 1),
                completion_token_ids=prompt[:8],
                completion_logprobs=[-0.1] * 8,
                started_at=1000.0 + i + k,
                finished_at=1000.5 + i + k,
            )
            conn.execute("INSERT INTO calls VALUES (?,?,?)", (rid, k, call.model_dump_json()))
    conn.commit()
    conn.close()
    (root / "train_rollouts.jsonl").write_text("".join(lines))


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("big") / "run"
    _build(root)
    return root


def _rss_mb() -> float:
    import os

    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _timed(fn: object) -> tuple[object, float]:
    t0 = time.perf_counter()
    out = fn()  # type: ignore[operator]
    return out, time.perf_counter() - t0


def test_ten_thousand_rollouts_page_from_sqlite(big_run: Path) -> None:
    renderer = Renderer(Links(static=False))
    rss0 = _rss_mb()
    tracemalloc.start()
    site, t_open = _timed(lambda: Site.open([big_run], tokenizer="tiny"))
    index, t_index = _timed(lambda: site.indexes[0])  # type: ignore[attr-defined]
    _, build_peak = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    first, t_first = _timed(lambda: renderer.render(site.table_page(0, {}, 1)))  # type: ignore[attr-defined]
    last, t_last = _timed(lambda: renderer.render(site.table_page(0, {}, 100)))  # type: ignore[attr-defined]
    filt, t_filter = _timed(
        lambda: site.table_page(0, {"harness": "codex", "status": "ok", "version": "3"}, 1)
    )  # type: ignore[attr-defined]
    one, t_rollout = _timed(lambda: renderer.render(site.rollout_page(0, "r09999")))  # type: ignore[attr-defined]
    _, page_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_delta = _rss_mb() - rss0
    stats = {
        "rss_delta_mb": rss_delta,
        "rollouts": len(index),
        "open_s": t_open,
        "index_s": t_index,
        "index_peak_mb": build_peak / 2**20,
        "first_page_s": t_first,
        "last_page_s": t_last,
        "filtered_page_s": t_filter,
        "rollout_page_s": t_rollout,
        "pages_peak_mb": page_peak / 2**20,
        "jsonl_mb": (big_run / "train_rollouts.jsonl").stat().st_size / 2**20,
    }
    print(
        "\n10k-rollout viewer:",
        json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in stats.items()}),
    )
    assert len(index) == N  # type: ignore[arg-type]
    assert filt.context["total"] == 0  # type: ignore[attr-defined]  # codex rollouts are odd, 'ok' ones even
    assert "r00000" in first and "r09900" in last  # type: ignore[operator]
    assert "r09999" in one  # type: ignore[operator]
    assert t_first < 1.0 and t_last < 1.0 and t_filter < 1.0 and t_rollout < 3.0
    assert build_peak < 64 * 2**20 and page_peak < 32 * 2**20
