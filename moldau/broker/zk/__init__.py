"""Cluster mode's ZooKeeper side.

- ``layout``, ``admin_layout``: Kafka's znode layout as data (paths and JSON formats);
- ``aio``: kazoo from the broker's asyncio loop (awaitable operations, watches on the loop);
- ``store``: the controller's ``MetadataStore`` — each batch of records as one multi-op fenced
  by ``/controller_epoch``'s version;
- ``snapshot``: znodes decoded into the cluster state, and diffed against an image as records;
- ``sync``: every broker's image kept equal to ZooKeeper by watches;
- ``election``: the controller election (ephemeral ``/controller``, epoch bump);
- ``cluster_controller``: ``ZkMetadataPlane``, the entry point a broker wires in (sync +
  election + the controller's reactions to brokers leaving and joining).

docs/architecture.md ("ZooKeeper layout" and "Cluster metadata on ZooKeeper") lists every
znode, who writes it, how records map to znodes and where Moldau differs from Kafka.
"""
