"""Child processes of tests and benchmarks: the helpers live in
:mod:`moldau.devtools.processes` (``moldau dev-cluster`` uses them too)."""

from __future__ import annotations

from ..devtools.processes import child_env, closed_port, free_port, free_ports, kill, terminate

__all__ = ["child_env", "closed_port", "free_port", "free_ports", "kill", "terminate"]
