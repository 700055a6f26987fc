"""``moldau rest-proxy``: Confluent's REST Proxy API (v2 and v3) for a Kafka cluster.

Mirrors ``kafka-rest-start kafka-rest.properties``::

    moldau rest-proxy --bootstrap-server localhost:9092 --listeners http://0.0.0.0:8082
    moldau rest-proxy --config kafka-rest.properties --property consumer.instance.timeout.ms=60000

Any Kafka-compatible cluster works. Settings use Confluent's keys (``listeners``,
``bootstrap.servers``, ``schema.registry.url``, ``consumer.instance.timeout.ms``, ``client.*``
/ ``producer.*`` / ``consumer.*`` / ``admin.*`` for the proxy's Kafka clients; see
:mod:`moldau.rest.config`); ``--bootstrap-server`` and ``--listeners`` set the first two and
win over the file. SIGTERM and SIGINT stop it cleanly: consumer instances leave their groups.
"""

from __future__ import annotations

import argparse
import logging

from ..rest.config import DEFAULT_LISTENERS, RestConfig, describe, load_config
from . import http_service

log = logging.getLogger("moldau.rest")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = http_service.add_service_parser(
        subparsers, "rest-proxy",
        help="run a REST proxy (Confluent's API v2 and v3) for a Kafka cluster",
        description="Serve Confluent's REST Proxy API: produce, consume and administer Kafka "
                    "over HTTP.",
        keys=describe(), bootstrap_help="the Kafka cluster (bootstrap.servers)",
        default_listeners=DEFAULT_LISTENERS, config_file="kafka-rest.properties",
        property_example="schema.registry.url=http://h:8081")
    parser.set_defaults(func=run)


async def _serve(config: RestConfig) -> int:
    from ..rest.app import RestProxy

    return await http_service.serve(RestProxy(config), "rest proxy", log)


def run(args: argparse.Namespace) -> int:
    return http_service.run(args, "rest-proxy", "bootstrap.servers", load_config, _serve)
