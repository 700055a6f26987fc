"""Layer rules (docs/architecture.md): dependencies point one way.

protocol <- storage <- broker; protocol <- wire <- client <- cli/proxy/rest/registry/spark;
wire <- broker. Only moldau.cli.serve and moldau.testing may import moldau.broker.

``moldau.http`` (the one HTTP stack: aiohttp listeners, JSON errors, content negotiation)
imports nothing of moldau; the registry, the REST proxy and cli build on it.

``moldau.wire`` (outbound Kafka connections) is the one layer both the client and the broker
import: the broker opens connections to other brokers with it and never imports the client.

``moldau.devtools`` starts local ZooKeeper and ``moldau serve`` processes; ``moldau
dev-cluster`` (cli) and the test runners (testing) both need it, and cli may not import
testing, so the process runners live below both. It imports nothing of moldau but the
protocol's properties writer: brokers are child processes, never imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "moldau"

ALLOWED = {
    "protocol": {"protocol"},
    "storage": {"protocol", "storage"},
    "wire": {"protocol", "wire"},
    "broker": {"protocol", "storage", "wire", "broker"},
    "client": {"protocol", "wire", "client"},
    "proxy": {"protocol", "wire", "client", "proxy"},
    "http": {"http"},
    "rest": {"protocol", "wire", "client", "registry", "http", "rest"},
    "registry": {"protocol", "wire", "client", "http", "registry"},
    # spark decodes registry-framed Avro (value.format=avro) with the registry client
    "spark": {"protocol", "wire", "client", "registry", "spark"},
    "doctor": {"protocol", "wire", "client", "doctor"},
    "perf": {"protocol", "wire", "client", "perf"},
    "devtools": {"protocol", "devtools"},
    "cli": {"protocol", "wire", "client", "cli", "proxy", "rest", "registry", "http", "spark",
            "doctor", "perf", "devtools"},
    "testing": {"protocol", "wire", "client", "broker", "storage", "testing", "cli",
                "devtools"},
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


def test_the_broker_reaches_other_brokers_through_wire_only() -> None:
    """The broker's outbound connections are moldau.wire's, whose modules import nothing of
    moldau but the protocol (so the broker never loads the client: producer, consumer,
    cluster metadata, the synchronous facade), and the client's connection is the same one."""
    broker = _module_graph("moldau")
    reached = {target for module, targets in broker.items()
               if module.startswith("moldau.broker") for target in targets}
    assert not [t for t in reached if t.startswith("moldau.client")]
    assert "moldau.wire.connection" in broker["moldau.broker.metadata.forwarding"]
    for module, targets in broker.items():
        if module.startswith("moldau.wire"):
            outside = [t for t in targets if not t.startswith(("moldau.wire", "moldau.protocol"))]
            assert not outside, f"{module} imports {outside}"
    from moldau.client.connection import BrokerConnection
    from moldau.wire.connection import BrokerConnection as WireConnection

    assert issubclass(BrokerConnection, WireConnection)


# The group coordinator and the helpers that point back at it (STYLE.md, "Shapes that fight
# the next features" 2): the one cycle left, to be broken by the coordinator runtime. It may
# shrink; nothing may join it, and no other cycle may appear.
KNOWN_CYCLE = {f"moldau.broker.group.{name}" for name in (
    "admin", "classic_protocol", "classic_rebalance", "consumer_ops", "coordinator", "offsets")}


def _module_graph(prefix: str) -> dict[str, set[str]]:
    """Imports between modules under ``prefix``, including those under TYPE_CHECKING (a
    cycle hidden there is still a cycle of the design); ``from pkg import name`` counts as
    an import of ``pkg.name`` when that is a module, else of ``pkg``."""
    paths = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        if not module.startswith(prefix):
            continue
        targets = set()
        for target in _imports(path):
            while target and target not in paths:
                target = target.rpartition(".")[0]
            if target.startswith(prefix) and target != module:
                targets.add(target)
        graph[module] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_cycle_finder_sees_type_checking_imports() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [{"a", "b", "c"}]
    # imported under TYPE_CHECKING only
    assert "moldau.broker.group.coordinator" in _module_graph("moldau.broker.group")[
        "moldau.broker.group.offsets"]


def test_broker_modules_form_no_import_cycle() -> None:
    """Handlers and components get a narrow context (moldau/broker/context.py), so nothing
    in moldau.broker imports the server back, not even for type checking."""
    graph = _module_graph("moldau.broker")
    importers = sorted(m for m, targets in graph.items() if "moldau.broker.server" in targets)
    assert importers == []
    cycles = [c for c in _cycles(graph) if not c <= KNOWN_CYCLE]
    assert not cycles, "import cycles in moldau.broker: " + "; ".join(
        " <-> ".join(sorted(c)) for c in cycles)
