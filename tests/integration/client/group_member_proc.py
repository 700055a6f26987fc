"""A group member in its own process, for kill -9 tests.

Usage: python group_member_proc.py '<consumer config JSON>' TOPIC SLEEP_PER_BATCH

Subscribes, then polls forever; after each non-empty poll it commits synchronously. Prints
one line per event, flushed at once, for the test to read:
``A p,p,...`` (assigned), ``R partition offset`` (record), ``C partition offset`` (committed).
"""

from __future__ import annotations

import asyncio
import json
import sys

from moldau.client import Consumer


async def main() -> None:
    config, topic, pause = json.loads(sys.argv[1]), sys.argv[2], float(sys.argv[3])

    def assigned(partitions: set) -> None:
        print("A " + ",".join(str(tp.partition) for tp in sorted(partitions)), flush=True)

    async with Consumer(config) as consumer:
        consumer.subscribe([topic], on_assign=assigned)
        while True:
            records = await consumer.poll(0.2)
            for r in records:
                print(f"R {r.partition} {r.offset}", flush=True)
            if records:
                committed = await consumer.commit()
                for tp, value in sorted(committed.items()):
                    print(f"C {tp.partition} {value.offset}", flush=True)
                await asyncio.sleep(pause)


if __name__ == "__main__":
    asyncio.run(main())
