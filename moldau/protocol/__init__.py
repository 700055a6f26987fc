"""Sans-I/O Kafka wire protocol: framing, headers, message codecs, errors, record batches.

This package imports nothing else from moldau, so the broker, the client and the proxy can all
build on it.
"""
