"""The doctor's diagnosis rules, from hand-written observations (no sockets)."""

from __future__ import annotations

import json

import pytest

from moldau.doctor import (
    BrokerCheck,
    BrokerListeners,
    Endpoint,
    ListenerEntry,
    Observations,
    Outcome,
    Probe,
    Severity,
    diagnose,
    render_json,
    render_text,
)
from moldau.doctor.model import parse_listener_list, parse_protocol_map

CLUSTER = "dub2bKTSSt-_P3Xrb054Ew"

# Seed 000's listeners, as DescribeConfigs renders them.
SEED_000 = BrokerListeners(
    listeners=parse_listener_list(
        "LISTENER_BOB://kafka0:29092,LISTENER_FRED://kafka0:9092,LISTENER_ALICE://kafka0:29094"),
    advertised=parse_listener_list(
        "LISTENER_BOB://kafka0:29092,LISTENER_FRED://localhost:9092,"
        "LISTENER_ALICE://never-gonna-give-you-up:29094"),
    protocol_map=parse_protocol_map(
        "LISTENER_BOB:PLAINTEXT,LISTENER_FRED:PLAINTEXT,LISTENER_ALICE:PLAINTEXT"),
)
BOB = Endpoint(0, "kafka0", 29092)
FRED = Endpoint(0, "localhost", 9092)


def ok_probe(host: str, port: int, brokers: tuple[Endpoint, ...], *, node: int | None = 0,
             cluster: str = CLUSTER, listeners: BrokerListeners | None = SEED_000,
             resolved: tuple[str, ...] = ("127.0.0.1",)) -> Probe:
    return Probe(host, port, Outcome.OK, resolved=resolved, elapsed_ms=2, cluster_id=cluster,
                 brokers=brokers, controller_id=0, answered_node=node, listeners=listeners)


def failed(host: str, port: int, outcome: Outcome, detail: str = "",
           resolved: tuple[str, ...] = ()) -> Probe:
    return Probe(host, port, outcome, detail, resolved=resolved)


def docker_misconfig(**more: object) -> Observations:
    """A client on the Docker host bootstraps through the internal listener (seed 000)."""
    boot = ok_probe("localhost", 29092, (BOB,))
    check = BrokerCheck(BOB, failed("kafka0", 29092, Outcome.DNS, "Name or service not known"),
                        listener="LISTENER_BOB")
    return Observations((boot,), (check,), **more)  # type: ignore[arg-type]


def codes(report: object) -> list[str]:
    return [f.code for f in report.findings]  # type: ignore[attr-defined]


# --- healthy ---------------------------------------------------------------------------------


def test_healthy_single_broker_exits_zero() -> None:
    boot = ok_probe("kafka0", 29092, (BOB,))
    check = BrokerCheck(BOB, ok_probe("kafka0", 29092, (BOB,)), listener="LISTENER_BOB")
    report = diagnose(Observations((boot,), (check,)))
    assert report.ok and report.exit_code == 0
    assert report.findings == ()
    assert [s.reachable for s in report.brokers] == [True]
    assert "All 1 broker(s) reachable" in render_text(report)


# --- unreachable advertised addresses ---------------------------------------------------------


def test_unresolvable_name_explained_with_listener_and_fixes() -> None:
    report = diagnose(docker_misconfig())
    assert report.exit_code == 1
    [finding] = report.findings
    assert (finding.severity, finding.code) == (Severity.ERROR, "unresolvable")
    assert finding.subject == "broker 0 at kafka0:29092"
    assert "'kafka0' does not resolve" in finding.message
    assert "listener LISTENER_BOB" in finding.message
    assert "Failed to resolve 'kafka0:29092'" in finding.message
    fixes = {f.kind: f for f in finding.fixes}
    # The broker line keeps the other listeners and replaces LISTENER_BOB's address with the
    # bootstrap address that works from here.
    assert fixes["advertised.listeners"].action == (
        "advertised.listeners=LISTENER_BOB://localhost:29092,LISTENER_FRED://localhost:9092,"
        "LISTENER_ALICE://never-gonna-give-you-up:29094")
    assert fixes["address-map"].action == "--address-map kafka0:29092=localhost:29092"
    assert fixes["proxy"].action == (
        "moldau proxy --bootstrap-server localhost:29092 "
        "--address-map kafka0:29092=localhost:29092 --port-base 19090")
    assert report.brokers[0].summary == "FAILED: cannot resolve 'kafka0'"


