"""An append-only journal of call records in front of the SQLite log.

Copying a record into the journal's shared memory map makes a finished call durable against a
crash of this process (the pages belong to the kernel's page cache), at a fraction of an SQLite
commit's cost on the event loop (seven WAL frames, locks and B-tree work, plus the periodic
checkpoint with its fsyncs). A copy, not a `write`: a syscall releases the GIL, and in a gateway
whose SQLite writer thread is waiting for it, getting it back cost more than the write (measured
inside the gateway: 44 us per call against under 10). A writer thread then moves journaled records
into SQLite in batches; once everything copied is committed there, the journal starts over at
offset 0 under a new epoch, on pages that are already mapped. The file grows (doubling) when a
burst outruns the writer.

Each store instance owns one journal file, `<db>.journal.<pid>.<random>`, and holds an exclusive
`flock` on it while open; a journal whose lock can be taken belongs to a process that died, and
the next store opened on that database replays it (`INSERT OR IGNORE` plus a byte comparison:
replaying twice is harmless, and a replayed record never overwrites a stored one).
Replay reads frames from offset 0 while they carry the first frame's epoch (never 0: the file's
unused tail is zeros) and a matching CRC: older frames past the live end, and a frame
torn by a kill mid-copy, end it.
Frame: little-endian u32 body length, u32 call index, u32 epoch, u32 CRC-32 of id + body, u16
rollout-id length, then the rollout id and the body (a CallRecord's JSON).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import secrets
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

_HEADER = struct.Struct("<IIIIH")

JournalRow = tuple[str, int, bytes]


class CallJournal:
    """The journal this process writes to (thread-safe)."""

    def __init__(self, db_path: Path, size: int = 16 << 20) -> None:
        self.path = db_path.with_name(f"{db_path.name}.journal.{os.getpid()}.{secrets.token_hex(4)}")
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(self._fd, size)
        self._map = mmap.mmap(self._fd, size)
        self.lock = threading.Lock()
        self.appended = 0  # records copied in, ever (starting over does not reset it)
        self._offset = 0
        self._epoch = 1
        self.closed = False

    def append(self, rollout_id: str, index: int, body: bytes) -> None:
        """Durable against a kill of this process once it returns."""
        rid = rollout_id.encode()
        crc = zlib.crc32(body, zlib.crc32(rid))
        with self.lock:
            if self.closed:
                raise RuntimeError(f"call journal {self.path} is closed")
            header = _HEADER.pack(len(body), index, self._epoch, crc, len(rid))
            at = self._offset
            end = at + len(header) + len(rid) + len(body)
            if end > len(self._map):
                self._map.resize(max(2 * len(self._map), end))  # also grows the file
            m = self._map
            m[at : at + len(header)] = header
            at += len(header)
            m[at : at + len(rid)] = rid
            m[at + len(rid) : end] = body
            self._offset = end
            self.appended += 1

    def start_over_if(self, ingested: int) -> bool:
        """Start over at offset 0 (a new epoch) if all `appended` records are `ingested`."""
        with self.lock:
            if self.appended != ingested or self.closed:
                return False
            self._offset = 0
            self._epoch += 1
            return True

    def close(self, *, remove: bool) -> None:
        with self.lock:
            self.closed = True
            self._map.close()
            if remove:
                self.path.unlink(missing_ok=True)
            os.close(self._fd)  # releases the flock


def replay_orphans(db_path: Path, commit: Callable[[list[JournalRow]], None]) -> int:
    """Hand every record of `db_path`'s orphaned journals (their lock can be taken: the owner is
    gone) to `commit`, then delete them; the number of records replayed. The lock is held until
    the file is gone, so two stores opening at once do not both replay it."""
    replayed = 0
    for path in sorted(db_path.parent.glob(f"{db_path.name}.journal.*")):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live store owns it
            if not path.exists():
                continue  # replayed and removed by another store meanwhile
            rows = list(read_journal(path))
            if rows:
                commit(rows)
            path.unlink(missing_ok=True)
            replayed += len(rows)
        finally:
            os.close(fd)
    return replayed


def read_journal(path: Path) -> Iterator[JournalRow]:
    """The live records of a journal file, in order (see the module doc for where they end)."""
    data = path.read_bytes()
    pos, epoch = 0, None
    while pos + _HEADER.size <= len(data):
        size, index, frame_epoch, crc, rid_len = _HEADER.unpack_from(data, pos)
        start = pos + _HEADER.size
        end = start + rid_len + size
        if end > len(data) or frame_epoch == 0 or (epoch is not None and frame_epoch != epoch):
            return
        rid, body = data[start : start + rid_len], data[start + rid_len : end]
        if zlib.crc32(body, zlib.crc32(rid)) != crc:
            return
        epoch = frame_epoch
        yield rid.decode(), index, body
        pos = end
