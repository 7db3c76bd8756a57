"""Content-addressed blobs beside a SQLite call log, appended to pack files: `<db>.blobs/packs/*.pack`.

Why packs, not a file per blob or a row of the `blobs` table (`benchmarks/blob_store.py`, 41 KB
screenshots, CPU per new blob): a row cost 178-200 us (the journal copy, then the WAL frames of its
overflow pages, then the checkpoint copying them into the database: every byte written three times);
a file of its own 48-68 us, and 150-165 us inside the gateway (open, write, close, rename: an inode and
two directory entries per screenshot, the kernel's time); one append to an open pack file is one
`pwritev`. In the gateway, per call with a new screenshot, that was 17 % of its CPU (multimodal.py).

Layout: each store process appends to a pack of its own (created `O_EXCL` under a unique name, so two
gateway processes on one log never share a file), entry after entry: a 44-byte header (`OFB1`, the
raw sha256, the length) and the bytes. Entries are written one at a time, in order, under a lock, so
a pack is a run of complete entries with at most one torn entry at its end (a process killed during
its write); a reader stops there and looks again when asked for a blob it has not found.

Ordering: a blob is written before `put` returns, so before the gateway journals the record naming
it: a written entry survives a kill of the process as the journal does (the page cache is the
kernel's); `durable=True` also fdatasyncs the pack (and its folder when the pack is new), which
survives an OS crash. Integrity: a reader checks each blob's sha256 against its name before
returning it, so bytes the header does not match (an OS crash in non-durable mode leaves garbage
where a write was lost) are never served as the image. The folder is the host's: sandboxes never
see it (tests/security/test_sandbox_attacks.py::test_the_call_log_and_its_blob_files_are_unreachable).

A name that is not 64 hex digits is never looked up (`read` answers None, `put` raises). Call logs
written before packs kept one file per blob (`<db>.blobs/<sha256[:2]>/<sha256>`); those are still
read. Readers index every pack they scan in memory (about 150 bytes per blob).
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import struct
import threading
import time
import weakref
from pathlib import Path

__all__ = ["BlobFiles"]

_SHA256 = re.compile(r"[0-9a-f]{64}")
_MAGIC = b"OFB1"
_HEAD = struct.Struct(">4s32sQ")  # magic, sha256 digest, length of the bytes that follow
_PACK_LIMIT = 1 << 30  # a pack this large is closed and a new one begun


class BlobFiles:
    def __init__(self, root: Path, *, durable: bool = False) -> None:
        self.root = root
        self.packs = root / "packs"
        self.durable = durable
        self._write_lock = threading.Lock()
        self._fd: int | None = None  # this process's pack, opened at the first put
        self._end = 0
        self._scan_lock = threading.Lock()
        self._index: dict[bytes, list[tuple[str, int, int]]] = {}  # digest -> (pack, offset, length)
        self._scanned: dict[str, int] = {}  # pack -> bytes of complete entries indexed so far
        _WRITERS.add(self)

    # -- writing -------------------------------------------------------------------------------
    def put(self, sha256: str, data: bytes) -> None:
        """Append the blob to this process's pack; it is in the file (and, durable, on disk) on return."""
        if not _SHA256.fullmatch(sha256):
            raise ValueError(f"not a sha256 hex digest: {sha256[:80]!r}")
        head = _HEAD.pack(_MAGIC, bytes.fromhex(sha256), len(data))
        with self._write_lock:  # one entry at a time: a pack never has a hole before a complete entry
            fd = self._pack_fd()
            _write_all(fd, [head, data], self._end)
            self._end += len(head) + len(data)
            if self.durable:  # under the lock: `close` cannot take the fd away before it is synced
                os.fdatasync(fd)

    def _pack_fd(self) -> int:
        if self._fd is not None and self._end < _PACK_LIMIT:
            return self._fd
        self._drop_fd()
        self.packs.mkdir(parents=True, exist_ok=True)
        name = f"{time.time_ns()}-{os.getpid()}-{secrets.token_hex(4)}.pack"
        self._fd = os.open(self.packs / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        self._end = 0
        if self.durable:  # the new pack's name is on disk before any record can name a blob in it
            dir_fd = os.open(self.packs, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        return self._fd

    def close(self) -> None:
        with self._write_lock:
            self._drop_fd()

    def _forget_pack(self) -> None:
        """In a forked child: the parent's pack (and its end offset) stay the parent's."""
        self._write_lock = threading.Lock()  # the parent may have held it at the fork
        self._drop_fd()  # the child's copy of the descriptor only

    def _drop_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- reading -------------------------------------------------------------------------------
    def read(self, sha256: str) -> bytes | None:
        """The blob's bytes (checked against its hash), or None when no pack or old file holds it."""
        if not _SHA256.fullmatch(sha256):
            return None
        digest = bytes.fromhex(sha256)
        for again in (False, True):
            if again:
                self._scan()
            for pack, offset, length in self._index.get(digest, ()):
                data = self._pread(pack, offset, length)
                if data is not None and hashlib.sha256(data).digest() == digest:
                    return data
        return self._old_file(sha256)

    def _pread(self, pack: str, offset: int, length: int) -> bytes | None:
        try:
            fd = os.open(self.packs / pack, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            return os.pread(fd, length, offset)
        finally:
            os.close(fd)

    def _old_file(self, sha256: str) -> bytes | None:
        try:
            return (self.root / sha256[:2] / sha256).read_bytes()
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _scan(self) -> None:
        """Index the entries written since the last scan, in every pack."""
        try:
            names = sorted(n for n in os.listdir(self.packs) if n.endswith(".pack"))
        except FileNotFoundError:
            return
        with self._scan_lock:
            for name in names:
                self._scan_pack(name)

    def _scan_pack(self, name: str) -> None:
        pos = self._scanned.get(name, 0)
        try:
            fd = os.open(self.packs / name, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            size = os.fstat(fd).st_size
            while pos + _HEAD.size <= size:
                magic, digest, length = _HEAD.unpack(os.pread(fd, _HEAD.size, pos))
                if magic != _MAGIC or pos + _HEAD.size + length > size:
                    break  # the torn end of a pack whose writer died, or a write still under way
                self._index.setdefault(digest, []).append((name, pos + _HEAD.size, length))
                pos += _HEAD.size + length
        finally:
            os.close(fd)
        self._scanned[name] = pos

    def usage(self) -> tuple[int, int]:
        """(blobs, bytes) stored here: distinct blobs, each counted once."""
        self._scan()
        sizes = {digest.hex(): locs[0][2] for digest, locs in self._index.items()}
        for path in self.root.glob("??/*"):
            if _SHA256.fullmatch(path.name):
                sizes.setdefault(path.name, path.stat().st_size)
        return len(sizes), sum(sizes.values())


_WRITERS: weakref.WeakSet[BlobFiles] = weakref.WeakSet()


def _forget_packs_in_child() -> None:
    for files in list(_WRITERS):
        files._forget_pack()


os.register_at_fork(after_in_child=_forget_packs_in_child)  # a check per put would cost a getpid syscall


def _write_all(fd: int, parts: list[bytes], offset: int) -> None:
    """`pwritev` until every byte is written (a regular file takes it in one call, nearly always)."""
    total = sum(len(p) for p in parts)
    done = os.pwritev(fd, parts, offset)
    if done < total:
        rest = b"".join(parts)[done:]
        while rest:
            n = os.pwrite(fd, rest, offset + done)
            done += n
            rest = rest[n:]
