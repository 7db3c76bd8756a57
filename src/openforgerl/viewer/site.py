"""What the viewer shows, independent of how it is delivered (aiohttp server or static bundle).

`Site` holds the runs (each a `RunDir` + its `RolloutIndex`), the token decoder and a `Links` scheme;
each `*_page` method returns a template name and its context. Nothing here writes, and every file read
goes through `RunDir` (records, call log) or `safe.safe_file` (artifacts).
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from openforgerl.analytics.events import ToolEvent, rollout_events
from openforgerl.analytics.metrics import GoldAction, RolloutFacts, behaviour
from openforgerl.analytics.report import passed
from openforgerl.analytics.rundir import RunDir, TaskIndex, suite_family
from openforgerl.analytics.wire import WireItem, request_items
from openforgerl.records import CallRecord, RolloutRecord
from openforgerl.store.blobfiles import BlobFiles
from openforgerl.viewer.align import align_events
from openforgerl.viewer.gui import BlobReader, gui_frames, resolve_image
from openforgerl.viewer.index import FILTERS, RolloutIndex, RolloutRow
from openforgerl.viewer.safe import safe_file
from openforgerl.viewer.tokens import Decoder, chain_views, load_decoder

__all__ = [
    "BEHAVIOUR_HELP",
    "Links",
    "Page",
    "Site",
    "blob_reader",
    "default_pair",
    "inert_suffix",
    "outcome",
]

BEHAVIOUR_HELP = {
    "sv": "self-verification: 1 if a successful write is read back (same resource) before the answer; "
    "– without a successful write",
    "sv_frac": "verified writes / successful writes",
    "tc": "distinct tools called (any outcome)",
    "tc_norm": "tool coverage: share of the offered tools that were called",
    "tc_req": "share of the gold (required) tools that were called",
    "er": "error recovery: share of errors followed within 4 events by a success of the same tool; "
    "– without errors",
    "errors": "error events (a failed call or an injected fault)",
    "cfs": "catastrophic first step: 1 if the first write fails, misses every gold resource or trips a "
    "safety check (lower is better); – without a write",
    "pc": "plan completion: gold actions matched in order by successful calls / gold actions",
    "iba": "inspect before act: 1 if a read of the first write's service comes before it; – without a write",
    "loop": "longest run of identical consecutive calls (tool + arguments)",
    "rep_ratio": "calls that repeat an earlier identical call / calls",
}
"""What each behaviour column means (analytics/metrics.py defines them); "–" is "not defined here"."""

_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")
_RASTER = (
    (b"\x89PNG\r\n\x1a\n", ".png"),
    (b"\xff\xd8\xff", ".jpg"),
    (b"GIF87a", ".gif"),
    (b"GIF89a", ".gif"),
)
_SNIFF = 8192


def inert_suffix(head: bytes) -> str:
    """The static bundle's extension for a kept file, from its first bytes (never from its name): a raster
    image's own, `.txt` for text (no NUL), else `.bin`. See `viewer.export` for why."""
    for magic, suffix in _RASTER:
        if head.startswith(magic):
            return suffix
    return ".bin" if b"\x00" in head else ".txt"


class Links:
    """URLs of every page; the server and the static bundle differ only here."""

    def __init__(self, static: bool = False) -> None:
        self.static = static

    def home(self) -> str:
        return "index.html" if self.static else "/"

    def table(self, run: int, page: int = 1, filters: Mapping[str, str] | None = None) -> str:
        if self.static:
            return f"run{run}-p{page}.html"
        query = {k: v for k, v in (filters or {}).items() if v}
        if page > 1:
            query["page"] = str(page)
        return f"/run/{run}" + (f"?{urlencode(query)}" if query else "")

    def rollout(self, run: int, rollout_id: str) -> str:
        return f"run{run}-r-{rollout_id}.html" if self.static else f"/run/{run}/rollout/{quote(rollout_id)}"

    def compare(self, task: str, a: str | None = None, b: str | None = None) -> str:
        if self.static:
            return f"compare-{slug(task)}.html"
        query = {"task": task, **({"a": a} if a else {}), **({"b": b} if b else {})}
        return f"/compare?{urlencode(query)}"

    def file(self, run: int, rollout_id: str, kept: Mapping[str, Any]) -> str:
        """A kept file (an `artifact_files` entry): in the bundle under its made-up `bundle_name`."""
        if self.static:
            return f"files/run{run}/{rollout_id}/{kept['bundle_name']}"
        return f"/run/{run}/file/{quote(rollout_id)}/{quote(kept['rel'])}"


