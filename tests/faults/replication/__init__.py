"""The replication fault suite (issue 13): real ZooKeeper ensemble, real brokers, real
clients, real faults, and a checker that can fail. Layout: :mod:`.history` (the JSONL
history), :mod:`.checker` (pure), :mod:`.workload` (producers, consumers, final read),
:mod:`.nemesis` (fault kinds), :mod:`.netlab` (brokers in network namespaces, for the
network partition), :mod:`.runner` (``python -m tests.faults.replication``). How to run it
and what it reports: docs/operations.md, "Fault suite"."""
