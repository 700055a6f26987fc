"""Appending a read-only record set (a slice of a request): large ones are not copied (headers
patched beside them), small ones are; the caller's bytes stay untouched either way, and failures
roll back like any append."""

from __future__ import annotations

import os

import pytest

from moldau.protocol.records.batch import validate_batches
from moldau.storage import KafkaStorageError
from moldau.storage.log import COPY_BELOW

from .helpers import FailingFS, FakeClock, append, headers_of, make_batch, open_log, records_of


def _request(*batches: bytearray) -> tuple[bytes, memoryview]:
    raw = b"xx" + b"".join(batches) + b"yy"
    return raw, memoryview(raw)[2 : len(raw) - 2]


@pytest.mark.parametrize("value_size", [20, 4000], ids=["copied", "vectored"])
def test_read_only_record_set_is_written_with_patched_offsets(tmp_path, value_size) -> None:
    log = open_log(str(tmp_path / "t-0"))
    append(log, make_batch(4))
    raw, records = _request(make_batch(3, value_size=value_size),
                            make_batch(2, ts=5_000, value_size=value_size))
    assert (len(records) >= COPY_BELOW) == (value_size == 4000)
    before = bytes(raw)
    info = log.append(records, validate_batches(records), 7)
    assert (info.first_offset, info.last_offset) == (4, 8)
    assert raw == before  # the request buffer is not modified
    data = log.read(0, 1 << 20).records
    hs = headers_of(data)
    assert [(h.base_offset, h.partition_leader_epoch) for h in hs] == [(0, 0), (4, 7), (7, 7)]
    assert [r[0] for r in records_of(data)] == list(range(9))
    # CRCs still hold: patching offset and epoch does not touch the checksummed region
    validate_batches(bytearray(data))
    with open(log.active_segment.log_path, "rb") as f:
        assert f.read() == bytes(data)
    log.close()


def test_bytes_record_set_and_log_append_time(tmp_path) -> None:
    clock = FakeClock(2_000_000)
    log = open_log(str(tmp_path / "t-0"), clock, message_timestamp_type="LogAppendTime")
    batch = bytes(make_batch(2))
    info = log.append(batch, validate_batches(batch), 1)
    assert info.log_append_time_ms == 2_000_000
    (h,) = headers_of(log.read(0, 1 << 20).records)
    assert h.is_log_append_time and h.max_timestamp == 2_000_000
    validate_batches(bytearray(log.read(0, 1 << 20).records))
    log.close()


def test_failed_vectored_append_is_rolled_back(tmp_path) -> None:
    fs = FailingFS()
    log = open_log(str(tmp_path / "t-0"), fs=fs)
    append(log, make_batch(2))
    size = log.active_segment.size
    _raw, records = _request(make_batch(3, value_size=4000))
    assert len(records) >= COPY_BELOW
    fs.fail_writes, fs.torn_bytes = True, 10
    with pytest.raises(KafkaStorageError):
        log.append(records, validate_batches(records), 0)
    fs.fail_writes = False
    assert log.log_end_offset == 2
    assert os.path.getsize(log.active_segment.log_path) == size
    info = log.append(records, validate_batches(records), 0)
    assert info.first_offset == 2
    log.close()


def test_many_batches_more_than_iov_max(tmp_path) -> None:
    log = open_log(str(tmp_path / "t-0"))
    batches = [make_batch(1, ts=1_000 + i, value_size=5) for i in range(700)]  # 1,400 chunks
    _raw, records = _request(*batches)
    info = log.append(records, validate_batches(records), 0)
    assert info.last_offset == 699
    assert [r[0] for r in records_of(log.read(0, 1 << 22).records)] == list(range(700))
    log.close()
