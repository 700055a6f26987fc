"""WriteTxnMarkers (27) against a fake node: markers end transactions on the partitions this
node leads, with Kafka's per-partition errors, and read_committed Fetch / ListOffsets see the
last stable offset and the aborted transactions."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from moldau.broker.metadata.channel import TopicSpec
from moldau.broker.txn.markers import TxnMarker
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E
from moldau.protocol.records.codec import build_batch, iter_decoded

from .fakes import FakeNode, call, fake_node
from .test_produce_fetch import fetch, list_offsets


async def node_with_topics(tmp_path: Path) -> FakeNode:
    node = await fake_node(tmp_path, brokers={1: ["PLAINTEXT"], 2: ["PLAINTEXT"]})
    results = await node.controller.create_topics([
        TopicSpec("t", assignments={0: [1], 1: [1]}),
        TopicSpec("elsewhere", assignments={0: [2]}),
    ])
    assert [r.error for r in results] == [E.none, E.none]
    return node


def append(node: FakeNode, partition: int, values: list[bytes], *, pid: int = -1,
           epoch: int = -1, seq: int = -1, txn: bool = False) -> int:
    batch = build_batch([(None, v, [], node.time_ms()) for v in values], producer_id=pid,
                        producer_epoch=epoch, base_sequence=seq, transactional=txn)
    outcome = node.replica_manager.append_records("t", partition, batch, acks=-1,
                                                  transactional_id="tx" if txn else None)
    assert outcome.error == E.none, outcome.message
    return outcome.base_offset


def markers(pid: int, epoch: int, commit: bool, coordinator_epoch: int,
            topics: dict[str, list[int]]) -> dict[str, Any]:
    return {"markers": [{"producer_id": pid, "producer_epoch": epoch,
                         "transaction_result": commit, "coordinator_epoch": coordinator_epoch,
                         "topics": [{"name": n, "partition_indexes": ps}
                                    for n, ps in topics.items()]}]}


def errors(answer: dict[str, Any]) -> dict[tuple[str, int], int]:
    [marker] = answer["markers"]
    return {(t["name"], p["partition_index"]): p["error_code"]
            for t in marker["topics"] for p in t["partitions"]}


def committed_fetch(node: FakeNode, partition: int, offset: int) -> dict[str, Any]:
    body = fetch(node.image.topics_by_name["t"].topic_id, partition, offset)
    body["isolation_level"] = 1
    return body


def test_abort_marker_errors_lso_and_aborted_list(tmp_path: Path) -> None:
    async def main() -> None:
        node = await node_with_topics(tmp_path)
        partition = node.replica_manager.get("t", 0)
        assert partition is not None
        append(node, 0, [b"a", b"b"], pid=1000, epoch=0, seq=0, txn=True)  # offsets 0-1
        append(node, 0, [b"plain"])  # offset 2
        assert (partition.high_watermark, partition.last_stable_offset) == (3, 0)
        answer = await call(node, ApiKey.LIST_OFFSETS, 7, {**list_offsets("t", 0, -1),
                                                           "isolation_level": 1})
        assert answer["topics"][0]["partitions"][0]["offset"] == 0
        read = await call(node, ApiKey.FETCH, 16, committed_fetch(node, 0, 0))
        assert read["responses"][0]["partitions"][0]["records"] in (b"", None)

        answer = await call(node, ApiKey.WRITE_TXN_MARKERS, 1, markers(
            1000, 0, False, 5, {"t": [0, 9], "elsewhere": [0], "nope": [0]}))
        assert errors(answer) == {("t", 0): E.none, ("t", 9): E.unknown_topic_or_partition,
                                  ("elsewhere", 0): E.not_leader_or_follower,
                                  ("nope", 0): E.unknown_topic_or_partition}
        assert (partition.high_watermark, partition.last_stable_offset) == (4, 4)
        read = await call(node, ApiKey.FETCH, 16, committed_fetch(node, 0, 0))
        [data] = read["responses"][0]["partitions"]
        assert data["last_stable_offset"] == 4
        assert [(a["producer_id"], a["first_offset"]) for a in data["aborted_transactions"]] \
            == [(1000, 0)]
        batches = list(iter_decoded(data["records"]))
        assert [b.header.is_control for b in batches] == [False, False, True]
        # From the marker on the transaction still overlaps (Kafka's rule: last offset >=
        # fetch offset); past it there is nothing to drop.
        read = await call(node, ApiKey.FETCH, 16, committed_fetch(node, 0, 3))
        assert len(read["responses"][0]["partitions"][0]["aborted_transactions"]) == 1
        append(node, 0, [b"after"])
        read = await call(node, ApiKey.FETCH, 16, committed_fetch(node, 0, 4))
        assert read["responses"][0]["partitions"][0]["aborted_transactions"] == []
        # read_uncommitted gets no aborted list at all.
        read = await call(node, ApiKey.FETCH, 16, fetch(node.image.topics_by_name["t"].topic_id,
                                                        0, 0))
        assert read["responses"][0]["partitions"][0]["aborted_transactions"] is None

        # A zombie coordinator (older coordinator epoch) is fenced; an older producer epoch
        # is refused; both leave the log alone.
        append(node, 0, [b"c"], pid=1000, epoch=1, seq=0, txn=True)
        end = partition.log_end_offset
        answer = await call(node, ApiKey.WRITE_TXN_MARKERS, 2,
                            {**markers(1000, 1, True, 4, {"t": [0]})})
        assert errors(answer) == {("t", 0): E.transaction_coordinator_fenced}
        answer = await call(node, ApiKey.WRITE_TXN_MARKERS, 1, markers(1000, 0, True, 5,
                                                                       {"t": [0]}))
        assert errors(answer) == {("t", 0): E.invalid_producer_epoch}
        assert partition.log_end_offset == end
        answer = await call(node, ApiKey.WRITE_TXN_MARKERS, 1, markers(1000, 1, True, 6,
                                                                       {"t": [0]}))
        assert errors(answer) == {("t", 0): E.none}
        assert partition.last_stable_offset == partition.high_watermark == end + 1
        assert partition.log.collect_aborted(0, end + 1) == [(1000, 0)]  # commits: no entry
        await node.close()

    asyncio.run(main())


def test_marker_writer_many_producers_and_min_isr(tmp_path: Path) -> None:
    async def main() -> None:
        node = await node_with_topics(tmp_path)
        append(node, 0, [b"x"], pid=7, epoch=0, seq=0, txn=True)
        append(node, 1, [b"y"], pid=8, epoch=0, seq=0, txn=True)
        writer = node.marker_writer
        results = await writer.write([TxnMarker(7, 0, True, 0, (("t", 0),)),
                                      TxnMarker(8, 0, False, 0, (("t", 1), ("t", 0)))])
        assert results == {(7, ("t", 0)): E.none, (8, ("t", 1)): E.none, (8, ("t", 0)): E.none}
        assert node.replica_manager.get("t", 1).log.collect_aborted(0, 10) == [(8, 1 - 1)]
        # ISR below min.insync.replicas: NOT_ENOUGH_REPLICAS, nothing written.
        partition = node.replica_manager.get("t", 0)
        end = partition.log_end_offset
        partition.set_topic_config({**partition.topic_config, "min.insync.replicas": 2})
        results = await writer.write([TxnMarker(7, 0, True, 0, (("t", 0),))])
        assert results == {(7, ("t", 0)): E.not_enough_replicas}
        assert partition.log_end_offset == end
        await node.close()

    asyncio.run(main())


def test_aborted_list_covers_only_the_batches_returned(tmp_path: Path) -> None:
    async def main() -> None:
        node = await node_with_topics(tmp_path)
        append(node, 1, [b"plain"])  # 0
        append(node, 1, [b"x"], pid=5, epoch=0, seq=0, txn=True)  # 1
        results = await node.marker_writer.write([TxnMarker(5, 0, False, 0, (("t", 1),))])
        assert results == {(5, ("t", 1)): E.none}
        partition = node.replica_manager.get("t", 1)
        # One batch fits: the aborted transaction starts after it.
        read = partition.read(0, 1, committed=True, min_one=True)
        assert len(list(iter_decoded(bytes(read.records)))) == 1 and read.aborted == []
        read = partition.read(0, 1 << 20, committed=True, min_one=True)
        assert read.aborted == [(5, 1)]
        assert partition.read(0, 1 << 20, committed=False, min_one=True).aborted is None
        await node.close()

    asyncio.run(main())


def test_marker_above_the_high_watermark_holds_the_lso(tmp_path: Path) -> None:
    """With a follower in the ISR the marker commits only when the follower has it: until
    then the transaction still bounds the LSO (a failover could lose the marker) and the
    ISR wait of append_markers runs out (REQUEST_TIMED_OUT, the channel retries)."""
    async def main() -> None:
        node = await fake_node(tmp_path, brokers={1: ["PLAINTEXT"], 2: ["PLAINTEXT"]})
        [created] = await node.controller.create_topics([TopicSpec("r", assignments={0: [1, 2]})])
        assert created.error == E.none
        partition = node.replica_manager.get("r", 0)
        assert partition is not None and partition.isr == [1, 2]
        batch = build_batch([(None, b"x", [], node.time_ms())], producer_id=3,
                            producer_epoch=0, base_sequence=0, transactional=True)
        outcome = node.replica_manager.append_records("r", 0, batch, acks=1,
                                                      transactional_id="tx")
        assert outcome.error == E.none
        partition.record_follower_fetch(2, 1, 0)  # the follower has the data: HW 1
        assert (partition.high_watermark, partition.last_stable_offset) == (1, 0)
        results = await node.marker_writer.replicas.append_markers(
            [TxnMarker(3, 0, True, 0, (("r", 0),))], timeout_ms=50)
        assert results == {(3, ("r", 0)): E.request_timed_out}
        assert partition.log_end_offset == 2
        assert (partition.high_watermark, partition.last_stable_offset) == (1, 0)
        partition.record_follower_fetch(2, 2, 0)  # now it has the marker too
        assert (partition.high_watermark, partition.last_stable_offset) == (2, 2)
        await node.close()

    asyncio.run(main())
