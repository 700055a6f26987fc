"""Local processes for people and tests: ZooKeeper, ``moldau serve`` brokers, a whole cluster.

``moldau dev-cluster`` (moldau/cli) and the test runners (moldau/testing) both start real
ZooKeeper and broker processes on this machine; the code that does it lives here so the CLI
need not import the test package. Nothing here imports the broker: brokers are child
processes (``python -m moldau.cli.main serve``), talked to only through their log lines and
their ZooKeeper registrations.
"""
