"""The ``partition-leader`` fault's network (tests/faults/replication/netlab.py), inside a
private namespace (``@netlab``, SAFETY RULE): each "broker" namespace reaches the others and
the runner's namespace; isolating one drops its traffic with the other brokers, both ways,
and nothing else; healing restores it. A short run with ``--netns`` then shows the fault
inside the real suite."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from tests.faults.replication.netlab import FaultLab
from tests.faults.replication.runner import RunConfig, run
from tests.net.lab import netlab

# A fixed port is safe here: it is bound only inside the lab's own network namespaces (lab
# addresses 10.77.0.x that exist nowhere else), never on the host's loopback.
PORT = 9092
CONNECT = ("import socket, sys\n"
           "socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close()\n")


def reaches(lab: FaultLab, source: int | None, target: int) -> bool:
    """Whether a TCP connect from broker ``source``'s namespace (None: the runner's own)
    to broker ``target``'s listener succeeds."""
    argv = [sys.executable, "-c", CONNECT, lab.broker_host(target), str(PORT)]
    if source is None:
        import subprocess

        return subprocess.run(argv, capture_output=True, timeout=30).returncode == 0
    return lab.namespaces[source].run(argv, timeout=30).returncode == 0


@netlab
def test_isolating_a_broker_cuts_it_off_from_the_other_brokers_only(tmp_path: Path) -> None:
    lab = FaultLab(3, tmp_path / "lab")
    try:
        for i, ns in lab.namespaces.items():
            ns.spawn([sys.executable, "-m", "http.server", str(PORT), "--bind",
                      lab.broker_host(i)])
        deadline = time.monotonic() + 30
        while not all(reaches(lab, None, i) for i in lab.namespaces):
            assert time.monotonic() < deadline, "lab listeners not reachable"
            time.sleep(0.2)
        assert reaches(lab, 1, 2) and reaches(lab, 2, 1)

        assert lab.isolate(1) == [lab.broker_host(2), lab.broker_host(3)]
        assert not reaches(lab, 1, 2) and not reaches(lab, 1, 3)
        assert not reaches(lab, 2, 1) and not reaches(lab, 3, 1)
        assert reaches(lab, 2, 3) and reaches(lab, 3, 2)
        assert reaches(lab, None, 1)  # clients and ZooKeeper still reach it

        lab.heal(1)
        assert reaches(lab, 1, 2) and reaches(lab, 3, 1)
    finally:
        lab.close()


@netlab
def test_a_short_run_with_the_leader_partitioned_loses_nothing(tmp_path: Path) -> None:
    config = RunConfig(seed=13, rounds=2, duration=5.0, quiet=1.0,
                       faults=("partition-leader",), replication_factor=3, min_insync=2,
                       rate=40.0,
                       netns=True, out=tmp_path / "run")
    result = run(config, log=lambda line: print(line, flush=True))
    assert result.harness_error is None, result.harness_error
    assert result.report.valid, result.report.summary_line()
    assert result.report.stats["acknowledged"] > 100
