"""A long-poll fetch parked at the log end is woken by an append that happens before its task
first runs (a produce on another connection in the same event-loop turn)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from moldau.broker.config import build_config
from moldau.broker.connection import KafkaConnection
from moldau.broker.metadata.controller import TopicSpec
from moldau.broker.server import Broker
from moldau.testing.runner import default_settings
from moldau.testing.wire import NullTransport, feed, fetch_frame, produce_frame


def test_produce_in_the_same_turn_wakes_the_parked_fetch(tmp_path: Path) -> None:
    async def main() -> float:
        settings = {k: str(v) for k, v in default_settings(tmp_path / "data").items()}
        broker = Broker(build_config(settings))
        await broker.start()
        try:
            await broker.controller.create_topics([TopicSpec("lp", 1)])
            topic_id = broker.image.topics_by_name["lp"].topic_id
            consumer = KafkaConnection(broker, "PLAINTEXT")
            producer = KafkaConnection(broker, "PLAINTEXT")
            ct, pt = NullTransport(), NullTransport()
            consumer.connection_made(ct)
            producer.connection_made(pt)
            t0 = time.monotonic()
            feed(consumer, fetch_frame(topic_id, 1, 0, max_wait_ms=30000))  # parks: no data
            feed(producer, produce_frame("lp", 1, 1, 100))  # same turn, before it awaits
            assert pt.writes == 1 and ct.writes == 0
            while ct.writes == 0 and time.monotonic() - t0 < 40:
                await asyncio.sleep(0.001)
            elapsed = time.monotonic() - t0
            assert ct.written > 100  # the record came back
            return elapsed
        finally:
            await broker.stop()

    # Woken by the append, not answered at the 30 s max wait (a generous bound: a busy
    # machine is not a lost wake-up).
    assert asyncio.run(main()) < 15
