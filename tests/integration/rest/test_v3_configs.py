"""API v3 topic, broker and cluster-wide configs over HTTP against an in-process broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from moldau.testing.runner import InProcessBroker

from .test_v3_resources import create, error, ok
from .v3_harness import RestV3, unique


@pytest.fixture(scope="module")
def rest() -> Iterator[RestV3]:
    with InProcessBroker() as node, RestV3(node.bootstrap) as server:
        yield server


@pytest.fixture(scope="module")
def cid(rest: RestV3) -> str:
    return rest.cluster_id


def value(rest: RestV3, path: str) -> tuple[str | None, str, bool]:
    data = ok(rest.request("GET", path))
    return data["value"], data["source"], data["is_default"]


def test_topic_configs(rest: RestV3, cid: str) -> None:
    name = unique()
    ok(create(rest, cid, name), 201)
    base = f"/v3/clusters/{cid}/topics/{name}/configs"
    listed = ok(rest.request("GET", base))
    assert listed["kind"] == "KafkaTopicConfigList"
    assert listed["metadata"]["self"] == rest.url + base
    by_name = {c["name"]: c for c in listed["data"]}
    retention = by_name["retention.ms"]
    assert retention == {
        "kind": "KafkaTopicConfig",
        "metadata": {"self": f"{rest.url}{base}/retention.ms",
                     "resource_name": f"crn:///kafka={cid}/topic={name}/config=retention.ms"},
        "cluster_id": cid, "topic_name": name, "name": "retention.ms",
        "value": retention["value"], "is_default": True, "is_read_only": False,
        "is_sensitive": False, "source": "DEFAULT_CONFIG", "synonyms": retention["synonyms"],
    }
    assert ok(rest.request("GET", f"{base}/retention.ms")) == retention
    assert {s["source"] for s in retention["synonyms"]} >= {"DEFAULT_CONFIG"}

    # PUT one key, DELETE resets it
    reply = rest.request("PUT", f"{base}/retention.ms", {"value": "60000"})
    assert (reply.status, reply.text) == (204, "")
    assert value(rest, f"{base}/retention.ms") == ("60000", "DYNAMIC_TOPIC_CONFIG", False)
    synonyms = ok(rest.request("GET", f"{base}/retention.ms"))["synonyms"]
    assert synonyms[0] == {"name": "retention.ms", "value": "60000",
                           "source": "DYNAMIC_TOPIC_CONFIG"}
    assert rest.request("DELETE", f"{base}/retention.ms").status == 204
    assert value(rest, f"{base}/retention.ms")[1:] == ("DEFAULT_CONFIG", True)

    # batch alter: SET and DELETE at once
    reply = rest.request("POST", f"{base}:alter", {"data": [
        {"name": "cleanup.policy", "value": "compact"},
        {"name": "max.message.bytes", "value": "2048", "operation": "SET"}]})
    assert reply.status == 204, reply.text
    assert value(rest, f"{base}/cleanup.policy")[0] == "compact"
    assert value(rest, f"{base}/max.message.bytes")[0] == "2048"
    assert rest.request("POST", f"{base}:alter", {"data": [
        {"name": "cleanup.policy", "operation": "DELETE"}]}).status == 204
    assert value(rest, f"{base}/cleanup.policy")[0] == "delete"

    # unknown keys and topics, bad values
    assert error(rest.request("GET", f"{base}/no.such.key"), 404, 404)
    message = error(rest.request("PUT", f"{base}/no.such.key", {"value": "1"}), 404, 404)
    assert message == f"Config no.such.key cannot be found for TOPIC {name} in cluster {cid}."
    error(rest.request("POST", f"{base}:alter", {"data": [
        {"name": "no.such.key", "value": "1"}]}), 404, 404)
    error(rest.request("PUT", f"{base}/retention.ms", {"value": "soon"}), 400, 40002)
    error(rest.request("POST", f"{base}:alter", {"data": [
        {"name": "retention.ms", "value": "1", "operation": "APPEND"}]}), 400, 400)
    other = f"/v3/clusters/{cid}/topics/{unique()}/configs"
    error(rest.request("GET", other), 404, 40403)
    error(rest.request("GET", other + "/retention.ms"), 404, 40403)
    error(rest.request("PUT", other + "/retention.ms", {"value": "1"}), 404, 40403)


def test_topic_configs_alter_validate_only(rest: RestV3, cid: str) -> None:
    name = unique()
    ok(create(rest, cid, name), 201)
    base = f"/v3/clusters/{cid}/topics/{name}/configs"
    reply = rest.request("POST", f"{base}:alter", {
        "data": [{"name": "retention.ms", "value": "12345"}], "validate_only": True})
    assert reply.status == 204, reply.text
    assert value(rest, f"{base}/retention.ms")[1] == "DEFAULT_CONFIG"
    error(rest.request("POST", f"{base}:alter", {
        "data": [{"name": "retention.ms", "value": "soon"}], "validate_only": True}),
        400, 40002)


def test_all_topic_configs(rest: RestV3, cid: str) -> None:
    first, second = unique(), unique()
    ok(create(rest, cid, first, configs=[{"name": "retention.ms", "value": "1000"}]), 201)
    ok(create(rest, cid, second), 201)
    listed = ok(rest.request("GET", f"/v3/clusters/{cid}/topics/-/configs"))
    assert listed["kind"] == "KafkaTopicConfigList"
    retention = {(c["topic_name"], c["name"]): c["value"] for c in listed["data"]}
    assert retention[(first, "retention.ms")] == "1000"
    assert (second, "retention.ms") in retention


def test_broker_configs(rest: RestV3, cid: str) -> None:
    base = f"/v3/clusters/{cid}/brokers/1/configs"
    listed = ok(rest.request("GET", base))
    assert listed["kind"] == "KafkaBrokerConfigList"
    entry = next(c for c in listed["data"] if c["name"] == "log.retention.ms")
    assert entry["kind"] == "KafkaBrokerConfig" and entry["broker_id"] == 1
    assert entry["metadata"]["resource_name"] == (
        f"crn:///kafka={cid}/broker=1/config=log.retention.ms")
    assert rest.request("PUT", f"{base}/log.retention.ms", {"value": "7200000"}).status == 204
    assert value(rest, f"{base}/log.retention.ms") == (
        "7200000", "DYNAMIC_BROKER_CONFIG", False)
    assert rest.request("DELETE", f"{base}/log.retention.ms").status == 204
    assert value(rest, f"{base}/log.retention.ms")[1] != "DYNAMIC_BROKER_CONFIG"
    reply = rest.request("POST", f"{base}:alter", {"data": [
        {"name": "log.retention.ms", "value": "3600000"},
        {"name": "log.cleaner.threads", "operation": "DELETE"}]})
    assert reply.status == 204, reply.text
    assert value(rest, f"{base}/log.retention.ms")[0] == "3600000"
    assert rest.request("DELETE", f"{base}/log.retention.ms").status == 204
    every = ok(rest.request("GET", f"/v3/clusters/{cid}/brokers/-/configs"))
    assert every["kind"] == "KafkaBrokerConfigList"
    assert {c["broker_id"] for c in every["data"]} == {1}
    error(rest.request("GET", f"{base}/no.such.key"), 404, 404)
    error(rest.request("PUT", f"{base}/no.such.key", {"value": "1"}), 404, 404)
    error(rest.request("GET", f"/v3/clusters/{cid}/brokers/9/configs"), 404, 404)
    error(rest.request("PUT", f"/v3/clusters/{cid}/brokers/9/configs/log.retention.ms",
                       {"value": "1"}), 404, 404)


def test_cluster_configs(rest: RestV3, cid: str) -> None:
    base = f"/v3/clusters/{cid}/broker-configs"
    assert rest.request("PUT", f"{base}/log.retention.ms", {"value": "5400000"}).status == 204
    listed = ok(rest.request("GET", base))
    assert listed["kind"] == "KafkaClusterConfigList"
    entry = ok(rest.request("GET", f"{base}/log.retention.ms"))
    assert entry in listed["data"]
    assert (entry["kind"], entry["config_type"], entry["value"], entry["source"]) == (
        "KafkaClusterConfig", "BROKER", "5400000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    assert entry["metadata"]["resource_name"] == (
        f"crn:///kafka={cid}/broker-config=log.retention.ms")
    # the broker now inherits the cluster-wide default
    broker = ok(rest.request("GET", f"/v3/clusters/{cid}/brokers/1/configs/log.retention.ms"))
    assert (broker["value"], broker["source"]) == ("5400000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    assert rest.request("POST", f"{base}:alter", {"data": [
        {"name": "log.retention.ms", "operation": "DELETE"}]}).status == 204
    error(rest.request("GET", f"{base}/log.retention.ms"), 404, 404)
    error(rest.request("PUT", f"{base}/log.retention.ms", {"value": "never"}), 400, 40002)
