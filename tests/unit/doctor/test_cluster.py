"""The cluster view of ``moldau doctor`` and ``moldau metadata`` from hand-written data:
registration decoding, findings (controller, offline partitions, hidden brokers), rendering."""

from __future__ import annotations

import dataclasses
import json

from moldau.broker.zk.layout import BrokerRegistration
from moldau.broker.zk.layout import Endpoint as ZkEndpoint
from moldau.cli.metadata import format_json, format_listing, offline_partitions
from moldau.client import AddressMap
from moldau.doctor import (
    BrokerCheck,
    ClusterView,
    Endpoint,
    ListenerEntry,
    Observations,
    Outcome,
    PartitionInfo,
    Probe,
    Registration,
    Severity,
    ZkView,
    cluster_findings,
    diagnose,
    render_json,
    render_text,
)
from moldau.doctor.zookeeper import decode_registration

B1, B2, B3 = (Endpoint(i, "127.0.0.1", 9090 + i) for i in (1, 2, 3))
LEADER_NOT_AVAILABLE, LISTENER_NOT_FOUND = 5, 72


def view(*partitions: PartitionInfo, brokers: tuple[Endpoint, ...] = (B1, B2, B3),
         controller: int = 1) -> ClusterView:
    return ClusterView("127.0.0.1:9091", "c1", controller, brokers, partitions)


def healthy() -> ClusterView:
    return view(*(PartitionInfo("t", p, p % 3 + 1, (p % 3 + 1,), (p % 3 + 1,))
                  for p in range(6)))


def broker_2_gone() -> ClusterView:
    """Replication factor 1 and broker 2 killed: its partitions 1 and 4 have no leader."""
    parts = [PartitionInfo("t", p, p % 3 + 1, (p % 3 + 1,), (p % 3 + 1,)) for p in range(6)]
    for p in (1, 4):
        parts[p] = PartitionInfo("t", p, -1, (2,), (2,), (2,), LEADER_NOT_AVAILABLE)
    return view(*parts, brokers=(B1, B3))


# -- /brokers/ids/<id> ----------------------------------------------------------------------


def test_the_registration_the_broker_writes_decodes_with_every_listener() -> None:
    written = BrokerRegistration(3, (
        ZkEndpoint("PLAINTEXT", "kafka3", 9092, "PLAINTEXT"),
        ZkEndpoint("EXTERNAL", "203.0.113.7", 19093, "SASL_SSL"),
        ZkEndpoint("V6", "::1", 9094, "PLAINTEXT")), rack="r2").to_json()
    reg = decode_registration(written, 3)
    assert reg == Registration(3, (ListenerEntry("PLAINTEXT", "kafka3", 9092),
                                   ListenerEntry("EXTERNAL", "203.0.113.7", 19093),
                                   ListenerEntry("V6", "::1", 9094)), "r2")
    assert [str(e) for e in reg.endpoints][-1] == "V6://[::1]:9094"


def test_old_and_broken_registrations_are_shown_not_refused() -> None:
    v1 = decode_registration(b'{"version":1,"host":"old","port":9092,"jmx_port":-1}', 0)
    assert v1.endpoints == (ListenerEntry("PLAINTEXT", "old", 9092),) and not v1.problem
    assert "not JSON" in decode_registration(b"{", 1).problem
    assert decode_registration(b"[]", 1).problem.startswith("not a JSON object")
    half = decode_registration(b'{"endpoints":["PLAINTEXT://a:1","nonsense"]}', 2)
    assert half.endpoints == (ListenerEntry("PLAINTEXT", "a", 1),)
    assert half.problem == "unreadable endpoint(s) 'nonsense'"


# -- findings ---------------------------------------------------------------------------------


def codes(findings: list) -> list[str]:  # type: ignore[type-arg]
    return [f.code for f in findings]


def test_a_healthy_cluster_has_no_findings() -> None:
    assert cluster_findings(healthy()) == []
    zk = ZkView("zk:2181", "c1", 1, tuple(Registration(i) for i in (1, 2, 3)))
    assert cluster_findings(healthy(), zk) == []
    assert cluster_findings(None) == []


