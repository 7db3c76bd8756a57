"""Upstream Claw-Eval's `env_snapshot`: what its runner collects from the agent's sandbox for the grader.

Upstream (`cli.py` `_collect_env_snapshot`, sandbox mode), after the agent loop and before the container
goes: it pushes `sandbox_grader_files` into `/workspace/<path>` (scripts that hold the answers, never seen
by the agent), runs each `env_snapshot_commands` entry (`sh -c`, `environment.env_snapshot_timeout` s,
default 10) and stores `cmd:<command>` = `{exit_code, stdout, stderr}` (a timeout: exit -1 and "Timed out
after Ns"), then reads each `env_snapshot_files` entry (a glob when it has `*` or `?`: sorted, the first
50, files only) as `file:<path>` = its `/read` reply (`{content, mime_type, encoding: "utf-8"}` for text,
`{content: base64, mime_type, encoding: "base64", size_bytes}` otherwise; `{error}` when it fails). On the
host it adds `local_file:<path>` = `{encoding: "base64", content}` for `local_grader_files` (the grader's
ground truth; added in the verifier here, from the task's tests folder).

Here the host does the same after the harness is gone (`ClawTaskRuntime.verify`), on a *copy* of the
agent's final workdir (`LocalSandbox.open_workdir_copy`): the commands run in a fresh sandbox over the
copy (`/workspace` = `/workdir`, no network, the rollout's limits, own PID namespace), the files are read
on the host with the link-refusing readers, and the dict goes to the verifier as an input file. What the
agent left is data: a link, FIFO or oversized file is an `{error}` entry (the grader grades on, as upstream
does with a failed read), a glob never leaves the copy or follows a link, and output is capped. A command
that fails or times out is recorded as upstream records it; our machinery failing (no copy, a sandbox that
cannot start) is `VerifierError`, infra, never a 0. Departures: images and PDFs keep their bytes (upstream
re-encodes images to PNG and renders a PDF's pages), text is decoded with replacement characters, stdout
and stderr are cut at 1 MiB, a file at 8 MiB and the whole snapshot at 64 MiB, and only paths under
`/workspace` (or `/workdir`) are read.
"""

from __future__ import annotations

import base64
import hashlib
import json
import mimetypes
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Any

from openforgerl.env.contract import VerifierError
from openforgerl.sandbox.base import SandboxError, TamperError

__all__ = ["MANIFEST", "SNAPSHOT_INPUT", "SnapshotSpec", "collect_env_snapshot", "glob_paths", "held_images"]

MANIFEST = "claw_eval/env_snapshot.json"  # under the task's tests/, written by the importer
GRADER_FILES = "claw_eval/sandbox_grader_files"  # pushed into the copy after the run
LOCAL_FILES = "claw_eval/local_grader_files"  # the grader's ground truth, read by the verifier
SNAPSHOT_INPUT = "host/env_snapshot.json"  # the verifier's input
ROOTS = ("/workspace/", "/workdir/")
GLOB_MAX = 50  # upstream's `/glob` max_files
MAX_STREAM = 1 << 20
MAX_FILE = 8 << 20
MAX_TOTAL = 64 << 20
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The commands run upstream's check scripts over the agent's files: that Python must not import the agent's
# modules. `python /workspace/fixtures/verify_*.py` puts the script's folder first on sys.path (`-c`, the cwd:
# /workspace), so a planted `fixtures/json.py` would run inside the check and print its verdict. Grader code
# runs with no script folder or cwd on sys.path (PYTHONSAFEPATH); our `snapshot_site/sitecustomize.py` hands
# the programs it starts (the agent's) upstream's environment back. A command that runs the agent's own script
# (`python /workspace/decode.py`) keeps upstream's sys.path: its siblings are its own modules. HOME is the
# copy's fresh /tmp (it was /workdir: a user-site `usercustomize.py` there would run in every Python).
SAFE_PYTHON = {
    "PYTHONSAFEPATH": "1",
    "PYTHONNOUSERSITE": "1",
    "PYTHONPATH": str(Path(__file__).parent / "snapshot_site"),
}
COMMAND_HOME = {"HOME": "/tmp"}
# upstream sandbox server's `/read`: what it returns as text
TEXT_MIMES = {
    "application/json",
    "application/xml",
    "application/yaml",
    "application/x-yaml",
    "application/javascript",
}
TEXT_EXTENSIONS = {
    ".txt",
    ".md",
    ".csv",
    ".json",
    ".yaml",
    ".yml",
    ".xml",
    ".html",
    ".htm",
    ".js",
    ".ts",
    ".py",
    ".sh",
    ".bash",
    ".cfg",
    ".ini",
    ".toml",
    ".log",
    ".sql",
    ".r",
    ".rmd",
}


