"""The live fuzzer's ledger (:mod:`.live`): every record set the broker acknowledges is judged
by the oracle (:func:`~.batches.check_batches`), and the records of valid ones are kept to be
read back at the end, after restarts too."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from moldau.protocol.records.batch import iter_batches
from tests.integration.broker_wire import Wire, fetch_raw, list_offset

from .batches import check_batches
from .corpus import PLAYGROUND_TOPICS
from .support import Pending, read_values

FindingFn = Callable[..., None]
KEEP = 20_000  # records kept per partition (the newest: retention removes the oldest anyway)


class Ledger:
    """Acknowledged records of valid record sets: {(topic, partition): {offset: value}}."""

    def __init__(self) -> None:
        self.records: dict[tuple[str, int], dict[int, bytes | None]] = {}
        self.source: dict[tuple[str, int, int], int] = {}  # which input wrote an offset

    def judge(self, item: Pending, response: Any, finding: FindingFn) -> None:
        """Every record set the broker acknowledged must be valid (the oracle); valid ones of
        the playground topics go into the ledger. A partition named twice in one request is
        only judged when every one of its entries was acknowledged."""
        sent: dict[tuple[str, int], list[bytes | None]] = {}
        for topic, partition, blob in item.produce or ():
            sent.setdefault((topic, partition), []).append(blob)
        acked: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for topic_resp in response.responses:
            for part in topic_resp.partition_responses:
                acked.setdefault((topic_resp.name, part.index), []).append(
                    (int(part.error_code), part.base_offset))
        for key, blobs in sent.items():
            answers = acked.get(key, [])
            if len(answers) != len(blobs) or any(code != 0 for code, _o in answers):
                continue
            topic, partition = key
            for blob in blobs:
                checked = check_batches(blob, compacted=topic == "fuzz-compact")
                if checked.problem is not None:
                    known = "defect 11" if "keyless" in checked.problem else "defect 1"
                    kind = re.sub(r"-?\d+", "N", checked.problem)[:50]
                    finding("stored-invalid", f"acknowledged an invalid record set "
                            f"({kind})", f"{topic}-{partition} at offset "
                            f"{answers[0][1]}: {checked.problem}",
                            [(item.n, item.payload)], known=known)
                    break
                if (len(blobs) == 1 and topic in PLAYGROUND_TOPICS
                        and all(h.producer_id < 0 for h, _r in checked.batches)):
                    # (an idempotent batch may rightly be answered as a duplicate of an
                    # earlier one, with that one's offset)
                    self.add(topic, partition, answers[0][1], checked, item.n)

    def add(self, topic: str, partition: int, base: int, checked: Any, source: int) -> None:
        part = self.records.setdefault((topic, partition), {})
        offset = base
        for header, records in checked.batches:
            if [d for d, _k, _v in records] != list(range(len(records))):
                return  # deltas out of order: offsets are the client's guess, not checked
            for delta, _key, value in records:
                part[offset + delta] = value
                self.source[(topic, partition, offset + delta)] = source
            offset += header.record_count
        if len(part) > KEEP:
            for old in sorted(part)[: len(part) - KEEP]:
                del part[old]

    def verify(self, port: int) -> None:
        """Every acknowledged record of a valid record set that is still above its partition's
        log start is served with its value. Batches that do not decode (stored by a defect the
        other checks report) are stepped over, not counted here."""
        n = 0
        with Wire(port, client_id="fuzz-ledger") as wire:
            for (topic, partition), expected in sorted(self.records.items()):
                if not expected:
                    continue
                got = read_values(wire, topic, partition, min(expected), max(expected) + 1)
                start = list_offset(wire, topic, partition, -2)
                for offset, value in expected.items():
                    if offset < start:
                        continue  # removed by retention or DeleteRecords
                    assert offset in got, (
                        f"{topic}-{partition}: acknowledged offset {offset} is missing "
                        f"(log start {start})")
                    if got[offset] != value:
                        entry = fetch_raw(wire, topic, partition, offset, max_bytes=1 << 14)
                        heads = [tuple(h)[:13] for _p, h in iter_batches(entry["records"] or b"")]
                        raise AssertionError(
                            f"{topic}-{partition}: offset {offset} holds {got[offset]!r:.60}, "
                            f"acknowledged {value!r:.60}; batches there: {heads[:3]}; "
                            f"acknowledged by input "
                            f"{self.source.get((topic, partition, offset))}")
                    n += 1
        print(f"[fuzz] ledger: {n} acknowledged records read back", flush=True)