def test_another_listener_that_works_is_offered_first() -> None:
    alt = ok_probe("localhost", 9092, (FRED,))
    report = diagnose(docker_misconfig(
        alternatives=((ListenerEntry("LISTENER_FRED", "localhost", 9092), alt),)))
    [finding] = report.findings
    first = finding.fixes[0]
    assert (first.kind, first.action) == ("bootstrap", "--bootstrap-server localhost:9092")
    assert "LISTENER_FRED" in first.note


def test_alternative_that_fails_is_not_offered() -> None:
    alt = failed("never-gonna-give-you-up", 29094, Outcome.DNS, "Name or service not known")
    report = diagnose(docker_misconfig(
        alternatives=((ListenerEntry("LISTENER_ALICE", "never-gonna-give-you-up", 29094),
                       alt),)))
    assert [f.kind for f in report.findings[0].fixes] == [
        "advertised.listeners", "address-map", "proxy"]


@pytest.mark.parametrize(("outcome", "code", "words"), [
    (Outcome.REFUSED, "refused", "connection refused"),
    (Outcome.TIMEOUT, "timeout", "got no answer within 2 s"),
    (Outcome.UNREACHABLE, "unreachable", "no route"),
    (Outcome.NOT_KAFKA, "not-kafka", "no Kafka answer"),
    (Outcome.ERROR, "error", "failed"),
])
def test_each_failure_kind_has_its_code_and_words(outcome: Outcome, code: str,
                                                   words: str) -> None:
    endpoint = Endpoint(1, "10.10.0.11", 9092)
    boot = ok_probe("203.0.113.11", 9092, (endpoint,), node=1, listeners=None)
    check = BrokerCheck(endpoint, failed("10.10.0.11", 9092, outcome, "detail",
                                         resolved=("10.10.0.11",)))
    report = diagnose(Observations((boot,), (check,)), timeout_s=2)
    assert report.exit_code == 1
    [finding] = report.findings
    assert finding.code == code
    assert words in finding.message
    fixes = {f.kind: f for f in finding.fixes}
    # Listener configs unknown: the line names a placeholder listener, the address that works
    assert fixes["advertised.listeners"].action.startswith(
        "advertised.listeners=<LISTENER>://203.0.113.11:9092")
    assert fixes["address-map"].action == "--address-map 10.10.0.11:9092=203.0.113.11:9092"


def test_unknown_reachable_address_gives_placeholder() -> None:
    # Broker 2 is not the one that answered bootstrap: its reachable address is unknown.
    one, two = Endpoint(1, "10.0.0.1", 9092), Endpoint(2, "10.0.0.2", 9092)
    boot = ok_probe("nat-1", 9092, (one, two), node=1, listeners=None)
    checks = (BrokerCheck(one, ok_probe("10.0.0.1", 9092, (one, two), node=1, listeners=None)),
              BrokerCheck(two, failed("10.0.0.2", 9092, Outcome.TIMEOUT)))
    report = diagnose(Observations((boot,), checks))
    [finding] = report.findings
    assert finding.subject == "broker 2 at 10.0.0.2:9092"
    fixes = {f.kind: f for f in finding.fixes}
    assert "<address of broker 2 reachable from here>:9092" in fixes["address-map"].action
    assert [s.reachable for s in report.brokers] == [True, False]


# --- wrong broker answering ---------------------------------------------------------------------


def test_answer_from_another_node_is_an_error() -> None:
    one, two = Endpoint(1, "b1", 9092), Endpoint(2, "b2", 9092)
    boot = ok_probe("b1", 9092, (one, two), node=1, listeners=None)
    checks = (BrokerCheck(one, ok_probe("b1", 9092, (one, two), node=1, listeners=None)),
              BrokerCheck(two, ok_probe("b2", 9092, (one, two), node=1, listeners=None)))
    report = diagnose(Observations((boot,), checks))
    assert codes(report) == ["wrong-node"]
    assert "answers as node 1" in report.findings[0].message
    assert report.exit_code == 1
    assert report.brokers[1].summary.startswith("WRONG BROKER")


