"""A SIGSTOPped controller process that resumes after being replaced changes nothing: while
it is stopped its session expires and another broker is elected; when it resumes, its writes
(producer id blocks, claimed in a loop) are refused, and every block ever handed out is
disjoint from every other — no block of the old controller lands after the new one's. The one
claim that may be in flight at the stop (committed before the session expired, printed after
the resume) must lie below the new controller's blocks."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from moldau.broker.zk import layout
from moldau.broker.zk.admin_layout import ProducerIdBlock
from moldau.broker.zk.aio import AsyncZooKeeper
from moldau.testing.processes import child_env, kill

from .cluster_support import Node, active, start_node, wait_for

SCRIPT = Path(__file__).with_name("plane_process.py")


def test_a_sigstopped_controller_resumes_and_writes_nothing(zookeeper_connect: str) -> None:
    proc = subprocess.Popen([sys.executable, str(SCRIPT), zookeeper_connect, "1", "3000"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=child_env())
    lines: list[tuple[float, str]] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:  # whole lines only
            lines.append((time.monotonic(), line.strip()))

    reader_thread = threading.Thread(target=read, daemon=True)
    reader_thread.start()

    async def scenario() -> None:
        node: Node | None = None
        zk = AsyncZooKeeper(zookeeper_connect)
        await zk.start(30)
        try:
            await wait_for(lambda: any(t.startswith("ACTIVE") for _, t in lines),
                           "the process elected", 60)
            await wait_for(lambda: sum(t.startswith("OK") for _, t in lines) >= 3,
                           "blocks claimed by the first controller")
            node = await start_node(zookeeper_connect, 2)
            os.kill(proc.pid, signal.SIGSTOP)
            new = await active([node], timeout=60)  # after its session (3 s) expired
            epoch = new.plane.store.fence[0] if new.plane.store.fence else -1
            assert epoch == 2
            taken = [await new.plane.controller.allocate_producer_ids(2) for _ in range(2)]
            # What the reader has by now was written before the stop (a stopped process
            # writes nothing; the reader had seconds to drain the pipe): a line's read time
            # says nothing about when it was written, on a loaded machine.
            before_resume = len(lines)
            os.kill(proc.pid, signal.SIGCONT)
            await asyncio.sleep(3.0)  # the resumed process keeps trying
            taken.append(await new.plane.controller.allocate_producer_ids(2))
            after = [t for _, t in lines[before_resume:]]
            # One allocation may have been in flight at the stop: ZooKeeper committed it
            # before the session expired and the process prints it once it runs again. It
            # must lie below every block of the new controller (written before it took over);
            # everything after it is refused.
            if after and after[0].startswith("OK"):
                assert int(after[0].split()[2]) < min(taken[0]), (after[0], taken)
                after = after[1:]
            assert after and all(t == "ERR not_controller" for t in after), after
            data, _ = await zk.get(layout.LATEST_PRODUCER_ID_BLOCK)
            assert ProducerIdBlock.from_json(data).broker_id == 2
            # every block handed out, by either controller, is disjoint from the others
            blocks = [range(int(t.split()[1]), int(t.split()[2]) + 1)
                      for _, t in lines if t.startswith("OK")] + taken
            ids = [i for b in blocks for i in b]
            assert len(ids) == len(set(ids))
            assert max(taken[-1]) == max(ids)
        finally:
            if node is not None:
                await node.close()
            await zk.stop()

    try:
        asyncio.run(scenario())
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
        kill(proc)
        reader_thread.join(10)
