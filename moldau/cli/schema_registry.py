"""``moldau schema-registry``: Confluent's Schema Registry API, stored in a Kafka cluster.

Mirrors ``schema-registry-start schema-registry.properties``::

    moldau schema-registry --bootstrap-server localhost:9092 --listeners http://0.0.0.0:8081
    moldau schema-registry --config schema-registry.properties --property kafkastore.topic=_s

Any Kafka-compatible cluster works. Settings use Confluent's keys (``listeners``,
``kafkastore.bootstrap.servers``, ``kafkastore.topic``, ``schema.compatibility.level``, ...;
see :mod:`moldau.registry.config`); ``--bootstrap-server`` and ``--listeners`` set the first
two and win over the file. SIGTERM and SIGINT stop it cleanly.
"""

from __future__ import annotations

import argparse
import logging

from ..registry.config import KEYS, RegistryConfig, describe, load_config
from . import http_service

log = logging.getLogger("moldau.registry")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = http_service.add_service_parser(
        subparsers, "schema-registry",
        help="run a schema registry (Confluent's API) stored in Kafka",
        description="Serve Confluent's Schema Registry REST API; the schemas live in the "
                    "_schemas topic of the given Kafka cluster.",
        keys=describe(),
        bootstrap_help="the Kafka cluster to store schemas in (kafkastore.bootstrap.servers)",
        default_listeners=KEYS["listeners"].default, config_file="schema-registry.properties",
        property_example="kafkastore.topic=_schemas")
    parser.set_defaults(func=run)


async def _serve(config: RegistryConfig) -> int:
    from ..registry.app import SchemaRegistry
    from ..registry.elected import elected_primary

    registry = SchemaRegistry(config, primary_factory=elected_primary)
    return await http_service.serve(registry, "schema registry", log)


def run(args: argparse.Namespace) -> int:
    return http_service.run(args, "schema-registry", "kafkastore.bootstrap.servers",
                            load_config, _serve)
