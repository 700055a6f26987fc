"""The broker's start-up line is read by one parser (:func:`moldau.devtools.brokers.
parse_started`), shared by the test runner (:class:`moldau.testing.runner.BrokerProcess`) and
the local cluster's nodes (:class:`moldau.devtools.brokers.BrokerNode`), which had a copy of
the regular expression each."""

from __future__ import annotations

import moldau.testing.runner as runner
from moldau.devtools.brokers import parse_started


def test_the_start_up_line_gives_the_cluster_id_and_every_bound_port() -> None:
    # as moldau/broker/server.py logs it, behind the log format's prefix
    line = ("2026-11-24 20:00:00,001 INFO moldau.broker.server: [MoldauServer id=2] started "
            "(cluster id Ab-Cd_12); listening on PLAINTEXT://127.0.0.1:45678, "
            "CONNECTIONS_FROM_HOST://localhost:45679, IPV6://[::1]:45680")
    assert parse_started(line) == ("Ab-Cd_12", {"PLAINTEXT": 45678,
                                                "CONNECTIONS_FROM_HOST": 45679,
                                                "IPV6": 45680})


def test_other_lines_are_not_the_start_up_line() -> None:
    assert parse_started("INFO loading partitions") is None
    assert parse_started("started (cluster id x); listening on ") is None


def test_the_test_runner_reads_it_with_the_same_parser() -> None:
    assert runner.parse_started is parse_started
    assert not [name for name, value in vars(runner).items()
                if name != "parse_started" and "STARTED" in name.upper()]
