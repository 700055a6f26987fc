"""A schema registry instance that takes part in the primary election, in its own process
(for kill -9 tests).

Usage: python registry_proc.py BOOTSTRAP TOPIC GROUP SESSION_MS

Serves on 127.0.0.1:<free port>; prints ``{"url": ...}`` once started, then one JSON line
per change of its election view (``{"primary": bool, "primary_url": ...}``). SIGTERM stops it
cleanly.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys

from moldau.registry.app import SchemaRegistry
from moldau.registry.config import build_config
from moldau.registry.elected import ElectedPrimary, elected_primary_factory


async def main() -> None:
    bootstrap, topic, group, session_ms = sys.argv[1:5]
    config = build_config({
        "kafkastore.bootstrap.servers": bootstrap, "listeners": "http://127.0.0.1:0",
        "kafkastore.topic": topic, "schema.registry.group.id": group,
        "kafkastore.timeout.ms": "10000", "kafkastore.init.timeout.ms": "30000",
        "kafkastore.topic.replication.factor": "1"})
    registry = SchemaRegistry(config, primary_factory=elected_primary_factory({
        "kafkagroup.session.timeout.ms": int(session_ms),
        "kafkagroup.heartbeat.interval.ms": int(session_ms) // 8}))
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await registry.start()
    primary = registry.primary.current
    assert isinstance(primary, ElectedPrimary)
    print(json.dumps({"url": registry.urls()[0]}), flush=True)

    def report(election: object) -> None:
        print(json.dumps({"primary": primary.is_primary,
                          "primary_url": primary.election.primary_url}), flush=True)

    primary.election.add_listener(report)
    report(primary.election)
    await stop.wait()
    await registry.stop()


if __name__ == "__main__":
    asyncio.run(main())
