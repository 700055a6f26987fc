"""Render the configuration tables of docs/configuration.md from the definitions.

``python -m moldau.broker.config.docs`` prints the two tables (broker keys, topic keys);
tests/unit/broker/test_config_docs.py checks the document carries every key and default.
"""

from __future__ import annotations

from typing import Any

from .definitions import BROKER_CONFIGS, TOPIC_CONFIGS
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


if __name__ == "__main__":
    print("## Broker keys\n")
    print(broker_table())
    print("\n## Topic keys\n")
    print(topic_table())
