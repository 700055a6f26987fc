"""The fault suite's nemesis: each fault kind of issue 13 as a small class with
``start``/``stop``, aimed at real processes (brokers of a
:class:`~moldau.testing.cluster.BrokerCluster`, nodes of a
:class:`~moldau.testing.zookeeper.ZooKeeperEnsemble`), each by its pid.

A fault picks its target when it starts (the leader of a random partition *now*, the
controller *now*), so the same seed can hit different brokers on different runs: the seed
fixes the sequence of fault kinds, partitions and durations, not the cluster's elections.

Kinds (``KINDS``; ``domain`` says which may share a round: at most one broker fault and one
ZooKeeper fault, or ``everything`` alone):

=========================  ==========  =====================================================
kill-leader                broker      kill -9 of a partition's leader; restarted at stop
kill-controller            broker      kill -9 of the active controller; restarted at stop
pause-leader               broker      SIGSTOP of a leader for longer than
                                       ``zookeeper.session.timeout.ms`` (a zombie that must
                                       be fenced), SIGCONT at stop
kill-zookeeper             zookeeper   kill -9 of one ZooKeeper node (the quorum stays)
zookeeper-quorum-loss      zookeeper   kill -9 of two of three nodes for at least 10 s
restart-all                everything  kill -9 of every broker and ZooKeeper node, then all
                                       started again
partition-leader           broker      a leader cut off from the other brokers (not from
                                       ZooKeeper, not from the clients) by nftables in its
                                       network namespace; needs ``--netns``
                                       (:mod:`.netlab`)
wipe-partition (lossy)     broker      kill -9 of a leader and removal of its directories of
                                       the topic's partitions, then a restart: loses data
                                       without replication; only for showing the checker
                                       catches loss (never in a default run)
unclean-failover (lossy)   everything  a leader's followers SIGSTOPped until its ISR is the
                                       leader alone, the leader killed at stop, then the
                                       followers resumed: with acks=1 and unclean election
                                       the records on the leader alone are lost (never in a
                                       default run)
=========================  ==========  =====================================================

``partition-leader`` runs only with ``--netns``: the runner re-executes itself in a private
network namespace (SAFETY RULE of /work/shared/FACTS.md) and starts every broker in a lab
namespace of its own (:mod:`.netlab`).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from random import Random
from typing import Any, ClassVar

from moldau.testing.cluster import BrokerCluster
from moldau.testing.zookeeper import ZooKeeperEnsemble, ZooKeeperNode

__all__ = ["ALL_KINDS", "KINDS", "LOSSY_KINDS", "NETNS_KINDS", "Fault", "NemesisEnv",
           "choose_round",
           "make_fault"]


@dataclass
class NemesisEnv:
    """What a fault acts on; ``log`` prints a line (the runner's progress output)."""

    cluster: BrokerCluster
    ensemble: ZooKeeperEnsemble
    topic: str
    rng: Random
    log: Callable[[str], None] = print
    #: brokers a fault of this round has taken out (a second fault leaves them alone)
    busy: set[int] = field(default_factory=set)
    #: the network lab (:class:`~.netlab.FaultLab`) when brokers run in namespaces
    lab: Any = None

    def running_brokers(self) -> list[int]:
        return sorted(i for i, node in self.cluster.brokers.items()
                      if node.running() and i not in self.busy)

    def random_leader(self) -> tuple[int | None, int]:
        """A random partition and its leader, among running brokers no fault holds."""
        leaders = self.cluster.leaders(self.topic)
        live = set(self.running_brokers())
        choices = sorted(p for p, leader in leaders.items() if leader in live)
        if not choices:
            return None, self.rng.choice(sorted(live))
        partition = self.rng.choice(choices)
        return partition, leaders[partition]


class Fault:
    """One fault: :meth:`start` injects it and returns what it did (for the history),
    :meth:`stop` undoes it. ``min_hold`` is how long it must stay on to mean anything."""

    name: ClassVar[str]
    domain: ClassVar[str]
    lossy: ClassVar[bool] = False
    #: only with the brokers in network namespaces (``--netns``)
    needs_lab: ClassVar[bool] = False

    def min_hold(self, env: NemesisEnv) -> float:
        return 0.0

    def start(self, env: NemesisEnv) -> dict[str, Any]:
        raise NotImplementedError

    def stop(self, env: NemesisEnv) -> None:
        raise NotImplementedError


class KillLeader(Fault):
    name = "kill-leader"
    domain = "broker"

    def start(self, env: NemesisEnv) -> dict[str, Any]:
        partition, self.broker = env.random_leader()
        env.busy.add(self.broker)
        env.cluster.kill9(self.broker)
        return {"broker": self.broker, "partition": partition}

    def stop(self, env: NemesisEnv) -> None:
        env.cluster.restart(self.broker)
        env.busy.discard(self.broker)


class KillController(Fault):
    name = "kill-controller"
    domain = "broker"

    def start(self, env: NemesisEnv) -> dict[str, Any]:
        controller = env.cluster.wait_controller(60)
        live = env.running_brokers()
        self.broker = controller if controller in live else env.rng.choice(live)
        env.busy.add(self.broker)
        env.cluster.kill9(self.broker)
        return {"broker": self.broker, "controller": controller}

    def stop(self, env: NemesisEnv) -> None:
        env.cluster.restart(self.broker)
        env.busy.discard(self.broker)


class PauseLeader(Fault):
    name = "pause-leader"
    domain = "broker"

    def min_hold(self, env: NemesisEnv) -> float:
        return env.cluster.session_timeout_s + 2.0

    def start(self, env: NemesisEnv) -> dict[str, Any]:
        partition, self.broker = env.random_leader()
        env.busy.add(self.broker)
        env.cluster.sigstop(self.broker)
        return {"broker": self.broker, "partition": partition}

    def stop(self, env: NemesisEnv) -> None:
        env.cluster.sigcont(self.broker)
        # fenced meanwhile (its session expired): it must register again by itself
        env.cluster.wait_registered([self.broker], env.cluster.session_timeout_s + 60)
        env.busy.discard(self.broker)


class WipePartition(Fault):
    """Lossy on purpose: what a disk replaced under a broker does without replication."""

    name = "wipe-partition"
    domain = "broker"
    lossy = True

    def start(self, env: NemesisEnv) -> dict[str, Any]:
        partition, self.broker = env.random_leader()
        env.busy.add(self.broker)
        env.cluster.kill9(self.broker)
        data: Path = env.cluster.broker(self.broker).data_dir
        wiped = sorted(path.name for path in data.glob(f"{env.topic}-*") if path.is_dir())
        for name in wiped:
            shutil.rmtree(data / name)
        return {"broker": self.broker, "partition": partition, "wiped": wiped}

    def stop(self, env: NemesisEnv) -> None:
        env.cluster.restart(self.broker)
        env.busy.discard(self.broker)


class UncleanFailover(Fault):
    """Lossy on purpose, with replication: seed 003's warning about unclean election.

    Both followers of a partition are stopped (SIGSTOP) until the leader's ISR is the leader
    alone (``replica.lag.time.max.ms``, or the followers' sessions expiring), so that acks=1
    records land on the leader alone while the fault is on; at stop the leader is killed
    (kill -9) and only then are the followers resumed: with
    ``unclean.leader.election.enable=true`` one of them is elected without those records.
    The leader is restarted once the partition has its new leader (it then truncates)."""

    name = "unclean-failover"
    domain = "everything"
    lossy = True

    def start(self, env: NemesisEnv) -> dict[str, Any]:
        partition, self.leader = env.random_leader()
        if partition is None:
            raise RuntimeError(f"no partition of {env.topic} has a live leader")
        self.partition = partition
        self.followers = [b for b in env.running_brokers() if b != self.leader]
        env.busy.update([self.leader, *self.followers])
        for broker in self.followers:
            env.cluster.sigstop(broker)
        # the ISR shrinks by lag (checked every half of replica.lag.time.max.ms) or when the
        # stopped brokers' sessions expire, whichever comes first
        timeout = env.cluster.session_timeout_s + 60
        deadline = time.monotonic() + timeout
        while True:
            state = env.cluster.partition_state(env.topic, partition) or {}
            if state.get("isr") == [self.leader] and state.get("leader") == self.leader:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"ISR of {env.topic}-{partition} still {state.get('isr')} "
                                   f"{timeout:.0f} s after its followers {self.followers} "
                                   f"were stopped (leader {self.leader})")
            time.sleep(0.1)
        return {"broker": self.leader, "partition": partition, "stopped": self.followers,
                "isr": [self.leader]}

    def stop(self, env: NemesisEnv) -> None:
        env.cluster.kill9(self.leader)
        for broker in self.followers:
            env.cluster.sigcont(broker)
        env.cluster.wait_registered(self.followers, env.cluster.session_timeout_s + 60)
        deadline = time.monotonic() + 120
        while True:  # the unclean election, before the old leader can come back
            state = env.cluster.partition_state(env.topic, self.partition) or {}
            if state.get("leader") in self.followers:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{env.topic}-{self.partition} not led by one of "
                                   f"{self.followers} 120 s after its leader {self.leader} "
                                   f"was killed: {state}")
            time.sleep(0.1)
        env.cluster.restart(self.leader)
        env.busy.difference_update([self.leader, *self.followers])


