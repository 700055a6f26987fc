"""A registry election member in its own process, for kill -9 tests.

Usage: python election_proc.py BOOTSTRAP GROUP HOST PORT ELIGIBLE(0|1) SESSION_MS

Joins the election and prints one JSON line per change of its view, flushed at once:
``{"member": ..., "generation": ..., "primary": bool, "url": str|null}``. SIGTERM stops it
cleanly (it leaves the group).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys

from moldau.registry.election import Identity, PrimaryElection


async def main() -> None:
    bootstrap, group, host, port, eligible, session_ms = sys.argv[1:7]
    election = PrimaryElection(
        {"bootstrap.servers": bootstrap, "retry.backoff.max.ms": 300},
        Identity(host, int(port), eligible=eligible == "1"), group_id=group,
        session_timeout_ms=int(session_ms), heartbeat_interval_ms=int(session_ms) // 8)

    def report(e: PrimaryElection) -> None:
        print(json.dumps({"member": e.member.member_id, "generation": e.generation,
                          "primary": e.is_primary, "url": e.primary_url}), flush=True)

    election.add_listener(report)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await election.start()
    report(election)
    await stop.wait()
    await election.stop()


if __name__ == "__main__":
    asyncio.run(main())
