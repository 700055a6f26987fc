"""Cluster mode's ZooKeeper side: Kafka's znode layout (``layout``, ``admin_layout``) and a
bridge from kazoo's threads to the broker's asyncio loop (``aio``).

docs/architecture.md ("ZooKeeper layout") lists every znode, who writes it and where Moldau
differs from Kafka.
"""