class PartitionLeader(Fault):
    """The leader cut off from the other brokers, not from ZooKeeper or the clients."""

    name = "partition-leader"
    domain = "broker"
    needs_lab = True

    def start(self, env: NemesisEnv) -> dict[str, Any]:
        if env.lab is None:
            raise RuntimeError("partition-leader needs the brokers in network namespaces: "
                               "run with --netns")
        partition, self.broker = env.random_leader()
        env.busy.add(self.broker)
        cut_from = env.lab.isolate(self.broker)
        return {"broker": self.broker, "partition": partition, "cut_from": cut_from}

    def stop(self, env: NemesisEnv) -> None:
        env.lab.heal(self.broker)
        env.busy.discard(self.broker)


class KillZooKeeperNode(Fault):
    name = "kill-zookeeper"
    domain = "zookeeper"

    def start(self, env: NemesisEnv) -> dict[str, Any]:
        self.node = env.rng.choice([n for n in env.ensemble.nodes if n.running()])
        env.ensemble.kill_node(self.node)
        return {"zookeeper": self.node.server_id}

    def stop(self, env: NemesisEnv) -> None:
        env.ensemble.start_node(self.node, 120)


class ZooKeeperQuorumLoss(Fault):
    name = "zookeeper-quorum-loss"
    domain = "zookeeper"

    def min_hold(self, env: NemesisEnv) -> float:
        return 10.0

    def start(self, env: NemesisEnv) -> dict[str, Any]:
        running = [n for n in env.ensemble.nodes if n.running()]
        majority = len(env.ensemble.nodes) // 2 + 1
        down = len(env.ensemble.nodes) - len(running)
        self.nodes: list[ZooKeeperNode] = env.rng.sample(running, max(0, majority - down))
        for node in self.nodes:
            env.ensemble.kill_node(node)
        return {"zookeeper": sorted(n.server_id for n in self.nodes)}

    def stop(self, env: NemesisEnv) -> None:
        for node in self.nodes:
            env.ensemble.start_node(node, wait=False)
        env.ensemble.wait_serving(120, self.nodes)


