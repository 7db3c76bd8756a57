"""Content-addressed blob files beside a SQLite call log: `<db>.blobs/<sha256[:2]>/<sha256>`.

Why files, not the `blobs` table (`benchmarks/blob_store.py`, 41 KB screenshots, CPU per new blob): a
row cost 178-200 us (the journal copy, then the WAL frames of its overflow pages, then the checkpoint
copying them into the database: every byte written three times); a file costs 48-68 us (one write,
one rename). In the gateway, per call with a new screenshot: 0.82-0.86x the CPU (multimodal.py).

A blob is written before `put_blob` returns, so a record naming it, which the gateway journals only
afterwards, never outlives it: a file written and renamed survives a kill of the process as the
journal does (the page cache is the kernel's); `durable=True` also fsyncs the file and its folder,
which survives an OS crash. The folder is the host's: sandboxes never see it
(tests/security/test_sandbox_attacks.py::test_the_call_log_and_its_blob_files_are_unreachable).

The name is the content's hash, so a write is idempotent and two gateway processes writing the same
screenshot at once race harmlessly (each renames its own temporary file over the same bytes). A name
that is not 64 hex digits is never a path (`read` answers None), so a hash from a request cannot walk
out of the folder.
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

__all__ = ["BlobFiles"]

_SHA256 = re.compile(r"[0-9a-f]{64}")
_tmp_names = itertools.count()


class BlobFiles:
    def __init__(self, root: Path, *, durable: bool = False) -> None:
        self.root = root
        self.durable = durable
        self._made: set[str] = set()  # sub-folders known to exist (a mkdir per put costs a syscall)

    def path(self, sha256: str) -> Path | None:
        return self.root / sha256[:2] / sha256 if _SHA256.fullmatch(sha256) else None

    def put(self, sha256: str, data: bytes) -> None:
        """Write the blob under its hash (a temporary name, then an atomic rename)."""
        final = self.path(sha256)
        if final is None:
            raise ValueError(f"not a sha256 hex digest: {sha256[:80]!r}")
        folder = final.parent
        if folder.name not in self._made:
            folder.mkdir(parents=True, exist_ok=True)
            self._made.add(folder.name)
        tmp = folder / f".{sha256}.{os.getpid()}.{next(_tmp_names)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if self.durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, final)
        if self.durable:
            dir_fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def read(self, sha256: str) -> bytes | None:
        path = self.path(sha256)
        try:
            return path.read_bytes() if path is not None else None
        except FileNotFoundError:
            return None

    def usage(self) -> tuple[int, int]:
        """(blobs, bytes) stored here."""
        sizes = [p.stat().st_size for p in self.root.glob("??/*") if not p.name.startswith(".")]
        return len(sizes), sum(sizes)
