"""Layer rules (docs/architecture.md): dependencies point one way.

protocol <- storage <- broker; protocol <- client <- cli/proxy/rest/registry/spark.
Only moldau.cli.serve and moldau.testing may import moldau.broker.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "moldau"

ALLOWED = {
    "protocol": {"protocol"},
    "storage": {"protocol", "storage"},
    "broker": {"protocol", "storage", "broker"},
    "client": {"protocol", "client"},
    "proxy": {"protocol", "client", "proxy"},
    "rest": {"protocol", "client", "registry", "rest"},
    "registry": {"protocol", "client", "registry"},
    "spark": {"protocol", "client", "spark"},
    "doctor": {"protocol", "client", "doctor"},
    "perf": {"protocol", "client", "perf"},
    "cli": {"protocol", "client", "cli", "proxy", "rest", "registry", "spark", "doctor",
            "perf"},
    "testing": {"protocol", "client", "broker", "storage", "testing", "cli"},
}
BROKER_IMPORTERS = {"moldau.cli.serve"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
    return {name for name in found if name == "moldau" or name.startswith("moldau.")}


def test_layers_point_one_way() -> None:
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        parts = module.split(".")
        if len(parts) < 2:
            continue
        layer = parts[1]
        allowed = ALLOWED.get(layer)
        for target in _imports(path):
            tparts = target.split(".")
            if len(tparts) < 2:
                continue
            tlayer = tparts[1]
            if tlayer == "broker" and layer not in ("broker", "testing"):
                if module not in BROKER_IMPORTERS:
                    problems.append(f"{module} imports {target} (only cli.serve and testing may)")
            elif allowed is not None and tlayer not in allowed and tlayer not in (
                    "__version__", "__main__"):
                problems.append(f"{module} ({layer}) imports {target} ({tlayer})")
    assert not problems, "\n".join(problems)
