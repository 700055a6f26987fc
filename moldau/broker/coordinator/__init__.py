"""The coordinator runtime shared by the group and the transaction coordinators.

A coordinator owns the partitions of one internal topic (``__consumer_offsets``,
``__transaction_state``) that this broker leads. Its state is the replay of the records of
those partitions: :class:`.runtime.CoordinatorRuntime` loads a partition into a shard when the
broker becomes its leader, writes every change to the log before the shard replays it, and
unloads the shard when leadership moves (Kafka's ``CoordinatorRuntime`` / ``CoordinatorShard``).
"""