def test_offline_partitions_name_the_broker_to_start() -> None:
    [finding] = cluster_findings(broker_2_gone())
    assert (finding.severity, finding.code) == (Severity.ERROR, "offline-partitions")
    assert finding.message.startswith("2 partition(s) have no leader (offline): t/1, t/4; "
                                      "their replicas are on broker(s) 2, not running")
    assert "LEADER_NOT_AVAILABLE" in finding.message
    assert [f.action for f in finding.fixes] == ["start broker 2"]
    assert "t/1, t/4" in finding.fixes[0].note


def test_leaderless_partitions_whose_replicas_live_point_at_the_controller() -> None:
    stuck = view(PartitionInfo("t", 0, -1, (1, 3), (), (), LEADER_NOT_AVAILABLE),
                 PartitionInfo("t", 1, -1, (2,), (2,), (2,), LEADER_NOT_AVAILABLE),
                 brokers=(B1, B3))
    [finding] = cluster_findings(stuck)
    assert [f.action for f in finding.fixes] == ["start broker 2", "check the controller's log"]
    assert finding.fixes[1].note.startswith("t/0 have live replicas but no leader")


def test_a_leader_on_another_listener_is_not_offline() -> None:
    other = view(PartitionInfo("t", 0, -1, (2,), (2,), (), LISTENER_NOT_FOUND), brokers=(B1,))
    assert other.offline_partitions == ()
    assert cluster_findings(other) == []


def test_lost_replicas_of_a_partition_that_still_leads_are_a_warning() -> None:
    degraded = view(PartitionInfo("t", 0, 1, (1, 2), (1,), (2,)), brokers=(B1, B3))
    [finding] = cluster_findings(degraded)
    assert (finding.severity, finding.code) == (Severity.WARNING, "under-replicated-partitions")
    assert [f.action for f in finding.fixes] == ["start broker 2"]


def rf3(isrs: dict[int, tuple[int, ...]], min_isr: int = 1,
        brokers: tuple[Endpoint, ...] = (B1, B2, B3)) -> ClusterView:
    parts = tuple(PartitionInfo("t", p, isr[0], (1, 2, 3), isr) for p, isr in isrs.items())
    return ClusterView("127.0.0.1:9091", "c1", 1, brokers, parts, min_isr=(("t", min_isr),))


def test_under_replicated_partitions_name_the_broker_missing_from_the_isr() -> None:
    # broker 2 killed and gone: start it; broker 3 runs but lags: read its log
    findings = cluster_findings(rf3({0: (1, 3), 1: (3, 1), 2: (1, 2), 3: (1, 2, 3)},
                                    brokers=(B1, B3)))
    [finding] = findings
    assert (finding.severity, finding.code) == (Severity.WARNING, "under-replicated-partitions")
    assert finding.message.startswith("3 partition(s) are under-replicated (fewer in-sync "
                                      "replicas than replicas): t/0, t/1, t/2; missing from "
                                      "the ISR: broker 2 (2 partition(s)); broker 3 (1 ")
    assert [f.action for f in finding.fixes] == ["start broker 2", "check broker 3's log"]
    assert finding.fixes[0].note.startswith("it is not running (not registered) and holds "
                                            "replicas of t/0, t/1;")
    assert "replica.lag.time.max.ms" in finding.fixes[1].note
    # ZooKeeper's registrations count as alive too
    zk = ZkView("zk:2181", "c1", 1, tuple(Registration(i) for i in (1, 2, 3)))
    found = cluster_findings(rf3({0: (1, 3)}, brokers=(B1, B3)), zk)
    [finding] = [f for f in found if f.code == "under-replicated-partitions"]
    assert [f.action for f in finding.fixes] == ["check broker 2's log"]


def test_an_isr_below_min_insync_replicas_is_an_error() -> None:
    assert codes(cluster_findings(rf3({0: (1, 3), 1: (1, 2, 3)}, min_isr=2))) == [
        "under-replicated-partitions"]
    findings = cluster_findings(rf3({0: (1,), 1: (1, 2, 3), 2: (2, 3)}, min_isr=2))
    assert codes(findings) == ["under-replicated-partitions", "under-min-isr-partitions"]
    below = findings[1]
    assert below.severity is Severity.ERROR
    assert below.message.startswith("1 partition(s) have fewer in-sync replicas than "
                                    "min.insync.replicas: t/0 (ISR 1, min.insync.replicas=2)")
    assert "NOT_ENOUGH_REPLICAS" in below.message
    assert [f.action for f in below.fixes] == ["start broker 2 or check its log",
                                               "start broker 3 or check its log"]
    # a topic without a known min.insync.replicas counts as 1: never below with a leader
    assert ClusterView("x", min_isr=()).min_isr_of("t") == 1


