"""The leader's side of replication against a fake node: a follower's Fetch reads up to the
log end offset, records the follower's progress, and the high watermark (what consumers see,
what acks=all waits for) becomes the smallest log end offset over the ISR."""

from __future__ import annotations

import asyncio
from pathlib import Path

from moldau.broker.metadata.channel import TopicSpec
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E

from .fakes import FakeNode, call, fake_node, start
from .test_produce_fetch import fetch, fetched, produce, produced


async def three_replicas(tmp_path: Path) -> FakeNode:
    node = await fake_node(tmp_path, brokers={1: ["PLAINTEXT"], 2: ["PLAINTEXT"],
                                              3: ["PLAINTEXT"]})
    [result] = await node.controller.create_topics([TopicSpec("r", assignments={0: [1, 2, 3]})])
    assert result.error == E.none
    return node


def test_acks_all_waits_for_every_isr_member_and_consumers_see_only_the_high_watermark(
        tmp_path: Path) -> None:
    async def main() -> None:
        node = await three_replicas(tmp_path)
        topic_id = node.image.topics_by_name["r"].topic_id
        epoch = node.image.topics_by_name["r"].partitions[0].leader_epoch
        parked = start(node, ApiKey.PRODUCE, 9,
                       produce("r", 0, [b"a", b"b"], node.time_ms(), acks=-1))
        assert parked.waits
        waiting = asyncio.ensure_future(parked.answer())
        # A consumer sees nothing yet: the high watermark waits for the followers.
        assert fetched(await call(node, ApiKey.FETCH, 16, fetch(topic_id, 0, 0))) == (
            E.none, 0, [])
        # A follower reads past it, up to the log end.
        answer = await call(node, ApiKey.FETCH, 16, fetch(topic_id, 0, 0, replica_id=2,
                                                          epoch=epoch))
        assert fetched(answer) == (E.none, 0, [b"a", b"b"])
        # Broker 2 has both records, broker 3 none: still nothing committed.
        await call(node, ApiKey.FETCH, 16, fetch(topic_id, 0, 2, replica_id=2, epoch=epoch))
        await call(node, ApiKey.FETCH, 16, fetch(topic_id, 0, 0, replica_id=3, epoch=epoch))
        await asyncio.sleep(0.01)
        assert not waiting.done()
        answer = await call(node, ApiKey.FETCH, 16, fetch(topic_id, 0, 2, replica_id=3,
                                                          epoch=epoch))
        assert fetched(answer) == (E.none, 2, [])  # the answer carries the new watermark
        assert produced(await asyncio.wait_for(waiting, 10)) == (E.none, 0)
        assert fetched(await call(node, ApiKey.FETCH, 16, fetch(topic_id, 0, 0))) == (
            E.none, 2, [b"a", b"b"])
        progress = node.replica_manager.get("r", 0).followers  # type: ignore[union-attr]
        assert {b: p.log_end_offset for b, p in progress.items()} == {2: 2, 3: 2}
        await node.close()

    asyncio.run(main())


def test_a_follower_long_poll_is_woken_by_an_append(tmp_path: Path) -> None:
    async def main() -> None:
        node = await three_replicas(tmp_path)
        topic_id = node.image.topics_by_name["r"].topic_id
        parked = start(node, ApiKey.FETCH, 16, fetch(topic_id, 0, 0, replica_id=2,
                                                     max_wait_ms=30_000))
        assert parked.waits
        waiting = asyncio.ensure_future(parked.answer())
        await asyncio.sleep(0.01)
        assert not waiting.done()
        await call(node, ApiKey.PRODUCE, 9, produce("r", 0, [b"x"], node.time_ms()))
        answer = await asyncio.wait_for(waiting, 10)
        assert fetched(answer) == (E.none, 0, [b"x"])
        await node.close()

    asyncio.run(main())


def test_a_stranger_still_gets_kafkas_refusal(tmp_path: Path) -> None:
    async def main() -> None:
        node = await three_replicas(tmp_path)
        topic_id = node.image.topics_by_name["r"].topic_id
        epoch = node.image.topics_by_name["r"].partitions[0].leader_epoch
        answer = await call(node, ApiKey.FETCH, 16, fetch(topic_id, 0, 0, replica_id=7,
                                                          epoch=epoch))
        assert fetched(answer)[0] == E.unknown_leader_epoch
        answer = await call(node, ApiKey.FETCH, 16, fetch(topic_id, 0, 0, replica_id=7))
        assert fetched(answer)[0] == E.not_leader_or_follower
        # A replica naming an epoch the leader does not have yet is told so.
        answer = await call(node, ApiKey.FETCH, 16, fetch(topic_id, 0, 0, replica_id=2,
                                                          epoch=epoch + 1))
        assert fetched(answer)[0] == E.unknown_leader_epoch
        await node.close()

    asyncio.run(main())


def test_a_fetch_past_the_log_end_is_out_of_range_and_advances_nothing(tmp_path: Path) -> None:
    async def main() -> None:
        node = await three_replicas(tmp_path)
        topic_id = node.image.topics_by_name["r"].topic_id
        await call(node, ApiKey.PRODUCE, 9, produce("r", 0, [b"a"], node.time_ms()))
        for replica in (2, 3):
            answer = await call(node, ApiKey.FETCH, 16, fetch(topic_id, 0, 5,
                                                              replica_id=replica))
            assert fetched(answer)[0] == E.offset_out_of_range
        partition = node.replica_manager.get("r", 0)
        assert partition is not None and partition.high_watermark == 0
        await node.close()

    asyncio.run(main())
