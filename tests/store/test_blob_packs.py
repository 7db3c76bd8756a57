"""The call log's blob packs (`store/blobfiles.py`): what one process appends, another reads; a torn or
forged entry is never served; logs with a file per blob are still read."""

from __future__ import annotations

import hashlib
import os
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openforgerl.store import blobfiles
from openforgerl.store.blobfiles import BlobFiles


def _blob(k: int, size: int = 3000) -> tuple[str, bytes]:
    data = bytes([k % 251]) * size + str(k).encode()
    return hashlib.sha256(data).hexdigest(), data


def test_two_writers_on_one_log_each_append_a_pack_of_their_own_and_a_reader_finds_both(tmp_path):
    a, b, reader = BlobFiles(tmp_path), BlobFiles(tmp_path), BlobFiles(tmp_path)
    (sa, da), (sb, db), (sc, dc) = _blob(1), _blob(2), _blob(3)
    a.put(sa, da)
    b.put(sb, db)
    assert reader.read(sa) == da and reader.read(sb) == db
    a.put(sc, dc)  # written after the reader's scan: a miss looks again
    assert reader.read(sc) == dc
    assert len(list((tmp_path / "packs").iterdir())) == 2
    assert reader.usage() == (3, len(da) + len(db) + len(dc))
    a.close()
    b.close()


def test_a_torn_entry_at_the_end_of_a_pack_is_skipped_and_what_came_before_is_read(tmp_path):
    writer = BlobFiles(tmp_path)
    (s1, d1), (s2, d2) = _blob(1), _blob(2)
    writer.put(s1, d1)
    writer.close()
    (pack,) = (tmp_path / "packs").iterdir()
    whole = b"OFB1" + bytes.fromhex(s2) + len(d2).to_bytes(8, "big") + d2
    with open(pack, "ab") as f:  # a writer killed half-way through its second entry
        f.write(whole[: len(whole) // 2])
    reader = BlobFiles(tmp_path)
    assert reader.read(s1) == d1 and reader.read(s2) is None
    assert reader.usage() == (1, len(d1))
    BlobFiles(tmp_path).put(s2, d2)  # the next process writes it again, in a pack of its own
    assert reader.read(s2) == d2


def test_bytes_that_do_not_match_their_hash_are_never_served(tmp_path):
    writer = BlobFiles(tmp_path)
    sha, data = _blob(7)
    writer.put(sha, data)
    writer.close()
    (pack,) = (tmp_path / "packs").iterdir()
    raw = bytearray(pack.read_bytes())
    raw[-10] ^= 0xFF  # same length, other pixels (an OS crash's garbage, or a forger's)
    pack.write_bytes(bytes(raw))
    reader = BlobFiles(tmp_path)
    assert reader.read(sha) is None
    BlobFiles(tmp_path).put(sha, data)  # a good copy elsewhere is found past the bad one
    assert reader.read(sha) == data


def test_logs_with_a_file_per_blob_are_still_read(tmp_path):
    sha, data = _blob(5)
    (tmp_path / sha[:2]).mkdir()
    (tmp_path / sha[:2] / sha).write_bytes(data)
    store = BlobFiles(tmp_path)
    assert store.read(sha) == data and store.usage() == (1, len(data))
    store.put(sha, data)  # the same blob in a pack too: still one blob
    assert store.usage() == (1, len(data))


def test_names_that_are_not_sha256_digests_are_never_looked_up_or_written(tmp_path):
    store = BlobFiles(tmp_path)
    for bad in ("../" * 8 + "etc/passwd", "a" * 63, "A" * 64, "g" * 64):
        assert store.read(bad) is None
        with pytest.raises(ValueError):
            store.put(bad, b"x")
    assert not (tmp_path / "packs").exists()


def test_a_full_pack_is_closed_and_the_next_blob_begins_another(tmp_path, monkeypatch):
    monkeypatch.setattr(blobfiles, "_PACK_LIMIT", 5000)
    store = BlobFiles(tmp_path)
    blobs = [_blob(k) for k in range(5)]
    for sha, data in blobs:
        store.put(sha, data)
    store.close()
    assert len(list((tmp_path / "packs").iterdir())) == 3  # two 3 KB entries fill a pack
    reader = BlobFiles(tmp_path)
    assert all(reader.read(sha) == data for sha, data in blobs)


@pytest.mark.skipif(sys.platform != "linux", reason="fork")
def test_a_forked_child_appends_to_a_pack_of_its_own(tmp_path):
    store = BlobFiles(tmp_path)
    (s1, d1), (s2, d2), (s3, d3) = _blob(1), _blob(2), _blob(3)
    store.put(s1, d1)
    pid = os.fork()
    if pid == 0:  # the child: never the parent's file offset
        try:
            store.put(s2, d2)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    store.put(s3, d3)
    store.close()
    reader = BlobFiles(tmp_path)
    assert [reader.read(s) for s in (s1, s2, s3)] == [d1, d2, d3]
    assert len(list((tmp_path / "packs").iterdir())) == 2


@settings(max_examples=25, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=300), min_size=1, max_size=12))
def test_every_blob_put_is_read_back_as_it_was(tmp_path_factory, blobs):
    root = tmp_path_factory.mktemp("packs")
    writer = BlobFiles(root)
    shas = [hashlib.sha256(b).hexdigest() for b in blobs]
    for sha, data in zip(shas, blobs, strict=True):
        writer.put(sha, data)
    reader = BlobFiles(root)
    assert [reader.read(s) for s in shas] == blobs
    assert reader.usage() == (
        len(set(shas)),
        sum(len(b) for b in {s: b for s, b in zip(shas, blobs, strict=True)}.values()),
    )
    writer.close()