def test_no_active_controller() -> None:
    [finding] = cluster_findings(view(controller=-1))
    assert (finding.severity, finding.code) == (Severity.ERROR, "no-controller")
    assert "controller id -1" in finding.message
    # ZooKeeper is the authority when it was read: no /controller znode, whatever Metadata says
    [finding] = cluster_findings(view(controller=1), ZkView("zk:2181/k", "c1", None))
    assert "no /controller znode under zk:2181/k" in finding.message


def test_brokers_registered_without_this_listener_are_named() -> None:
    zk = ZkView("zk:2181", "c1", 1, (
        Registration(1, (ListenerEntry("TEXT", "h", 1), ListenerEntry("PLAINTEXT", "h", 2))),
        Registration(2, (ListenerEntry("PLAINTEXT", "h", 3),))))
    status = diagnose(Observations((ok_probe(),), (BrokerCheck(B1, ok_probe(), None, "TEXT"),),
                                   cluster=view(brokers=(B1,)), zookeeper=zk))
    [finding] = [f for f in status.findings if f.code == "missing-on-listener"]
    assert finding.severity is Severity.WARNING and finding.subject == "broker(s) 2"
    assert "on listener TEXT (broker 2: PLAINTEXT://h:3)" in finding.message
    assert status.exit_code == 0


def test_unreadable_zookeeper_is_an_error() -> None:
    zk = ZkView("zk:2181/nope", error="no /brokers/ids under zk:2181/nope")
    [finding] = cluster_findings(healthy(), zk)
    assert (finding.code, finding.subject) == ("zookeeper-unreadable", "ZooKeeper zk:2181/nope")


# -- the doctor report --------------------------------------------------------------------------


def ok_probe(node: int = 1) -> Probe:
    return Probe("127.0.0.1", 9090 + node, Outcome.OK, resolved=("127.0.0.1",),
                 cluster_id="c1", brokers=(B1, B3), controller_id=1, answered_node=node)


def test_doctor_exits_1_and_shows_the_cluster_when_partitions_are_offline() -> None:
    checks = (BrokerCheck(B1, ok_probe()), BrokerCheck(B3, ok_probe(3)))
    report = diagnose(Observations((ok_probe(),), checks, cluster=broker_2_gone()))
    assert report.exit_code == 1 and codes(list(report.findings)) == ["offline-partitions"]
    text = render_text(report)
    assert ("Cluster (Metadata of all topics from 127.0.0.1:9091)\n"
            "  cluster id   c1\n"
            "  controller   broker 1\n"
            "  brokers      2 registered in Metadata (1, 3), 2 reachable from here; down "
            "(hold replicas): 2\n"
            "  partitions   6, 2 offline (no leader): t/1, t/4\n") in text
    assert "      1. start broker 2\n" in text
    assert text.endswith("All 2 broker(s) reachable. 2 partition(s) offline. 1 error(s), "
                         "0 warning(s). Exit status 1.\n")
    body = json.loads(render_json(report))
    assert body["cluster"]["offline_partitions"] == ["t/1", "t/4"]
    assert body["cluster"]["active_controller"] == 1
    assert (body["cluster"]["registered"], body["cluster"]["reachable"]) == ([1, 3], [1, 3])
    assert body["zookeeper"] is None


def test_doctor_text_lists_every_listener_from_zookeeper() -> None:
    zk = ZkView("zk:2181/m", "c1", 3, (
        Registration(1, (ListenerEntry("PLAINTEXT", "h", 1),), rack="r1"),
        Registration(3, (ListenerEntry("PLAINTEXT", "h", 3), ListenerEntry("EXT", "g", 4)))))
    report = diagnose(Observations((ok_probe(),), (BrokerCheck(B1, ok_probe()),
                                                    BrokerCheck(B3, ok_probe(3))),
                                   cluster=view(brokers=(B1, B3)), zookeeper=zk))
    text = render_text(report)
    assert "  controller   broker 3\n" in text  # /controller, not Metadata's id
    assert "  brokers      2 registered in ZooKeeper (1, 3), 2 reachable from here\n" in text
    assert ("ZooKeeper zk:2181/m (registrations: every listener of every broker)\n"
            "  broker 1  PLAINTEXT://h:1  rack r1\n"
            "  broker 3  PLAINTEXT://h:3, EXT://g:4\n") in text
    assert report.exit_code == 0


