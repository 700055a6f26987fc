"""LatencyHistogram: bucket resolution, percentiles, merging, round trip through dicts."""

from __future__ import annotations

import random

from moldau.perf.latency import LatencyHistogram, bucket_of, bucket_value


def test_buckets_are_exact_below_1024_us_and_within_0_2_percent_above() -> None:
    for us in range(0, 1024):
        assert bucket_value(bucket_of(us)) == us
    for us in (1024, 1500, 9_999, 123_456, 5_000_000, 60_000_000):
        assert abs(bucket_value(bucket_of(us)) - us) / us < 0.002
    # monotone: larger values never land in smaller buckets
    values = sorted(random.Random(1).randrange(0, 10**8) for _ in range(2000))
    idx = [bucket_of(v) for v in values]
    assert idx == sorted(idx)


def test_percentiles_match_sorted_values() -> None:
    rng = random.Random(7)
    values = [int(rng.lognormvariate(7, 1.2)) for _ in range(50_000)]
    h = LatencyHistogram()
    h.record_many(values)
    values.sort()
    for p in (50, 95, 99, 99.9):
        exact = values[int(p / 100 * len(values) + 0.999999) - 1] / 1000
        assert abs(h.percentile_ms(p) - exact) <= max(0.002 * exact, 0.0011)
    assert h.max_ms == values[-1] / 1000
    assert abs(h.avg_ms - sum(values) / len(values) / 1000) < 1e-9


def test_merge_equals_recording_everything_in_one() -> None:
    a, b, both = LatencyHistogram(), LatencyHistogram(), LatencyHistogram()
    for i, v in enumerate(random.Random(3).randrange(0, 200_000) for _ in range(10_000)):
        (a if i % 3 else b).record(v)
        both.record(v)
    a.merge(b)
    assert a.counts[: len(both.counts)] == both.counts
    assert (a.count, a.total_us, a.max_us) == (both.count, both.total_us, both.max_us)


def test_dict_round_trip_and_empty() -> None:
    h = LatencyHistogram()
    assert h.percentile_ms(99) == 0.0 and h.avg_ms == 0.0
    h.record_many([5, 5, 900, 40_000, -3])
    back = LatencyHistogram.from_dict(h.to_dict())
    assert back == h
    assert back.percentile_ms(50) == 0.005