class RestartAll(Fault):
    name = "restart-all"
    domain = "everything"

    def start(self, env: NemesisEnv) -> dict[str, Any]:
        self.brokers = env.running_brokers()
        for broker in self.brokers:
            env.cluster.kill9(broker)
        self.nodes = [n for n in env.ensemble.nodes if n.running()]
        for node in self.nodes:
            env.ensemble.kill_node(node)
        return {"brokers": self.brokers, "zookeeper": [n.server_id for n in self.nodes]}

    def stop(self, env: NemesisEnv) -> None:
        for node in self.nodes:
            env.ensemble.start_node(node, wait=False)
        env.ensemble.wait_serving(120, self.nodes)
        # the old sessions come back with ZooKeeper's data and expire one timeout later;
        # restart() waits for that before it starts a broker under the same id
        for broker in self.brokers:
            env.cluster.restart(broker, wait_registered=False)
        env.cluster.wait_registered(self.brokers, 120)


_CLASSES: tuple[type[Fault], ...] = (KillLeader, KillController, PauseLeader,
                                     KillZooKeeperNode, ZooKeeperQuorumLoss, RestartAll,
                                     PartitionLeader, WipePartition, UncleanFailover)
#: Every fault kind by name.
ALL_KINDS: dict[str, type[Fault]] = {cls.name: cls for cls in _CLASSES}
#: The kinds a replicated cluster must survive without losing an acknowledged record, on
#: loopback (:data:`NETNS_KINDS` need ``--netns``).
KINDS = tuple(name for name, cls in ALL_KINDS.items() if not cls.lossy and not cls.needs_lab)
#: Kinds that need the brokers in network namespaces of their own.
NETNS_KINDS = tuple(name for name, cls in ALL_KINDS.items() if cls.needs_lab)
#: Kinds that lose data by design (the checker's own proof that it can fail).
LOSSY_KINDS = tuple(name for name, cls in ALL_KINDS.items() if cls.lossy)


def make_fault(name: str) -> Fault:
    try:
        return ALL_KINDS[name]()
    except KeyError:
        raise ValueError(f"unknown fault kind {name!r}; known: {', '.join(ALL_KINDS)}") from None


def choose_round(rng: Random, kinds: Sequence[str], *, combine: float = 0.3) -> list[Fault]:
    """One round's faults: one kind, or (with probability ``combine``) a broker fault and a
    ZooKeeper fault together, the broker fault first (so it stops last, once ZooKeeper is
    back and the broker can register). ``restart-all`` is always alone."""
    first = rng.choice(list(kinds))
    chosen = [first]
    domain = ALL_KINDS[first].domain
    if domain != "everything" and rng.random() < combine:
        other = "zookeeper" if domain == "broker" else "broker"
        partners = [k for k in kinds if ALL_KINDS[k].domain == other]
        if partners:
            chosen.append(rng.choice(partners))
    chosen.sort(key=lambda k: ALL_KINDS[k].domain != "broker")
    return [make_fault(k) for k in chosen]


def hold_time(rng: Random, faults: Sequence[Fault], env: NemesisEnv, duration: float) -> float:
    """How long a round stays on: up to ``duration``, never under a fault's ``min_hold``."""
    floor = max((f.min_hold(env) for f in faults), default=0.0)
    return max(floor, rng.uniform(duration / 2, duration))


def sleep(seconds: float) -> None:
    time.sleep(max(0.0, seconds))
