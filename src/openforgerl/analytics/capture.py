"""Keep what `analyze` and `view` need from a rollout's sandbox before it is torn down.

`capture_rollout(sandbox, task, dest)` runs one short program inside the sandbox (the services live in
its network namespace) that fetches the Claw services' `GET /audit` and reads the agent's workdir
(regular files only, links never followed, `.claw/` skipped, bounded), then writes
`dest/audit.json` and `dest/files/<path>` on the host. Best effort: a failure is returned as text,
never raised, so it can never fail a rollout.

Where it must run: after the harness exits and before the sandbox closes — in
`orchestrator/rollout.py` `_judge`, right before `run.req.task.verify(sandbox)`, when
`config.artifacts_dir` is set (`dest = artifacts_dir / rollout_id`, the folder `_keep_artifacts`
already writes). The trainer and `eval` then only need `artifacts_dir=<out>/rollouts` by default.
"""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["CAPTURE_PROGRAM", "capture_rollout", "write_capture"]

MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 16 << 20

CAPTURE_PROGRAM = r"""
import base64, json, os, stat, sys, urllib.request
url, root, max_file, max_total = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
out = {"audit": None, "files": {}, "skipped": []}
try:
    with urllib.request.urlopen(url + "/audit", timeout=10) as r:
        out["audit"] = json.loads(r.read()).get("calls")
except Exception as e:
    out["audit_error"] = repr(e)
total = 0
for d, dirs, files in os.walk(root, followlinks=False):
    dirs[:] = sorted(x for x in dirs if not (d == root and x == ".claw"))
    for name in sorted(files):
        p = os.path.join(d, name)
        rel = os.path.relpath(p, root)
        st = os.lstat(p)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_file or total + st.st_size > max_total:
            out["skipped"].append(rel)
            continue
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(max_file + 1)[:max_file]
        total += len(data)
        out["files"][rel] = base64.b64encode(data).decode()
sys.stdout.write(json.dumps(out))
"""


async def capture_rollout(
    sandbox: Any, task: Any, dest: Path, *, workdir: str = "/workdir", timeout_s: float = 10.0
) -> str:
    """Fetch audit + workdir from `sandbox` into `dest`; "" on success, else why not (never raises)."""
    url = getattr(task, "url", None)
    python = getattr(task, "python", None) or "python3"
    argv = [
        python,
        "-I",
        "-c",
        CAPTURE_PROGRAM,
        str(url or "http://127.0.0.1:0"),
        workdir,
        str(MAX_FILE_BYTES),
        str(MAX_TOTAL_BYTES),
    ]
    try:
        res = await sandbox.exec(argv, timeout_s=timeout_s)
        if res.returncode != 0:
            return f"capture exited {res.returncode}: {res.stderr.decode(errors='replace')[-300:]}"
        data = json.loads(res.stdout)
        await asyncio.to_thread(write_capture, dest, data, has_service=url is not None)
    except Exception as exc:  # best effort: the rollout's verdict never depends on this
        return f"capture failed: {type(exc).__name__}: {exc}"
    return ""


def write_capture(dest: Path, data: dict[str, Any], *, has_service: bool = True) -> None:
    """`audit.json` and `files/` from the capture program's output (paths re-checked on the host)."""
    dest.mkdir(parents=True, exist_ok=True)
    if has_service and data.get("audit") is not None:
        (dest / "audit.json").write_text(json.dumps({"calls": data["audit"]}, indent=1))
    files_root = dest / "files"
    for rel, b64 in (data.get("files") or {}).items():
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or any(p in ("..", "") for p in parts):
            continue
        target = files_root.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(base64.b64decode(b64))
    if data.get("skipped"):
        (dest / "files_skipped.json").write_text(json.dumps(data["skipped"]))
