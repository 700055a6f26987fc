"""Render the configuration tables of docs/configuration.md from the definitions.

``python -m moldau.broker.config.docs`` prints the three tables (broker keys, topic keys,
Kafka's dynamic broker keys and what each does in Moldau); tests/unit/broker/test_config_docs.py
checks the document carries them.
"""

from __future__ import annotations

from typing import Any

from ..metadata.configs import APPLIED_BROKER_CONFIGS, render
from .definitions import BROKER_BY_NAME, BROKER_CONFIGS, TOPIC_BY_NAME, TOPIC_CONFIGS
from .kafka_dynamic import (
    CLEANER,
    GROUP,
    KAFKA_ONLY,
    LISTENER_ONLY,
    LOG,
    METRICS,
    PER_BROKER,
    PRODUCER,
    QUOTA,
    REMOTE,
    SASL,
    SOCKET,
    SSL,
    THREADS,
    listener_settable,
)
from .types import LONG_MAX


def render_default(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if value == LONG_MAX:
        return "9223372036854775807 (Long.MAX)"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def broker_table() -> str:
    lines = ["| Key | Default | Meaning | Kafka |", "|---|---|---|---|"]
    for d in BROKER_CONFIGS:
        kafka = "same" if d.kafka == "same" else d.kafka
        lines.append(f"| `{d.name}` | `{_cell(render_default(d.default_value()))}` | "
                     f"{_cell(d.doc)} | {_cell(kafka)} |")
    return "\n".join(lines)


def topic_table() -> str:
    lines = ["| Topic key | Default | Broker synonym | Meaning |", "|---|---|---|---|"]
    for d, synonym in TOPIC_CONFIGS:
        syn = f"`{synonym}`" if synonym else "-"
        lines.append(f"| `{d.name}` | `{_cell(render_default(d.default_value()))}` | {syn} | "
                     f"{_cell(d.doc)} |")
    return "\n".join(lines)


_NO_EFFECT = {
    SSL: "no effect: Moldau has no TLS listeners",
    SASL: "no effect: Moldau has no SASL authentication",
    SOCKET: "no effect: Moldau has no such connection limit",
    THREADS: "no effect: one asyncio event loop serves requests",
    CLEANER: "no effect: Moldau's cleaner is not tuned by this key",
    LOG: "no effect: Moldau has no broker default for this topic setting",
    METRICS: "no effect: Moldau has no metrics reporters",
    PRODUCER: "no effect: Moldau does not verify transactional partitions",
    REMOTE: "no effect: Moldau has no tiered storage",
    QUOTA: "no effect: Moldau has no replication throttles",
}
# Keys Moldau defines but does not act on at all (the static value does nothing either).
_UNUSED = {
    "log.cleaner.backoff.ms": "no effect: Moldau's cleaner does not read it",
    "num.network.threads": "no effect: one asyncio event loop serves requests",
    "num.io.threads": "no effect: Moldau does not read it",
}


def _effect(name: str) -> str:
    """What a dynamic change of ``name`` does in Moldau."""
    topic_key = next((d.name for d, broker_key in TOPIC_CONFIGS if broker_key == name), None)
    if name in APPLIED_BROKER_CONFIGS and topic_key is not None:
        notes = (BROKER_BY_NAME[name].kafka, TOPIC_BY_NAME[topic_key].kafka)
        if any("no effect" in note for note in notes):
            return f"no effect (nor has `{topic_key}`)"
        return f"applied at once, as the default of topic key `{topic_key}`"
    if name in _UNUSED:
        return _UNUSED[name]
    if name in BROKER_BY_NAME:
        return "stored only: Moldau uses the value from server.properties, read at start"
    return _NO_EFFECT[GROUP[name]]


def _scope(name: str) -> str:
    if name in LISTENER_ONLY:
        return "one listener (`listener.name.<listener>.` prefix) only"
    if name in PER_BROKER:
        return "a broker id or one listener" if listener_settable(name) else "a broker id"
    if listener_settable(name):
        return "a broker id, the cluster default or one listener"
    return "a broker id or the cluster default"


def dynamic_table() -> str:
    """Kafka's dynamic broker keys: where each may be set, its default, its effect here."""
    lines = ["| Key | Set for | Default | In Moldau |", "|---|---|---|---|"]
    for name in sorted(GROUP):
        definition = BROKER_BY_NAME.get(name) or KAFKA_ONLY[name]
        default = definition.default_value()
        if definition.type == "password" or default is None:
            text = "null"
        elif default == LONG_MAX or isinstance(default, (bool, list)):
            text = render_default(default)
        else:
            text = render(definition, default) or '""'
        lines.append(f"| `{name}` | {_scope(name)} | `{_cell(text)}` | "
                     f"{_cell(_effect(name))} |")
    return "\n".join(lines)


BEGIN = "<!-- BEGIN GENERATED: python -m moldau.broker.config.docs -->"
END = "<!-- END GENERATED -->"


def generated_block() -> str:
    """The generated part of docs/configuration.md, markers included."""
    return (f"{BEGIN}\n## Broker keys\n\n{broker_table()}\n\n## Topic keys\n\n{topic_table()}"
            f"\n\n## Dynamic broker keys\n\n{dynamic_table()}\n{END}")


def rewrite(doc: str) -> str:
    """``doc`` with its generated block replaced by the current tables."""
    start, end = doc.index(BEGIN), doc.index(END) + len(END)
    return doc[:start] + generated_block() + doc[end:]


if __name__ == "__main__":
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "docs" / "configuration.md"
    path.write_text(rewrite(path.read_text()))
    print(f"rewrote the generated tables of {path}")
