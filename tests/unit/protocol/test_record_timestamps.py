"""A record's timestamp is its batch's base timestamp plus a varlong delta, added as Kafka adds
them (Java longs, which wrap): a client-chosen delta cannot make a timestamp that no response
can carry (ListOffsets answered with one, and its encoder raised)."""

from __future__ import annotations

from moldau.protocol.records.codec import decode_batch
from tests.integration.record_shapes import batch, record

INT64_MAX = (1 << 63) - 1
INT64_MIN = -(1 << 63)


def test_timestamps_wrap_like_java_longs() -> None:
    base = INT64_MAX - 5
    records = record(0, ts_delta=10) + record(1, ts_delta=0) + record(2, ts_delta=-7)
    decoded = decode_batch(batch(records, count=3, base_timestamp=base, max_timestamp=base))
    assert [r.timestamp for r in decoded.records] == [INT64_MIN + 4, base, base - 7]
    low = batch(record(0, ts_delta=-10), count=1, base_timestamp=INT64_MIN + 5)
    assert decode_batch(low).records[0].timestamp == INT64_MAX - 4
