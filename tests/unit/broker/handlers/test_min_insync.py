"""min.insync.replicas with acks=all on a leader whose ISR the controller changes: refused
before the append (NOT_ENOUGH_REPLICAS) when the ISR is already too small; answered
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below it while the produce waited (the
records are written: the high watermark moved past them once the ISR was the leader alone)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from moldau.broker.metadata.channel import TopicSpec
from moldau.broker.metadata.isr_change import IsrChange
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E

from .fakes import call, fake_node, start
from .test_produce_fetch import produce


def produced(answer: dict[str, Any]) -> tuple[int, int]:
    [topic] = answer["responses"]
    [p] = topic["partition_responses"]
    return p["error_code"], p["base_offset"]


def test_the_isr_shrinks_below_min_while_an_acks_all_produce_waits(tmp_path: Path) -> None:
    async def main() -> None:
        node = await fake_node(tmp_path, brokers={1: ["PLAINTEXT"], 2: ["PLAINTEXT"]},
                               groups=False)
        try:
            [result] = await node.controller.create_topics([TopicSpec(
                "t", assignments={0: [1, 2]}, configs={"min.insync.replicas": "2"})])
            assert result.error == E.none
            topic_id = node.image.topics_by_name["t"].topic_id
            parked = start(node, ApiKey.PRODUCE, 9,
                           produce("t", 0, [b"a"], node.time_ms(), acks=-1))
            assert parked.waits  # the follower has not fetched: the HW stays at 0
            waiting = asyncio.ensure_future(parked.answer())
            await asyncio.sleep(0.05)
            assert not waiting.done()
            # The leader drops the follower from the ISR (AlterPartition to the controller).
            [changed] = await node.controller.alter_partition(
                1, [IsrChange(topic_id, 0, 0, 0, (1,))])
            assert changed.error == E.none
            answer = await asyncio.wait_for(waiting, 10)  # woken, not timed out
            assert produced(answer)[0] == E.not_enough_replicas_after_append
            assert node.replica_manager.partitions[("t", 0)].high_watermark == 1
            # Now the ISR is too small before the append: refused, nothing written.
            answer = await call(node, ApiKey.PRODUCE, 9,
                                produce("t", 0, [b"b"], node.time_ms(), acks=-1))
            assert produced(answer)[0] == E.not_enough_replicas
            assert node.replica_manager.partitions[("t", 0)].log.log_end_offset == 1
            # acks=1 does not care about min.insync.replicas.
            answer = await call(node, ApiKey.PRODUCE, 9,
                                produce("t", 0, [b"c"], node.time_ms(), acks=1))
            assert produced(answer) == (E.none, 1)
        finally:
            await node.close()

    asyncio.run(main())