# -- moldau metadata --cluster ----------------------------------------------------------------


META = {"origin_id": 1, "origin": "h:1/1", "controller_id": 1, "cluster_id": "c1",
        "brokers": [(1, "h", 1), (3, "h", 3)],
        "offline_replicas": {("t", 1): [2]},
        "topics": [("t", 0, [(0, 1, [1], [1], 0), (1, -1, [2], [2], 5),
                             (2, -1, [3], [3], 72)])]}


def test_metadata_cluster_listing_marks_offline_partitions() -> None:
    plain = format_listing(META, None, AddressMap())
    assert "OFFLINE" not in plain and "cluster id" not in plain  # kcat's, unchanged
    zk = ZkView("zk:2181", "c1", 3, (Registration(1, (ListenerEntry("PLAINTEXT", "h", 1),
                                                      ListenerEntry("TEXT", "h", 11))),
                                     Registration(3, (ListenerEntry("PLAINTEXT", "h", 3),)),
                                     Registration(4, (ListenerEntry("OTHER", "x", 4),))))
    assert format_listing(META, None, AddressMap(), zk=zk).splitlines() == [
        "Metadata for all topics (from broker 1: h:1/1):",
        " cluster id: c1, controller: broker 3",
        " 2 brokers:",
        "  broker 1 at h:1",
        "      listeners: PLAINTEXT://h:1, TEXT://h:11",
        "  broker 3 at h:3 (controller)",
        "      listeners: PLAINTEXT://h:3",
        "  broker 4 registered, not on this listener",
        "      listeners: OTHER://x:4",
        " 1 topics:",
        '  topic "t" with 3 partitions:',
        "    partition 0, leader 1, replicas: 1, isrs: 1",
        "    partition 1, leader -1, replicas: 2, isrs: 2, offline replicas: 2, "
        "Broker: Leader not available (OFFLINE)",
        "    partition 2, leader -1, replicas: 3, isrs: 3, Broker: Listener not found",
        " 1 offline partitions (no leader)",
    ]
    assert offline_partitions(META) == [("t", 1)]


def test_metadata_cluster_json_only_adds_to_kcats_layout() -> None:
    plain = json.loads(format_json(META, None, AddressMap()))
    extended = json.loads(format_json(META, None, AddressMap(), cluster=True))
    assert set(plain) < set(extended)
    assert {k: extended[k] for k in plain if k != "topics"} == {
        k: v for k, v in plain.items() if k != "topics"}
    assert (extended["clusterid"], extended["controller"]) == ("c1", 1)
    assert extended["offline_partition_count"] == 1
    assert extended["offline_partitions"] == [{"topic": "t", "partition": 1}]
    part = extended["topics"][0]["partitions"][1]
    assert part["offline"] is True and part["offline_replicas"] == [{"id": 2}]
    assert {k: part[k] for k in plain["topics"][0]["partitions"][1]} == plain["topics"][0][
        "partitions"][1]
    assert "zookeeper" not in extended


def test_a_refusing_broker_among_answering_ones_is_probably_stopped() -> None:
    refused = Probe(B2.host, B2.port, Outcome.REFUSED, "connection refused",
                    resolved=("127.0.0.1",))
    probe = Probe("127.0.0.1", 9091, Outcome.OK, resolved=("127.0.0.1",), cluster_id="c1",
                  brokers=(B1, B2, B3), controller_id=1, answered_node=1)
    checks = (BrokerCheck(B1, probe), BrokerCheck(B2, refused),
              BrokerCheck(B3, dataclasses.replace(probe, port=9093, answered_node=3)))
    report = diagnose(Observations((probe,), checks, cluster=view()))
    [finding] = report.findings
    assert (finding.code, finding.subject) == ("refused", "broker 2 at 127.0.0.1:9092")
    assert finding.fixes[0].action == "start broker 2 if it is not running"
    assert [f.kind for f in finding.fixes[1:]] == ["advertised.listeners", "address-map",
                                                   "proxy"]
    # a single broker that refuses: nothing says another one works, no such guess
    alone = diagnose(Observations((probe,), (BrokerCheck(B2, refused),), cluster=view()))
    assert "start-broker" not in {f.kind for f in alone.findings[0].fixes}
