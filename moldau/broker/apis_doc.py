"""Render the table of served APIs for docs/compatibility.md from the handler registry.

``python -m moldau.broker.apis_doc`` prints it; tests/unit/broker/test_compat_docs.py checks
the document carries it, so the documented versions are the ones ApiVersions advertises.
"""

from __future__ import annotations

from ..protocol.api_keys import api_name
from .dispatch import load_handlers
from .handlers.api_versions import advertised_min


def api_table() -> str:
    lines = ["| Key | API | Versions served | Advertised | Handler |", "|---|---|---|---|---|"]
    for key, spec in sorted(load_handlers().items()):
        name = "".join(part.title() for part in api_name(key).split("_"))
        advertised = f"{advertised_min(key)}-{spec.max_version}"
        handler_file = spec.fn.__module__.replace(".", "/") + ".py"
        lines.append(f"| {key} | {name} | {spec.min_version}-{spec.max_version} | "
                     f"{advertised} | `{handler_file}` |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(api_table())
