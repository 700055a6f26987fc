"""Real Apache ZooKeeper for tests: the runner lives in :mod:`moldau.devtools.zookeeper`
(``moldau dev-cluster`` runs it too); this name is kept for the tests that import it."""

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
    "ZooKeeperUnavailable", "four_letter_word", "installed", "running_zookeeper",
    "server_mode", "zkcli",
]
