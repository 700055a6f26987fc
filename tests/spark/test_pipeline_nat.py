"""Acceptance 3: seed 002's pipeline across real NAT, in the network-namespace lab.

Headquarters' broker listens on, and advertises, its internal address ip1 (10.10.0.11:9092);
the NAT box lets the branch reach it only as n_ip1 (203.0.113.11:9092) and drops every
other connection into headquarters. The pipeline (``moldau pipeline tag`` on ``local[*]``)
and the branch's own cluster run in the branch namespace. The pipeline bootstraps through
n_ip1 and is handed ip1; with ``--address-map`` it reaches the partition leader through the
NAT, tags every event with the branch's reference data and writes the tag records to the
branch cluster — and after a restart from the checkpoint it tags only the new events.

The lab (tests/net/lab.py) runs the test in a private network namespace of its own (the
SAFETY RULE of FACTS.md); nothing here connects to an address outside the lab.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from tests.net.brokers import start_broker
from tests.net.lab import Lab, Netns, netlab
from tests.net.topologies import BRANCH_IP, HQ_BROKER_IP, NAT_BROKER_IP, nat_network

from .pipeline_helpers import check_tags, pipeline_command, write_reference_csv

INTERNAL = f"{HQ_BROKER_IP}:9092"
VIA_NAT = f"{NAT_BROKER_IP}:9092"
ADDRESS_MAP = f"{INTERNAL}={VIA_NAT}"
TARGET = f"{BRANCH_IP}:9092"


def helper(ns: Netns, *args: str, timeout: float = 90) -> Any:
    done = ns.run([sys.executable, "-m", "tests.spark.pipeline_helpers", *args],
                  timeout=timeout)
    assert done.returncode == 0, f"helper {args[0]} in {ns.role}:\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@netlab
def test_tag_pipeline_across_nat_and_after_a_restart() -> None:
    with Lab() as lab:
        net = nat_network(lab)
        start_broker(lab, net.hq, properties={"node.id": "1", "num.partitions": "2",
                                              "listeners": f"PLAINTEXT://{INTERNAL}"})
        start_broker(lab, net.branch, properties={"node.id": "1", "num.partitions": "2",
                                                  "listeners": f"PLAINTEXT://{TARGET}"},
                     name="target")
        # Head office writes events on its own network.
        helper(net.hq_client, "produce", "--bootstrap", INTERNAL, "--topic", "events",
               "--count", "40")
        csv = write_reference_csv(lab.tmp / "branch.csv")
        command = pipeline_command(VIA_NAT, "events", TARGET, "tags", lab.tmp / "checkpoint",
                                   "--address-map", ADDRESS_MAP, "--reference", str(csv))
        first = net.branch.run(command, timeout=200)
        assert first.returncode == 0, first.stderr[-5000:]
        assert json.loads(first.stdout.strip().splitlines()[-1])["records"] == 40
        tags = helper(net.branch, "read", "--bootstrap", TARGET, "--topic", "tags",
                      "--expected", "40")
        for tag in tags:
            tag["_key"] = tag["_key"].encode()
        check_tags(tags, "events", 40)

        # More events; the restarted pipeline tags exactly those.
        helper(net.hq_client, "produce", "--bootstrap", INTERNAL, "--topic", "events",
               "--first", "40", "--count", "20")
        second = net.branch.run(command, timeout=200)
        assert second.returncode == 0, second.stderr[-5000:]
        assert json.loads(second.stdout.strip().splitlines()[-1])["records"] == 20
        tags = helper(net.branch, "read", "--bootstrap", TARGET, "--topic", "tags",
                      "--expected", "60")
        for tag in tags:
            tag["_key"] = tag["_key"].encode()
        check_tags(tags, "events", 60)
