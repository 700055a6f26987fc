"""Real Apache ZooKeeper for tests: the runner lives in :mod:`moldau.devtools.zookeeper`
(``moldau dev-cluster`` runs it too); this name is kept for the tests that import it. Also
:func:`expire_session`, the standard way to make a client's session expire."""

from __future__ import annotations

from ..devtools.zookeeper import (
    INSTALL_HINT,
    ZKCLI,
    ZOOKEEPER_JAR,
    ZooKeeperEnsemble,
    ZooKeeperNode,
    ZooKeeperUnavailable,
    four_letter_word,
    installed,
    running_zookeeper,
    server_mode,
    zkcli,
)

__all__ = [
    "INSTALL_HINT", "ZKCLI", "ZOOKEEPER_JAR", "ZooKeeperEnsemble", "ZooKeeperNode",
    "ZooKeeperUnavailable", "expire_session", "four_letter_word", "installed",
    "running_zookeeper", "server_mode", "zkcli",
]


def expire_session(hosts: str, client_id: tuple[int, bytes]) -> None:
    """Expire the ZooKeeper session ``client_id`` (kazoo's ``(session id, password)``) the
    standard way: a second client joins the session and closes it, and the server ends it
    for the first client too (ephemeral znodes go, watches fire a session event). Blocking:
    from a coroutine whose own client runs on the same loop, call it in a thread."""
    from kazoo.client import KazooClient

    thief = KazooClient(hosts=hosts, client_id=client_id)
    thief.start(30)
    thief.stop()
    thief.close()
