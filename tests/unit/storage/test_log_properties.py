"""Property test: random appends, truncations, rolls, DeleteRecords and reopens (clean and
crashed) against a simple model of the log."""

from __future__ import annotations

import tempfile

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from moldau.protocol.records.batch import iter_batches
from moldau.storage import LogConfig, load_log

from .helpers import FakeClock, append, make_batch

CFG = LogConfig.from_dict({"segment.bytes": 4000, "index.interval.bytes": 100})

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4), st.integers(0, 250), st.integers(1, 3)),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("delete_records"), st.floats(0, 1)),
        st.tuples(st.just("reopen"), st.booleans()),
        st.tuples(st.just("roll")),
    ),
    min_size=1,
    max_size=40,
)


def check(log, model, start):
    leo = model[-1][1] if model else None
    if leo is not None:
        assert log.log_end_offset == leo
    assert log.log_start_offset == start
    for base, nxt, data in model:
        if nxt <= start:
            continue
        for off in {max(base, start), nxt - 1}:
            r = log.read(off, 1)
            assert bytes(r.records) == data, (off, base)
    # Reading forward batch by batch visits exactly the model's batches.
    seen = []
    off = start
    while off < log.log_end_offset:
        r = log.read(off, 700)
        hs = [h for _p, h in iter_batches(r.records)]
        assert hs
        seen += [h.base_offset for h in hs]
        off = hs[-1].next_offset
    assert seen == [b for b, n, _d in model if n > start]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_log_matches_model(operations):
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/p-0"
        clock = FakeClock()
        log = load_log(path, CFG, time_ms=clock)
        model: list[tuple[int, int, bytes]] = []  # (base, next, bytes)
        start = 0
        ts = 1000
        for op in operations:
            kind = op[0]
            if kind == "append":
                _, records, size, nbatches = op
                buf = bytearray()
                for _ in range(nbatches):
                    buf += make_batch(records, ts, value_size=size)
                    ts += 1
                info = append(log, buf)
                for _pos, h in iter_batches(buf):
                    model.append((h.base_offset, h.next_offset,
                                  bytes(buf[_pos:_pos + h.size])))
                assert info.last_offset + 1 == log.log_end_offset
            elif kind == "truncate":
                leo = log.log_end_offset
                if leo - start < 2:
                    continue
                target = start + 1 + int(op[1] * (leo - start - 2))
                log.truncate_to(target)
                model = [m for m in model if m[1] - 1 < target]
                start = min(start, log.log_end_offset)
            elif kind == "delete_records":
                log.update_high_watermark(log.log_end_offset)
                target = start + int(op[1] * (log.log_end_offset - start))
                start = log.delete_records_before(target)
                assert start == max(target, start)
            elif kind == "reopen":
                clean = op[1]
                rp, hw = log.recovery_point, log.high_watermark
                if clean:
                    log.flush()
                    rp = log.recovery_point
                    log.close()
                else:
                    log.close_handles()
                log = load_log(path, CFG, time_ms=clock, clean_shutdown=clean,
                               recovery_point=rp, log_start_offset=start, high_watermark=hw)
            elif kind == "roll":
                log.roll()
            check(log, model, start)
        log.close()