def runs_agent_script(cmd: str, grader_files: Sequence[str]) -> bool:
    """Whether every Python a command line starts is `python <script> ...` with a script that is not one of
    the pushed grader files: the agent's program, run as upstream runs it (`python /workspace/decode.py 2>&1;
    echo EXIT_CODE=$?`). A grader script, `-c`, `-m` or an unparsable line is grader code."""
    lexer = shlex.shlex(cmd, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:
        return False
    pushed = {f"{root}{rel}" for rel in grader_files for root in ROOTS}
    segments: list[list[str]] = [[]]
    for word in words:
        if word and all(ch in ";&|()" for ch in word):
            segments.append([])
        else:
            segments[-1].append(word)
    pythons = [seg for seg in segments if seg and PurePosixPath(seg[0]).name.startswith("python")]
    return bool(pythons) and all(
        len(seg) > 1 and not seg[1].startswith("-") and seg[1] not in pushed for seg in pythons
    )


@dataclass(frozen=True)
class SnapshotSpec:
    commands: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    timeout_s: int = 10
    grader_files: Mapping[str, bytes] = field(default_factory=dict)  # path under /workspace -> bytes

    @classmethod
    def from_tests(cls, tests: Path) -> SnapshotSpec | None:
        """The task's snapshot manifest (None: the task takes no snapshot)."""
        path = tests / MANIFEST
        if not path.is_file():
            return None
        try:
            raw = json.loads(path.read_text())
            files = {
                str(rel): (tests / GRADER_FILES / str(rel)).read_bytes()
                for rel in raw.get("sandbox_grader_files") or []
            }
        except (
            OSError,
            ValueError,
            AttributeError,
        ) as exc:  # the task folder is broken: not the agent's doing
            raise VerifierError(f"env snapshot manifest {path}: {exc}") from exc
        return cls(
            tuple(map(str, raw.get("commands") or ())),
            tuple(map(str, raw.get("files") or ())),
            int(raw.get("timeout_s") or 10),
            files,
        )


async def collect_env_snapshot(
    sandbox: Any, spec: SnapshotSpec, python_dir: str | None = None
) -> dict[str, Any]:
    """Upstream's env_snapshot dict, taken on a copy of the sandbox's final workdir
    (see the module docstring)."""
    opener = getattr(sandbox, "open_workdir_copy", None)
    if opener is None:
        raise VerifierError(
            f"the task's grader needs an env snapshot, which {type(sandbox).__name__} cannot take "
            "(it needs a private copy of the workdir: the local backend)"
        )
    try:
        copy = await opener()
    except (SandboxError, OSError) as exc:
        raise VerifierError(f"env snapshot: could not copy the workdir: {exc}") from exc
    try:
        return await _collect(copy, spec, python_dir)
    except (SandboxError, OSError) as exc:  # our machinery, not the agent's files (those are {error} entries)
        raise VerifierError(f"env snapshot: {exc}") from exc
    finally:
        await copy.aclose()


BROWSERS = ".pw-browsers"  # under the copy's own /tmp


def browser_shim(tmp: Path) -> dict[str, str]:
    """Let an unmodified upstream script's `playwright.chromium.launch()` (the webpage tasks' recording
    script) find a browser: Playwright looks for its own download under `PLAYWRIGHT_BROWSERS_PATH`; there
    the host's Chromium (Debian's, as the browser environments use) is linked under the revisions the
    installed Playwright asks for. {} when there is no Playwright or no Chromium (the script then reports
    its own failure, which the grader reads, as upstream's would)."""
    from importlib.util import find_spec

    try:
        from openforgerl.env.computer.chromium import chromium_path

        chromium, spec = chromium_path(), find_spec("playwright")
    except (FileNotFoundError, ImportError, ValueError):
        return {}
    manifest = (
        Path(spec.origin).parent / "driver" / "package" / "browsers.json" if spec and spec.origin else None
    )
    if manifest is None or not manifest.is_file():
        return {}
    revisions = {
        str(b.get("name")): str(b.get("revision"))
        for b in json.loads(manifest.read_text()).get("browsers", [])
    }
    layouts = {
        "chromium": ("chromium-{}", ("chrome-linux", "chrome-linux64"), "chrome"),
        "chromium-headless-shell": (
            "chromium_headless_shell-{}",
            ("chrome-linux", "chrome-headless-shell-linux64"),
            "chrome-headless-shell",
        ),
    }
    for name, (folder, subs, exe) in layouts.items():
        if name not in revisions:
            continue
        for sub in subs:
            where = tmp / BROWSERS / folder.format(revisions[name]) / sub
            where.mkdir(parents=True, exist_ok=True)
            for link in {exe, "headless_shell"}:
                (where / link).symlink_to(chromium)
    return {"PLAYWRIGHT_BROWSERS_PATH": f"/tmp/{BROWSERS}"}


async def _collect(copy: Any, spec: SnapshotSpec, python_dir: str | None) -> dict[str, Any]:
    for rel, data in spec.grader_files.items():
        await copy.write(rel, data)
    env = {"PATH": f"{python_dir}:{DEFAULT_PATH}" if python_dir else DEFAULT_PATH, **COMMAND_HOME}
    if spec.commands:
        env |= browser_shim(copy.base / "tmp")
    snapshot: dict[str, Any] = {}
    for cmd in spec.commands:  # first: they often make the files read below
        cmd_env = env if runs_agent_script(cmd, list(spec.grader_files)) else {**env, **SAFE_PYTHON}
        res = await copy.exec(["/bin/sh", "-c", cmd], timeout_s=float(spec.timeout_s), env=cmd_env)
        if res.killed_by_signal is not None:
            raise VerifierError(f"env snapshot: the sandbox of {cmd[:80]!r} was killed from outside")
        snapshot[f"cmd:{cmd}"] = _command_entry(res, spec.timeout_s)
    budget = [MAX_TOTAL]
    listing: list[str] | None = None
    for pattern in spec.files:
        if "*" in pattern or "?" in pattern:
            listing = (
                await copy.paths() if listing is None else listing
            )  # no folders: upstream's glob keeps files
            for path in glob_paths(listing, pattern)[:GLOB_MAX]:
                snapshot[f"file:{path}"] = await _read(copy, path, budget)
        else:
            snapshot[f"file:{pattern}"] = await _read(copy, pattern, budget)
    return snapshot


def _text(data: bytes) -> str:
    return data[:MAX_STREAM].decode("utf-8", errors="replace")


def _command_entry(res: Any, timeout_s: int) -> dict[str, Any]:
    if res.timed_out:
        return {"exit_code": -1, "stdout": "", "stderr": f"Timed out after {timeout_s}s"}
    return {"exit_code": res.returncode, "stdout": _text(res.stdout), "stderr": _text(res.stderr)}


def _relative(path: str) -> str | None:
    root = next((r for r in ROOTS if path.startswith(r)), None)
    if root is None:
        return None
    parts = PurePosixPath(path[len(root) :]).parts
    return "/".join(parts) if parts and ".." not in parts else None


async def _read(copy: Any, path: str, budget: list[int]) -> dict[str, Any]:
    """Upstream's `/read` reply for `path`, read without following a link (not even a parent folder's)."""
    rel = _relative(path)
    if rel is None:
        return {"error": f"outside the workspace: {path}"}
    try:
        data = await copy.read(rel, limit=max(0, min(MAX_FILE, budget[0])))
    except FileNotFoundError:
        return {"error": f"File not found: {path}"}
    except (TamperError, OSError) as exc:
        return {"error": f"not read: {exc}"}
    budget[0] -= len(data)
    ext = PurePosixPath(rel).suffix.lower()
    mime, _ = mimetypes.guess_type(rel)
    text = (
        mime in TEXT_MIMES
        or (mime is not None and mime.startswith("text/"))
        or (mime is None and ext in TEXT_EXTENSIONS)
    )
    if text:
        return {
            "content": data.decode("utf-8", errors="replace"),
            "mime_type": mime or "text/plain",
            "encoding": "utf-8",
        }
    return {
        "content": base64.b64encode(data).decode("ascii"),
        "mime_type": mime or "application/octet-stream",
        "encoding": "base64",
        "size_bytes": len(data),
    }


def held_images(tests: Path, snapshot: Mapping[str, Any] | None) -> dict[str, str]:
    """{sha256 of the base64 text: the base64 text} of every base64 entry of the host's snapshot and of the
    task's local grader files: what a grader's visual judge request may name by hash (`claw_eval_grader`)."""
    out = [
        str(e["content"])
        for e in (snapshot or {}).values()
        if isinstance(e, Mapping) and e.get("encoding") == "base64" and e.get("content")
    ]
    local = tests / LOCAL_FILES
    if local.is_dir():
        out += [
            base64.b64encode(p.read_bytes()).decode("ascii")
            for p in sorted(local.rglob("*"))
            if p.is_file() and not p.is_symlink()
        ]
    return {hashlib.sha256(b.encode()).hexdigest(): b for b in out}


def glob_paths(listing: Sequence[str], pattern: str) -> list[str]:
    """The entries of `listing` (paths relative to the workspace) that `pattern` (an absolute glob under
    /workspace or /workdir, `**` for any folders) matches, as absolute paths under the pattern's root,
    sorted. A leading dot is matched only by a pattern part that starts with one, as in `glob`."""
    root = next((r for r in ROOTS if pattern.startswith(r)), None)
    if root is None:
        return []
    parts = [p for p in pattern[len(root) :].split("/") if p not in ("", ".")]
    return sorted(root + rel for rel in listing if _match(parts, rel.split("/")))


def _match(pattern: list[str], parts: list[str]) -> bool:
    if not pattern:
        return not parts
    head = pattern[0]
    if head == "**":
        return _match(pattern[1:], parts) or (
            bool(parts) and not parts[0].startswith(".") and _match(pattern, parts[1:])
        )
    if not parts or (parts[0].startswith(".") and not head.startswith(".")):
        return False
    return fnmatchcase(parts[0], head) and _match(pattern[1:], parts[1:])
