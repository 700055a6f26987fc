"""Client programs run inside lab namespaces: produce N records, read them back.

``python -m tests.net.clientprog confluent --bootstrap B --topic T`` uses confluent-kafka
(librdkafka) with a consumer group, so FindCoordinator's answer is used too;
``python -m tests.net.clientprog moldau --bootstrap B --topic T [--address-map M]`` uses the
moldau client (assigned partition 0); ``moldau-read`` only reads ``--count`` records back.
Each prints one JSON object — records produced, values read back, client errors and
librdkafka log lines (``Failed to resolve ...``) — and exits 0 only when every record came
back; ``confluent-metadata`` prints the brokers confluent-kafka's AdminClient is told of.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from typing import Any


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def run_confluent(args: argparse.Namespace) -> dict[str, Any]:
    import confluent_kafka

    errors: list[str] = []
    collect = _Collect()
    logger = logging.getLogger("librdkafka")
    logger.addHandler(collect)
    logger.setLevel(logging.INFO)
    common = {
        "bootstrap.servers": args.bootstrap,
        "socket.connection.setup.timeout.ms": int(args.timeout * 1000),
        "error_cb": lambda err: errors.append(str(err)),
        "logger": logger,
    }
    producer = confluent_kafka.Producer({**common, "message.timeout.ms": int(args.timeout * 1000)})
    delivered: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            delivered.append(msg.value().decode())
        else:
            errors.append(f"delivery failed: {err}")

    values = [f"{args.topic}-{i}" for i in range(args.count)]
    for value in values:
        producer.produce(args.topic, value.encode(), on_delivery=on_delivery)
    producer.flush(args.timeout + 5)
    consumed: list[str] = []
    if len(delivered) == len(values):
        consumer = confluent_kafka.Consumer({
            **common, "group.id": f"{args.topic}-group", "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000})
        consumer.subscribe([args.topic])
        deadline = time.monotonic() + args.timeout * 3
        while len(consumed) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                errors.append(f"consume: {msg.error()}")
                continue
            consumed.append(msg.value().decode())
        consumer.close()
    # Order holds within a partition only: a topic of several partitions is compared as a set.
    got = sorted(consumed) if args.any_order else consumed
    want = sorted(values) if args.any_order else values
    return {"produced": len(delivered), "consumed": consumed, "errors": errors,
            "logs": collect.lines, "ok": got == want}


def run_confluent_metadata(args: argparse.Namespace) -> dict[str, Any]:
    """The brokers confluent-kafka's AdminClient is told of (``list_topics``), by id."""
    import confluent_kafka.admin

    errors: list[str] = []
    admin = confluent_kafka.admin.AdminClient({
        "bootstrap.servers": args.bootstrap,
        "socket.connection.setup.timeout.ms": int(args.timeout * 1000),
        "error_cb": lambda err: errors.append(str(err))})
    brokers: dict[str, str] = {}
    try:
        metadata = admin.list_topics(timeout=args.timeout * 2)
        brokers = {str(b.id): f"{b.host}:{b.port}" for b in metadata.brokers.values()}
    except confluent_kafka.KafkaException as exc:
        errors.append(str(exc))
    return {"produced": 0, "consumed": [], "errors": errors, "logs": [], "brokers": brokers,
            "ok": bool(brokers)}


def run_moldau(args: argparse.Namespace) -> dict[str, Any]:
    from moldau.client import ClientError, NewTopic, SyncAdminClient, SyncConsumer, SyncProducer

    config = {"bootstrap.servers": args.bootstrap,
              "socket.connection.setup.timeout.ms": int(args.timeout * 1000),
              "request.timeout.ms": int(args.timeout * 1000)}
    if args.address_map:
        config["broker.address.map"] = args.address_map
    values = [f"{args.topic}-{i}" for i in range(args.count)]
    errors: list[str] = []
    consumed: list[str] = []
    produced = 0
    try:
        # The moldau client does not auto-create topics (Kafka's Java client neither).
        admin = SyncAdminClient({**config,
                                 "default.api.timeout.ms": int(args.timeout * 2000)})
        admin.create_topics([NewTopic(args.topic, 1, 1)])
        admin.close()
        producer = SyncProducer({**config, "delivery.timeout.ms": int(args.timeout * 2000),
                                 "max.block.ms": int(args.timeout * 2000)})
        futures = [producer.send(args.topic, value) for value in values]
        producer.flush(args.timeout * 3)
        produced = sum(1 for f in futures if f.done() and f.exception() is None)
        errors += [str(f.exception()) for f in futures if f.done() and f.exception()]
        producer.close()
        consumer = SyncConsumer({**config, "auto.offset.reset": "earliest",
                                 "default.api.timeout.ms": int(args.timeout * 2000)})
        consumer.assign([(args.topic, 0)])
        deadline = time.monotonic() + args.timeout * 3
        while len(consumed) < len(values) and time.monotonic() < deadline:
            consumed += [r.value.decode() for r in consumer.poll(0.5) if r.value is not None]
        consumer.close()
    except (ClientError, TimeoutError, OSError) as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    return {"produced": produced, "consumed": consumed, "errors": errors, "logs": [],
            "ok": consumed == values}


def run_moldau_read(args: argparse.Namespace) -> dict[str, Any]:
    """Read ``--count`` values of partition 0 from the beginning with the moldau client."""
    from moldau.client import ClientError, SyncConsumer

    config = {"bootstrap.servers": args.bootstrap, "auto.offset.reset": "earliest",
              "request.timeout.ms": int(args.timeout * 1000),
              "default.api.timeout.ms": int(args.timeout * 2000)}
    if args.address_map:
        config["broker.address.map"] = args.address_map
    consumed: list[str] = []
    errors: list[str] = []
    try:
        consumer = SyncConsumer(config)
        consumer.assign([(args.topic, 0)])
        deadline = time.monotonic() + args.timeout * 3
        while len(consumed) < args.count and time.monotonic() < deadline:
            consumed += [r.value.decode() for r in consumer.poll(0.5) if r.value is not None]
        consumer.close()
    except (ClientError, TimeoutError, OSError) as exc:
        errors.append(f"{type(exc).__name__}: {exc}")
    return {"produced": 0, "consumed": consumed, "errors": errors, "logs": [],
            "ok": len(consumed) == args.count}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clientprog")
    parser.add_argument("client", choices=["confluent", "confluent-metadata", "moldau",
                                           "moldau-read"])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--count", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=8.0)
    parser.add_argument("--address-map", default="")
    parser.add_argument("--any-order", action="store_true",
                        help="confluent: the topic has several partitions, compare as a set")
    args = parser.parse_args(argv)
    runners = {"confluent": run_confluent, "confluent-metadata": run_confluent_metadata,
               "moldau": run_moldau, "moldau-read": run_moldau_read}
    result = runners[args.client](args)
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