def outcome(passed: bool, status: str | None, tainted: bool = False) -> str:
    """The one colour class of a rollout's result, from its score, so a status and a reward never disagree:
    `infra` (grey: an infra or config error or a tainted rollout, no score for the policy), `pass` (green)
    or `fail` (red, a reward-0 `ok` included). The status itself is shown as neutral text."""
    if tainted or str(status or "").startswith(("infra_error", "config_error")):
        return "infra"
    return "pass" if passed else "fail"


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


@dataclass(frozen=True)
class Page:
    template: str
    context: dict[str, Any]


@dataclass(frozen=True)
class CallView:
    call: CallRecord
    new_items: tuple[WireItem, ...]
    rewritten: bool
    events: tuple[ToolEvent, ...]

    @property
    def latency(self) -> float | None:
        c = self.call
        return (c.finished_at - c.started_at) if c.finished_at and c.started_at else None


class Site:
    def __init__(
        self,
        runs: Sequence[RunDir],
        decoder: Decoder,
        *,
        page_size: int = 100,
        tasks: TaskIndex | None = None,
    ) -> None:
        self.runs = list(runs)
        self.decoder = decoder
        self.page_size = page_size
        self.tasks = tasks or TaskIndex.default()

    @classmethod
    def open(cls, roots: Sequence[Path], *, tokenizer: str | None = "tiny", page_size: int = 100) -> Site:
        labels = [Path(r).resolve().name for r in roots]
        if len(labels) == 2 and labels[0] == labels[1]:
            labels = [f"{labels[0]}#0", f"{labels[1]}#1"]
        runs = [RunDir(Path(r), lab) for r, lab in zip(roots, labels, strict=True)]
        return cls(runs, load_decoder(tokenizer, Path(roots[0])), page_size=page_size)

    @cached_property
    def indexes(self) -> list[RolloutIndex]:
        return [RolloutIndex(r) for r in self.runs]

    @cached_property
    def blob_readers(self) -> list[BlobReader]:
        return [blob_reader(r) for r in self.runs]

    def run(self, i: int) -> tuple[RunDir, RolloutIndex] | None:
        return (self.runs[i], self.indexes[i]) if 0 <= i < len(self.runs) else None

    # -- pages ---------------------------------------------------------------------------------
    def home_page(self) -> Page:
        runs = [
            {"i": i, "label": r.label, "rollouts": len(ix), "root": str(r.root)}
            for i, (r, ix) in enumerate(zip(self.runs, self.indexes, strict=True))
        ]
        return Page("home.html", {"runs": runs, "shared_tasks": self.shared_tasks()})

    def shared_tasks(self) -> list[str]:
        sets = [set(ix.distinct("task_id")) for ix in self.indexes]
        return sorted(set.intersection(*sets)) if sets else []

    def table_page(self, i: int, filters: Mapping[str, str], page: int = 1) -> Page | None:
        found = self.run(i)
        if found is None:
            return None
        run, ix = found
        clean = {k: str(filters.get(k, "")) for k in FILTERS}
        rows, total = ix.page(clean, (max(1, page) - 1) * self.page_size, self.page_size)
        pages = max(1, -(-total // self.page_size))
        options = {
            k: ix.distinct(c)
            for k, c in (
                ("task", "task_id"),
                ("harness", "harness"),
                ("status", "status"),
                ("kind", "kind"),
                ("version", "policy_version"),
            )
        }
        return Page(
            "table.html",
            {
                "i": i,
                "run": run.label,
                "rows": rows,
                "total": total,
                "page": page,
                "pages": pages,
                "filters": clean,
                "options": options,
            },
        )

    def rollout_page(self, i: int, rollout_id: str) -> Page | None:
        found = self.run(i)
        if found is None or not _ID.match(rollout_id):
            return None
        run, ix = found
        record = ix.record(rollout_id)
        if record is None:
            return None
        calls = run.calls(rollout_id)
        audit = run.audit(rollout_id)
        events = rollout_events(calls, audit)
        chains, excluded = chain_views(calls, self.decoder)
        read_blob = self.blob_readers[i]
        return Page(
            "rollout.html",
            {
                "i": i,
                "run": run.label,
                "r": record,
                "calls": self._call_views(calls, events, read_blob),
                "events": events,
                "audit": audit,
                "chains": chains,
                "excluded": excluded,
                "frames": gui_frames(calls, events, read_blob),
                "files": self.artifact_files(run, rollout_id),
                "checks": _checks(record),
                "behaviour": self._behaviour(record, events, calls),
                "behaviour_help": BEHAVIOUR_HELP,
                "result": outcome(passed(record), record.status, bool(record.infra_tainted)),
                "family": suite_family(record.task_id),
                "compare_ok": bool(record.task_id),
            },
        )

    def compare_page(self, task: str, a: str | None = None, b: str | None = None) -> Page | None:
        left_i, right_i = 0, (1 if len(self.runs) > 1 else 0)
        left = self.indexes[left_i].for_task(task)
        right = self.indexes[right_i].for_task(task)
        if not left or not right:
            return None
        default_a, default_b = default_pair(left, right, same_run=left_i == right_i)
        pick_a = next((r for r in left if r.rollout_id == a), default_a)
        pick_b = next((r for r in right if r.rollout_id == b), default_b)
        sides: list[dict[str, Any]] = []
        for idx, pick, choices in ((left_i, pick_a, left), (right_i, pick_b, right)):
            run = self.runs[idx]
            calls = run.calls(pick.rollout_id)
            sides.append(
                {
                    "i": idx,
                    "run": run.label,
                    "row": pick,
                    "choices": choices[:50],
                    "events": rollout_events(calls, run.audit(pick.rollout_id)),
                }
            )
        rows = align_events(sides[0]["events"], sides[1]["events"])
        return Page("compare.html", {"task": task, "sides": sides, "rows": rows})

    # -- pieces --------------------------------------------------------------------------------
    def artifact_files(self, run: RunDir, rollout_id: str) -> list[dict[str, Any]]:
        folder = run.artifact_dir(rollout_id)
        if folder is None:
            return []
        out: list[dict[str, Any]] = []
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(run.root).as_posix()
            if path.is_symlink() or not path.is_file() or safe_file(run.root, rel) is None:
                continue
            inner = path.relative_to(folder).as_posix()
            with path.open("rb") as fh:
                head = fh.read(_SNIFF)
            out.append(
                {
                    "rel": inner,
                    "size": path.stat().st_size,
                    "text": _preview(path),
                    "bundle_name": f"{len(out)}{inert_suffix(head)}",
                }
            )
        return out

    def file_path(self, i: int, rollout_id: str, rel: str) -> Path | None:
        found = self.run(i)
        if found is None or not _ID.match(rollout_id):
            return None
        run = found[0]
        if run.artifact_dir(rollout_id) is None:
            return None
        return safe_file(run.root, f"rollouts/{rollout_id}/{rel}")

    def _call_views(
        self, calls: Sequence[CallRecord], events: Sequence[ToolEvent], read_blob: BlobReader | None = None
    ) -> list[CallView]:
        prev: dict[str | None, list[WireItem]] = {}
        out = []
        for call in sorted(calls, key=lambda c: c.index):
            items = request_items(call.protocol, call.request)
            before = prev.get(call.agent_id, [])
            extends = items[: len(before)] == before
            new = items[len(before) :] if extends else items
            prev[call.agent_id] = items
            mine = tuple(e for e in events if e.call_index == call.index)
            shown = tuple(
                replace(it, image=resolve_image(it.image, read_blob)[0]) if it.image else it for it in new
            )
            out.append(CallView(call, shown, not extends and bool(before), mine))
        return out

    def _behaviour(
        self, record: RolloutRecord, events: list[ToolEvent], calls: list[CallRecord]
    ) -> dict[str, Any]:
        task = self.tasks.facts(record.task_id)
        facts = RolloutFacts(
            record.rollout_id,
            tuple(events),
            passed(record),
            record.task_id or "?",
            offered=frozenset(task.offered) if task else frozenset(),
            gold=tuple(GoldAction(t, a) for t, a in task.gold) if task else (),
            forbidden=tuple(GoldAction(t, a) for t, a in task.forbidden) if task else (),
            model_calls=len(calls),
        )
        values = behaviour(facts).as_dict()
        return {k: values[k] for k in BEHAVIOUR_HELP}


def default_pair(
    left: Sequence[RolloutRow], right: Sequence[RolloutRow], *, same_run: bool
) -> tuple[RolloutRow, RolloutRow]:
    """The two rollouts a side by side of one run opens with: a pass (left) and a fail (right) of the task
    when the run has both (scored rollouts only: an infra error says nothing of the policy), else its
    first two. Two runs open with each one's first rollout of the task (run against run)."""
    if not same_run:
        return left[0], right[0]

    def scored(rows: Sequence[RolloutRow], want: bool) -> list[RolloutRow]:
        return [
            r
            for r in rows
            if r.passed == want and outcome(r.passed, r.status, r.infra_reason == "tainted") != "infra"
        ]

    for a_pass in (True, False):
        for first in scored(left, a_pass):
            second = next((r for r in scored(right, not a_pass) if r.rollout_id != first.rollout_id), None)
            if second is not None:
                return first, second
    fallback = right[1] if same_run and len(right) > 1 else right[0]
    return left[0], fallback


def blob_reader(run: RunDir) -> BlobReader:
    """The run's stored image bytes by sha256, read-only: the call log's pack files (`store.blobfiles`, which
    checks each blob against its hash), else the `blobs` table of a log written before them."""
    files = BlobFiles(Path(f"{run.db_path}.blobs"))

    def read(sha256: str) -> bytes | None:
        data = files.read(sha256)
        if data is not None:
            return data
        conn = run.connect()
        if conn is None:
            return None
        try:
            row = conn.execute("SELECT data FROM blobs WHERE sha256=?", (sha256,)).fetchone()
        except sqlite3.OperationalError:  # a log with no blobs table
            row = None
        finally:
            conn.close()
        return (
            bytes(row[0]) if row is not None and hashlib.sha256(bytes(row[0])).hexdigest() == sha256 else None
        )

    return read


def _checks(record: RolloutRecord) -> list[tuple[str, float]]:
    return [
        (k.removeprefix("check."), v) for k, v in record.reward_components.items() if k.startswith("check.")
    ]


def _preview(path: Path, limit: int = 200_000) -> str | None:
    """The file's text if it is text and not huge (shown inline, untruncated up to `limit`)."""
    if path.stat().st_size > limit:
        return None
    data = path.read_bytes()
    if b"\x00" in data:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


def pretty(value: Any) -> str:
    if isinstance(value, str):
        try:
            return json.dumps(json.loads(value), indent=2)
        except ValueError:
            return value
    return json.dumps(value, indent=2, default=str)
