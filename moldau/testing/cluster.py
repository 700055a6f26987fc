"""Clusters of ``moldau serve`` processes for tests, against a real ZooKeeper, with faults.

:class:`BrokerCluster` is :class:`moldau.devtools.cluster.LocalCluster` (free ports, data
under one directory, registration awaited under ``/brokers/ids``, everything stopped by pid)
with the settings tests want and the faults failover tests need, all aimed at ONE broker by
id: :meth:`~BrokerCluster.kill9` (no shutdown; its ZooKeeper session lingers until
``zookeeper.session.timeout.ms``), :meth:`~BrokerCluster.sigstop` /
:meth:`~BrokerCluster.sigcont` (a paused process: a stalled controller or a long GC pause),
:meth:`~BrokerCluster.restart` (same id, ports and data).

Brokers are configured either by ``server.properties`` or, as seed 003's ``docker run -e``
lines do, by ``KAFKA_*`` environment variables only (:func:`seed003_specs`, ``style="env"``).
Tests usually share one ZooKeeper (the ``zookeeper`` fixture) and give each cluster a chroot
of its own (``zookeeper=zk.connect("/t-...")``), which the brokers create, as Kafka does.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..devtools.brokers import LOCAL_DEFAULTS, BrokerNode, BrokerSpec
from ..devtools.cluster import ClusterError, LocalCluster

__all__ = ["TEST_DEFAULTS", "BrokerCluster", "BrokerSpec", "ClusterError", "seed003_specs"]

#: Test settings on top of :data:`~moldau.devtools.brokers.LOCAL_DEFAULTS`: a short ZooKeeper
#: session so a killed broker's registration (and a killed controller) goes away in seconds,
#: no initial rebalance delay, and few ``__consumer_offsets`` partitions (spread over the
#: brokers all the same) so a cluster comes up fast on a busy machine.
TEST_DEFAULTS: dict[str, str] = {
    **LOCAL_DEFAULTS,
    "zookeeper.session.timeout.ms": "6000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "6",
    "controlled.shutdown.retry.backoff.ms": "500",
}


def seed003_specs(count: int = 3, *, settings: Mapping[str, str] | None = None,
                  ) -> list[BrokerSpec]:
    """Brokers 1..count as seed 003 runs them in Docker: a ``PLAINTEXT`` listener for the
    inside (other brokers) and ``CONNECTIONS_FROM_HOST`` for clients outside, both
    PLAINTEXT (``KAFKA_LISTENER_SECURITY_PROTOCOL_MAP``); here both on 127.0.0.1 with ports
    of their own. Start them with ``style="env"``."""
    return [
        BrokerSpec(broker_id=i,
                   listeners={"PLAINTEXT": "PLAINTEXT", "CONNECTIONS_FROM_HOST": "PLAINTEXT"},
                   inter_broker_listener="PLAINTEXT", settings=dict(settings or {}))
        for i in range(1, count + 1)
    ]


class BrokerCluster(LocalCluster):
    """A :class:`LocalCluster` with :data:`TEST_DEFAULTS` and per-broker faults."""

    def __init__(self, specs: Sequence[BrokerSpec] | int = 3, base_dir: Any = None, *,
                 zookeeper: str | None = None, chroot: str = "", style: str = "properties",
                 defaults: Mapping[str, str] = TEST_DEFAULTS) -> None:
        super().__init__(specs, base_dir, zookeeper=zookeeper, chroot=chroot, style=style,
                         defaults=defaults, isolate=True)

    @property
    def session_timeout_s(self) -> float:
        """``zookeeper.session.timeout.ms`` of broker 1's settings, in seconds."""
        node = self.brokers[min(self.brokers)]
        return int(node.settings().get("zookeeper.session.timeout.ms", "18000")) / 1000

    # -- faults, one broker at a time --------------------------------------------------------

    def kill9(self, broker_id: int) -> None:
        """kill -9 one broker (no controlled shutdown, no deregistration)."""
        self.brokers[broker_id].kill()

    def sigstop(self, broker_id: int) -> None:
        """Freeze one broker (SIGSTOP): its sockets stay open, it answers nothing."""
        import signal

        self.brokers[broker_id].signal(signal.SIGSTOP)

    def sigcont(self, broker_id: int) -> None:
        """Let a frozen broker go on (SIGCONT) exactly where it stopped."""
        import signal

        self.brokers[broker_id].signal(signal.SIGCONT)

    def stop_broker(self, broker_id: int, timeout: float = 60.0) -> int | None:
        """SIGTERM one broker (controlled shutdown) and wait; its exit status."""
        return self.brokers[broker_id].stop(timeout)

    def restart(self, broker_id: int, timeout: float = 120.0, *,
                wait_registered: bool = True) -> BrokerNode:
        """Start a stopped or killed broker again on its ports and data (it is stopped
        first if it still runs) and wait until it is registered.

        After a kill -9 the old registration stays until its session expires, and a broker
        whose id is registered by another session refuses to start (as Kafka's does): the
        restart waits for it to go first."""
        node = self.brokers[broker_id]
        if node.running():
            node.stop()
        self.wait_unregistered(broker_id, self.session_timeout_s + 30)
        node.start(timeout)
        if wait_registered:
            self.wait_registered([broker_id], timeout)
        return node

    # -- waits on what ZooKeeper says --------------------------------------------------------

    def wait_unregistered(self, broker_id: int, timeout: float = 60.0) -> float:
        """Wait until ``/brokers/ids/<id>`` is gone; the seconds it took."""
        return self._wait(lambda: broker_id not in self.registered_ids(), timeout,
                          f"broker {broker_id} still registered")

    def wait_controller(self, timeout: float = 60.0, *,
                        not_in: Iterable[int] = ()) -> int:
        """Wait for a controller in ``/controller`` that is not one of ``not_in``; its id."""
        excluded = set(not_in)
        found: list[int] = []

        def elected() -> bool:
            controller = self.controller_id()
            if controller is None or controller in excluded:
                return False
            found.append(controller)
            return True

        what = (f"no controller other than broker(s) {sorted(excluded)}" if excluded
                else "no controller")
        self._wait(elected, timeout, f"{what} in /controller of {self.zookeeper_connect}")
        return found[-1]

    def controller_epoch(self) -> int | None:
        """``/controller_epoch`` (None before the first election)."""
        data = self.read_json("/controller_epoch")
        return int(data) if data is not None else None

    def partition_state(self, topic: str, partition: int) -> dict[str, Any] | None:
        """``/brokers/topics/<topic>/partitions/<p>/state`` (leader, leader_epoch, isr,
        controller_epoch) or None."""
        return self.read_json(  # type: ignore[no-any-return]
            f"/brokers/topics/{topic}/partitions/{partition}/state")

    def leaders(self, topic: str) -> dict[int, int]:
        """Partition -> leader broker id, from ZooKeeper's partition states."""
        from kazoo.exceptions import NoNodeError

        try:
            partitions = self._retrying(
                lambda: self.kazoo().get_children(f"/brokers/topics/{topic}/partitions"))
        except NoNodeError:
            return {}
        result = {}
        for text in partitions:
            state = self.partition_state(topic, int(text))
            if state is not None:
                result[int(text)] = int(state["leader"])
        return result

    @staticmethod
    def _wait(condition: Any, timeout: float, what: str) -> float:
        start = time.monotonic()
        while not condition():
            if time.monotonic() - start > timeout:
                raise ClusterError(f"{what} after {timeout:.0f} s")
            time.sleep(0.05)
        return time.monotonic() - start
