"""The broker: asyncio server, request dispatch, one handler per API, partitions, coordinators.

Only ``moldau.cli.serve`` and ``moldau.testing`` may import this package.
"""
