"""Outbound Kafka connections, shared by the client and the broker.

One TCP connection to one Kafka broker (:mod:`.connection`): connect, the ApiVersions
handshake with the KIP-511 fallback (:mod:`.versions`), requests pipelined and answered in
order by correlation id, per-request timeouts that close the connection, and errors that name
the address and the cause (:mod:`.errors`). :mod:`moldau.client` builds its connections on it;
the broker opens its connections to other brokers (controller requests, and later replica
fetchers and transaction markers) with it, which is why it is its own layer: it imports only
:mod:`moldau.protocol`, and both the client and the broker may import it
(``tests/unit/test_layers.py``; docs/architecture.md, "Inter-broker connections").
"""