def test_answer_from_another_cluster_is_an_error() -> None:
    boot = ok_probe("b1", 9092, (Endpoint(1, "b1", 9092),), node=1, listeners=None)
    other = ok_probe("b1", 9092, (Endpoint(1, "b1", 9092),), node=1, cluster="other",
                     listeners=None)
    report = diagnose(Observations((boot,), (BrokerCheck(Endpoint(1, "b1", 9092), other),)))
    assert codes(report) == ["wrong-cluster"]
    assert report.exit_code == 1


# --- the address map ----------------------------------------------------------------------------


def test_reachable_only_through_the_map_is_a_warning() -> None:
    endpoint = Endpoint(1, "10.10.0.11", 9092)
    boot = ok_probe("203.0.113.11", 9092, (endpoint,), node=1, listeners=None)
    check = BrokerCheck(endpoint, failed("10.10.0.11", 9092, Outcome.TIMEOUT),
                        mapped=ok_probe("203.0.113.11", 9092, (endpoint,), node=1,
                                        listeners=None))
    report = diagnose(Observations((boot,), (check,), address_map="10.10.0.11=203.0.113.11"))
    assert report.exit_code == 0
    [finding] = report.findings
    assert (finding.severity, finding.code) == (Severity.WARNING, "only-via-map")
    assert "unmodified clients" in finding.message
    assert "address-map" not in {f.kind for f in finding.fixes}
    proxy = next(f for f in finding.fixes if f.kind == "proxy")
    assert proxy.action == ("moldau proxy --bootstrap-server 203.0.113.11:9092 "
                            "--address-map 10.10.0.11=203.0.113.11 --port-base 19090")
    assert report.brokers[0].via_map and report.brokers[0].reachable
    assert "only through the address map" in render_text(report)


def test_map_target_that_fails_too_is_an_error() -> None:
    endpoint = Endpoint(1, "10.10.0.11", 9092)
    boot = ok_probe("203.0.113.11", 9092, (endpoint,), node=1, listeners=None)
    check = BrokerCheck(endpoint, failed("10.10.0.11", 9092, Outcome.TIMEOUT),
                        mapped=failed("203.0.113.99", 9092, Outcome.REFUSED,
                                      resolved=("203.0.113.99",)))
    report = diagnose(Observations((boot,), (check,)))
    [finding] = report.findings
    assert finding.code == "timeout"
    assert "--address-map target 203.0.113.99:9092 does not work either" in finding.message
    assert report.exit_code == 1


# --- bootstrap lists ---------------------------------------------------------------------------


def _seed_001() -> Observations:
    """Seed 001: IP1:9090,IP2:9090 on PLAINTEXT1 and IP3:9091 on PLAINTEXT2."""
    p1 = (Endpoint(1, "ip1", 9090), Endpoint(2, "ip2", 9090), Endpoint(3, "ip3", 9090))
    p2 = (Endpoint(2, "ip2", 9091), Endpoint(3, "ip3", 9091))

    def conf(node: int) -> BrokerListeners:
        return BrokerListeners(parse_listener_list(
            f"PLAINTEXT1://ip{node}:9090,PLAINTEXT2://ip{node}:9091"))

    boot = (ok_probe("ip1", 9090, p1, node=1, listeners=conf(1)),
            ok_probe("ip2", 9090, p1, node=2, listeners=conf(2)),
            ok_probe("ip3", 9091, p2, node=3, listeners=conf(3)))
    checks = tuple(BrokerCheck(e, ok_probe(e.host, e.port, p1 if e.port == 9090 else p2,
                                           node=e.node_id, listeners=conf(e.node_id)))
                   for e in (*p1, *p2))
    return Observations(boot, checks)


def test_mixed_listener_bootstrap_list_is_an_error() -> None:
    report = diagnose(_seed_001())
    assert codes(report) == ["mixed-listeners"]
    finding = report.findings[0]
    assert "ip1:9090, ip2:9090 (listener PLAINTEXT1)" in finding.message
    assert "ip3:9091 (listener PLAINTEXT2)" in finding.message
    assert finding.fixes[0].action == "--bootstrap-server ip1:9090,ip2:9090"
    assert report.exit_code == 1


def test_bootstrap_addresses_of_different_clusters() -> None:
    a = ok_probe("a", 9092, (Endpoint(1, "a", 9092),), node=1, cluster="c1", listeners=None)
    b = ok_probe("b", 9092, (Endpoint(1, "b", 9092),), node=1, cluster="c2", listeners=None)
    report = diagnose(Observations((a, b)))
    assert codes(report) == ["different-clusters"]
    assert report.exit_code == 1


