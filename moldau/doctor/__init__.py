"""``moldau doctor``: why clients can or cannot reach each broker, and how to fix it.

* :mod:`.model` — observations and findings as plain records (JSON-ready);
* :mod:`.probe` — gathers observations over the network (moldau client, no broker code);
* :mod:`.diagnose` — pure rules from observations to findings and fixes;
* :mod:`.cluster` — pure rules about the cluster as a whole (controller, offline partitions);
* :mod:`.zookeeper` — the brokers' registrations read from ZooKeeper (``--zookeeper``);
* :mod:`.render` — text and ``--json`` output.

Programmatic use::

    obs = await observe([("localhost", 9092)], timeout_s=5)
    report = diagnose(obs, timeout_s=5)
    print(render_text(report)); sys.exit(report.exit_code)
"""

from .cluster import cluster_findings
from .diagnose import diagnose, explain_failure, proxy_command
from .model import (
    BrokerCheck,
    BrokerListeners,
    BrokerStatus,
    ClusterView,
    Endpoint,
    Finding,
    Fix,
    ListenerEntry,
    Observations,
    Outcome,
    PartitionInfo,
    Probe,
    Registration,
    Report,
    Severity,
    ZkView,
)
from .probe import cluster_view, observe, probe_address
from .render import render_json, render_text

__all__ = [
    "BrokerCheck", "BrokerListeners", "BrokerStatus", "ClusterView", "Endpoint", "Finding",
    "Fix", "ListenerEntry", "Observations", "Outcome", "PartitionInfo", "Probe", "Registration",
    "Report", "Severity", "ZkView", "cluster_findings", "cluster_view", "diagnose",
    "explain_failure", "observe", "probe_address", "proxy_command", "render_json",
    "render_text",
]