def test_no_bootstrap_address_answers() -> None:
    report = diagnose(Observations((failed("nohost", 9092, Outcome.DNS, "unknown"),
                                    failed("127.0.0.1", 1, Outcome.REFUSED,
                                           resolved=("127.0.0.1",)))))
    assert codes(report) == ["bootstrap-unresolvable", "bootstrap-refused"]
    assert all(f.severity is Severity.ERROR for f in report.findings)
    assert report.brokers == () and report.exit_code == 1
    assert "No bootstrap address answered" in render_text(report)


def test_one_dead_bootstrap_address_is_a_warning() -> None:
    boot = ok_probe("kafka0", 29092, (BOB,))
    check = BrokerCheck(BOB, ok_probe("kafka0", 29092, (BOB,)), listener="LISTENER_BOB")
    report = diagnose(Observations((boot, failed("old-host", 9092, Outcome.DNS)), (check,)))
    assert [(f.severity, f.code) for f in report.findings] == [
        (Severity.WARNING, "bootstrap-unresolvable")]
    assert report.exit_code == 0


def test_advertised_address_leading_to_another_listener_is_flagged() -> None:
    # Listener BOB advertises FRED's address: it works, but its metadata differs.
    boot = ok_probe("kafka0", 29092, (Endpoint(0, "kafka0", 9092),))
    direct = ok_probe("kafka0", 9092, (FRED,))
    check = BrokerCheck(Endpoint(0, "kafka0", 9092), direct, listener="LISTENER_BOB")
    report = diagnose(Observations((boot,), (check,)))
    assert [(f.severity, f.code) for f in report.findings] == [
        (Severity.WARNING, "listener-mismatch")]


# --- listener names and parsing --------------------------------------------------------------


def test_listener_name_from_advertised_entry() -> None:
    assert ok_probe("localhost", 9092, (FRED,)).listener_name() == "LISTENER_FRED"
    assert ok_probe("localhost", 29092, (BOB,)).listener_name() == "LISTENER_BOB"


def test_listener_name_falls_back_to_bound_port() -> None:
    # Behind a port forward the advertised entry may not match the endpoint returned, but
    # the dialled port is the listener's bound port.
    listeners = BrokerListeners(parse_listener_list("INTERNAL://0.0.0.0:19092,"
                                                    "EXTERNAL://0.0.0.0:9092"))
    probe = ok_probe("ec2-host", 9092, (Endpoint(0, "ip-172-31-18-160", 9092),),
                     listeners=listeners)
    assert probe.listener_name() == "EXTERNAL"
    assert ok_probe("x", 1, (BOB,), listeners=None).listener_name() is None


def test_parse_listener_list() -> None:
    entries = parse_listener_list("A://h:1, B://[fd00::1]:2,junk,C://:3,D://h:x")
    assert [str(e) for e in entries] == ["A://h:1", "B://[fd00::1]:2", "C://:3"]
    assert parse_listener_list(None) == ()
    assert parse_protocol_map("A:PLAINTEXT,B:SSL") == (("A", "PLAINTEXT"), ("B", "SSL"))


# --- output --------------------------------------------------------------------------------


def test_text_and_json_renderings() -> None:
    alt = ok_probe("localhost", 9092, (FRED,))
    report = diagnose(docker_misconfig(
        alternatives=((ListenerEntry("LISTENER_FRED", "localhost", 9092), alt),)))
    text = render_text(report)
    assert "0 at kafka0:29092 [LISTENER_BOB]  FAILED: cannot resolve 'kafka0'" in text
    assert "ERROR: broker 0 at kafka0:29092 [unresolvable]" in text
    assert "1. --bootstrap-server localhost:9092" in text
    assert "Exit status 1." in text
    data = json.loads(render_json(report))
    assert data["ok"] is False and data["exit_code"] == 1
    assert data["findings"][0]["code"] == "unresolvable"
    assert data["checks"][0]["direct"]["outcome"] == "dns"
    assert data["bootstrap"][0]["answered_node"] == 0
    assert data["alternatives"][0]["listener"] == "LISTENER_FRED://localhost:9092"
