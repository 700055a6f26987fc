"""Every broker and topic configuration key Moldau understands, with Kafka's defaults.

Keys, defaults and meanings follow Apache Kafka's; ``kafka`` says where Moldau differs.
docs/configuration.md is checked against this table by a unit test so it cannot drift.
"""

from __future__ import annotations

from .types import INT_MAX, LONG_MAX, ConfigDef, at_least, between, one_of
from .zookeeper import check_connect

_PROTOCOL_MAP_DEFAULT = (
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
)

#: Defaults that differ on a broker of a ZooKeeper cluster (``zookeeper.connect`` set), as
#: raw strings: Kafka's ZooKeeper-mode brokers have no ``process.roles`` (an empty value is
#: what puts a Kafka node in ZooKeeper mode), while the single node runs both roles.
CLUSTER_MODE_DEFAULTS: dict[str, str] = {"process.roles": ""}

BROKER_CONFIGS: list[ConfigDef] = [
    # --- identity and roles -------------------------------------------------------------
    ConfigDef("node.id", "int", -1, "Id of this node; -1 means use broker.id, else 1.",
              kafka="Kafka requires it in KRaft mode; Moldau falls back to broker.id, then 1."),
    ConfigDef("broker.id", "int", -1,
              "ZooKeeper mode's name of node.id (KAFKA_BROKER_ID in Docker); setting both "
              "to different values is an error.", kafka="synonym of node.id"),
    ConfigDef("process.roles", "list", "broker,controller",
              "Roles of this process; a single node runs both. A broker of a ZooKeeper "
              "cluster (zookeeper.connect set) has none, and setting any there is an error.",
              [one_of("broker", "controller")],
              kafka="Kafka's default is empty, which means ZooKeeper mode; Moldau's mode "
                    "follows zookeeper.connect"),
    ConfigDef("cluster.id", "string", None,
              "Cluster id; generated and stored in meta.properties on first start when unset.",
              nullable=True, kafka="Kafka sets it with kafka-storage format"),
    ConfigDef("broker.rack", "string", None,
              "Rack of this broker, reported in metadata and registered in ZooKeeper; the "
              "controller spreads a partition's replicas over racks.", nullable=True),
    # --- cluster mode (ZooKeeper) ----------------------------------------------------------
    ConfigDef("zookeeper.connect", "string", None,
              "ZooKeeper servers host:port[,host:port...] with an optional chroot path "
              "(zk1:2181,zk2:2181/moldau; created when missing). Setting it makes this node "
              "a broker of a cluster coordinated by ZooKeeper; unset, it is a single node.",
              [check_connect], nullable=True),
    ConfigDef("zookeeper.session.timeout.ms", "int", 18000,
              "ZooKeeper session timeout: a broker that cannot reach ZooKeeper for this long "
              "loses its registration and stops leading partitions until it re-registers.",
              [at_least(1)]),
    ConfigDef("zookeeper.connection.timeout.ms", "int", None,
              "How long to wait for a connection to ZooKeeper at start-up before giving up; "
              "null means zookeeper.session.timeout.ms.", [at_least(1)], nullable=True),
    ConfigDef("controlled.shutdown.enable", "bool", True,
              "On SIGTERM, ask the controller to move leadership off this broker "
              "(ControlledShutdown) before closing (cluster mode)."),
    ConfigDef("controlled.shutdown.max.retries", "int", 3,
              "Attempts at a controlled shutdown before the broker closes anyway.",
              [at_least(0)]),
    ConfigDef("controlled.shutdown.retry.backoff.ms", "long", 5000,
              "Wait between controlled shutdown attempts.", [at_least(0)]),
    # --- preferred leaders (the controller's automatic rebalance) -------------------------
    ConfigDef("auto.leader.rebalance.enable", "bool", True,
              "The active controller gives partitions back to their preferred replica (the "
              "first of the assignment) when a broker's share of preferred partitions it "
              "does not lead is over leader.imbalance.per.broker.percentage (cluster mode)."),
    ConfigDef("leader.imbalance.check.interval.seconds", "long", 300,
              "How often the active controller checks the leader imbalance.", [at_least(1)]),
    ConfigDef("leader.imbalance.per.broker.percentage", "int", 10,
              "Percentage of a broker's preferred partitions that may be led elsewhere "
              "before the controller elects the preferred leaders again.", [at_least(0)]),
    # --- listeners -------------------------------------------------------------------------
    ConfigDef("listeners", "string", "PLAINTEXT://:9092",
              "Comma-separated NAME://host:port listeners to bind. Empty host binds all "
              "interfaces; 0.0.0.0 too."),
    ConfigDef("advertised.listeners", "string", None,
              "Addresses handed to clients in metadata, per listener name. Defaults to "
              "listeners (an empty host becomes the canonical host name).", nullable=True),
    ConfigDef("listener.security.protocol.map", "string", _PROTOCOL_MAP_DEFAULT,
              "Listener name to security protocol."),
    ConfigDef("inter.broker.listener.name", "string", None,
              "Listener other brokers use; defaults to the one for "
              "security.inter.broker.protocol.", nullable=True),
    ConfigDef("security.inter.broker.protocol", "string", "PLAINTEXT",
              "Security protocol between brokers when inter.broker.listener.name is unset.",
              [one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")]),
    ConfigDef("controller.listener.names", "list", "",
              "Listener names used by controllers (KRaft).", kafka="accepted; single node"),
    ConfigDef("controller.quorum.voters", "list", "",
              "Controller quorum voters id@host:port.", kafka="accepted; single node"),
    # --- log storage -------------------------------------------------------------------
    ConfigDef("log.dirs", "list", None, "Directories holding partition logs.", nullable=True),
    ConfigDef("log.dir", "string", "/tmp/kafka-logs", "Log directory when log.dirs is unset."),
    ConfigDef("num.partitions", "int", 1, "Partitions of an auto-created topic.",
              [at_least(1)]),
    ConfigDef("default.replication.factor", "int", 1,
              "Replication factor of auto-created topics.", [at_least(1)]),
    ConfigDef("auto.create.topics.enable", "bool", True,
              "Create a topic when a client asks for metadata of an unknown one."),
    ConfigDef("delete.topic.enable", "bool", True, "Allow DeleteTopics."),
    ConfigDef("log.segment.bytes", "int", 1073741824, "Maximum size of one segment file.",
              [at_least(14)]),
    ConfigDef("log.roll.ms", "long", None, "Roll a segment after this age (overrides hours).",
              [at_least(1)], nullable=True),
    ConfigDef("log.roll.hours", "int", 168, "Roll a segment after this age.", [at_least(1)]),
    ConfigDef("log.roll.jitter.ms", "long", None, "Random jitter subtracted from roll age.",
              [at_least(0)], nullable=True),
    ConfigDef("log.roll.jitter.hours", "int", 0, "Random jitter subtracted from roll age.",
              [at_least(0)]),
    ConfigDef("log.retention.ms", "long", None,
              "Delete segments older than this; -1 keeps forever (overrides minutes/hours).",
              nullable=True),
    ConfigDef("log.retention.minutes", "int", None, "Retention in minutes (overrides hours).",
              nullable=True),
    ConfigDef("log.retention.hours", "int", 168, "Retention in hours."),
    ConfigDef("log.retention.bytes", "long", -1,
              "Delete oldest segments while a partition is larger; -1 for no limit."),
    ConfigDef("log.retention.check.interval.ms", "long", 300000,
              "How often retention runs.", [at_least(1)]),
    ConfigDef("log.segment.delete.delay.ms", "long", 60000,
              "Delay before a deleted segment's files are removed.", [at_least(0)]),
    ConfigDef("log.index.interval.bytes", "int", 4096,
              "Bytes between offset-index entries.", [at_least(0)]),
    ConfigDef("log.index.size.max.bytes", "int", 10485760,
              "Maximum size of an offset index; a full index rolls the segment.", [at_least(4)]),
    ConfigDef("log.flush.interval.messages", "long", LONG_MAX,
              "fsync a partition after this many messages.", [at_least(1)]),
    ConfigDef("log.flush.interval.ms", "long", None,
              "fsync a partition when its oldest unflushed message is this old.",
              [at_least(0)], nullable=True),
    ConfigDef("log.flush.scheduler.interval.ms", "long", LONG_MAX,
              "How often the flusher checks log.flush.interval.ms.", [at_least(1)]),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", 60000,
              "How often the recovery point checkpoint is written.", [at_least(1)]),
    ConfigDef("log.cleanup.policy", "list", "delete", "delete and/or compact.",
              [one_of("delete", "compact")]),
    ConfigDef("log.cleaner.enable", "bool", True, "Run the log cleaner for compacted topics."),
    ConfigDef("log.cleaner.backoff.ms", "long", 15000, "Cleaner sleep when idle.",
              [at_least(0)]),
    ConfigDef("log.cleaner.min.cleanable.ratio", "double", 0.5,
              "Dirty ratio that makes a log eligible for cleaning.", [between(0, 1)]),
    ConfigDef("log.cleaner.delete.retention.ms", "long", 86400000,
              "How long tombstones are kept.", [at_least(0)]),
    ConfigDef("log.cleaner.min.compaction.lag.ms", "long", 0,
              "Minimum age before a record may be compacted.", [at_least(0)]),
    ConfigDef("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX,
              "Maximum time a record stays uncompacted.", [at_least(1)]),
    ConfigDef("log.message.timestamp.type", "string", "CreateTime",
              "CreateTime or LogAppendTime.", [one_of("CreateTime", "LogAppendTime")]),
    ConfigDef("log.preallocate", "bool", False, "Preallocate segment files.",
              kafka="accepted, no effect"),
    ConfigDef("compression.type", "string", "producer",
              "Final compression of stored batches; 'producer' keeps what the producer sent.",
              [one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")]),
    ConfigDef("message.max.bytes", "int", 1048588,
              "Largest record batch the broker accepts.", [at_least(0)]),
    ConfigDef("min.insync.replicas", "int", 1,
              "Replicas that must acknowledge an acks=all produce.", [at_least(1)]),
    ConfigDef("unclean.leader.election.enable", "bool", False,
              "Allow an out-of-sync replica to become leader, losing data."),
    ConfigDef("replica.lag.time.max.ms", "long", 30000,
              "A follower that has not caught up for this long leaves the ISR.", [at_least(0)]),
    ConfigDef("num.recovery.threads.per.data.dir", "int", 2,
              "Threads used to recover logs at start-up.", [at_least(1)]),
    # --- network -----------------------------------------------------------------------
    ConfigDef("socket.request.max.bytes", "int", 104857600,
              "Largest request frame; larger frames close the connection. Memory follows the "
              "bytes that arrive, not the size a frame announces.", [at_least(1)]),
    ConfigDef("socket.send.buffer.bytes", "int", 102400, "SO_SNDBUF; -1 for the OS default."),
    ConfigDef("socket.receive.buffer.bytes", "int", 102400,
              "SO_RCVBUF; -1 for the OS default."),
    ConfigDef("connections.max.idle.ms", "long", 600000,
              "Close connections that have sent and received nothing for this long; one "
              "waiting for an answer (long-poll fetch, group join) is not idle.",
              [at_least(1)]),
    ConfigDef("max.connections", "int", INT_MAX,
              "Most client connections the broker keeps open; beyond it a new connection is "
              "closed as soon as it is accepted (with a warning in the log).", [at_least(0)],
              kafka="Kafka leaves new connections waiting in the accept backlog instead; "
                    "listener.name.*.max.connections is not supported"),
    ConfigDef("queued.max.requests", "int", 500,
              "Requests read ahead per connection before reading pauses.", [at_least(1)],
              kafka="per connection; Kafka's bounds the broker-wide request queue"),
    ConfigDef("queued.max.request.bytes", "long", 104857600,
              "Memory for requests being received, queued or handled, broker-wide; when it is "
              "used up the broker stops reading from sockets until requests finish. -1 (or "
              "0) for no limit. Bounded by default so that clients, hostile or not, cannot "
              "make the broker hold more than about twice this (one request may exceed it "
              "so that the largest allowed request always gets through).",
              kafka="Kafka's default is -1 (no limit; the JVM heap is the bound)"),
    ConfigDef("num.network.threads", "int", 3, "Network threads.",
              kafka="accepted, no effect: one asyncio loop"),
    ConfigDef("num.io.threads", "int", 8, "I/O threads.",
              kafka="accepted; sizes the blocking-disk thread pool"),
    ConfigDef("fetch.max.bytes", "int", 57671680,
              "Most bytes a fetch response returns.", [at_least(1024)]),
    # --- replication (followers fetching from leaders) -------------------------------------
    ConfigDef("num.replica.fetchers", "int", 1,
              "Fetcher tasks per source broker: a follower's partitions led by one broker are "
              "spread over this many connections to it (by a hash of the partition).",
              [at_least(1)], kafka="asyncio tasks on the broker's event loop, not threads"),
    ConfigDef("replica.fetch.max.bytes", "int", 1048576,
              "Bytes a follower asks for per partition in one fetch (at least one batch "
              "comes back even when it is larger).", [at_least(0)]),
    ConfigDef("replica.fetch.response.max.bytes", "int", 10485760,
              "Bytes a follower asks for in one whole fetch response (at least one batch).",
              [at_least(0)]),
    ConfigDef("replica.fetch.wait.max.ms", "int", 500,
              "How long the leader may hold a follower's fetch when it has less than "
              "replica.fetch.min.bytes to send; keep it below replica.lag.time.max.ms.",
              [at_least(0)]),
    ConfigDef("replica.fetch.min.bytes", "int", 1,
              "Bytes the leader waits for (up to replica.fetch.wait.max.ms) before answering "
              "a follower's fetch.", [at_least(1)]),
    ConfigDef("replica.fetch.backoff.ms", "int", 1000,
              "Pause of a follower's fetcher after a fetch to a leader failed.",
              [at_least(0)]),
    ConfigDef("replica.socket.timeout.ms", "int", 30000,
              "How long a follower waits for an answer to a fetch before it closes the "
              "connection and backs off.", [at_least(1)]),
    # --- fetch from the closest replica (KIP-392) -----------------------------------------
    ConfigDef("replica.selector.class", "string", None,
              "How a partition leader picks the replica a consumer should read from (the "
              "Fetch answer's preferred_read_replica); null: always the leader. "
              "org.apache.kafka.common.replica.RackAwareReplicaSelector (or rack-aware): an "
              "in-sync replica whose broker.rack is the consumer's client.rack (the leader "
              "when it is in that rack). Followers serve consumers' fetches (v11+) up to "
              "their high watermark whatever this says.",
              [one_of("org.apache.kafka.common.replica.RackAwareReplicaSelector",
                      "rack-aware", case_sensitive=True)],
              nullable=True,
              kafka="a class name: only Kafka's RackAwareReplicaSelector (or Moldau's short "
                    "name rack-aware) is accepted; other classes are a config error"),
    # --- groups and offsets ---------------------------------------------------------------
    ConfigDef("offsets.topic.num.partitions", "int", 50,
              "Partitions of __consumer_offsets.", [at_least(1)]),
    ConfigDef("offsets.topic.replication.factor", "int", 3,
              "Replication factor of __consumer_offsets (capped at the live brokers).",
              [at_least(1)], kafka="Kafka fails creation until enough brokers exist"),
    ConfigDef("offsets.topic.segment.bytes", "int", 104857600,
              "Segment size of __consumer_offsets.", [at_least(1)]),
    ConfigDef("offsets.commit.timeout.ms", "int", 5000,
              "How long the group coordinator waits for an offset commit or group change to "
              "reach every in-sync replica of __consumer_offsets (acks=all) before it "
              "answers COORDINATOR_NOT_AVAILABLE.", [at_least(1)]),
    ConfigDef("offsets.retention.minutes", "int", 10080,
              "Committed offsets of empty groups expire after this.", [at_least(1)]),
    ConfigDef("offsets.retention.check.interval.ms", "long", 600000,
              "How often expired offsets are removed.", [at_least(1)]),
    ConfigDef("offset.metadata.max.bytes", "int", 4096,
              "Largest metadata string of a committed offset."),
    ConfigDef("group.initial.rebalance.delay.ms", "int", 3000,
              "Wait for more members before the first rebalance of a new group."),
    ConfigDef("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout allowed."),
    ConfigDef("group.max.session.timeout.ms", "int", 1800000,
              "Largest session timeout allowed."),
    ConfigDef("group.max.size", "int", 2147483647, "Most members of a classic group.",
              [at_least(1)]),
    ConfigDef("group.coordinator.rebalance.protocols", "list", "classic,consumer",
              "Group protocols enabled.", [one_of("classic", "consumer", "share", "streams")]),
    ConfigDef("group.consumer.heartbeat.interval.ms", "int", 5000,
              "Heartbeat interval of KIP-848 consumer groups.", [at_least(1)]),
    ConfigDef("group.consumer.session.timeout.ms", "int", 45000,
              "Session timeout of KIP-848 consumer groups.", [at_least(1)]),
    ConfigDef("group.consumer.max.size", "int", 2147483647,
              "Most members of a consumer group.", [at_least(1)]),
    ConfigDef("group.consumer.assignors", "list", "uniform,range",
              "Server-side assignors of KIP-848 groups.",
              kafka="Kafka takes class names; Moldau takes uniform and range"),
    # --- transactions and producers -----------------------------------------------------
    ConfigDef("transactional.id.expiration.ms", "int", 604800000,
              "Expire idle transactional ids.", [at_least(1)]),
    ConfigDef("producer.id.expiration.ms", "int", 86400000,
              "Forget idle producer ids after this.", [at_least(1)]),
    ConfigDef("transaction.state.log.num.partitions", "int", 50,
              "Partitions of __transaction_state.", [at_least(1)]),
    ConfigDef("transaction.state.log.replication.factor", "int", 3,
              "Replication factor of __transaction_state.", [at_least(1)]),
    ConfigDef("transaction.state.log.min.isr", "int", 2,
              "min.insync.replicas of __transaction_state.", [at_least(1)]),
    ConfigDef("transaction.max.timeout.ms", "int", 900000,
              "Largest transaction timeout.", [at_least(1)]),
    # --- transaction coordinator (issue 14) ---------------------------------------------
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000,
              "How often the coordinator aborts transactions older than their timeout.",
              [at_least(1)]),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000,
              "How often idle transactional ids past transactional.id.expiration.ms are "
              "removed.", [at_least(1)]),
    ConfigDef("transaction.state.log.segment.bytes", "int", 104857600,
              "segment.bytes of __transaction_state.", [at_least(1)]),
    ConfigDef("transaction.state.log.load.buffer.size", "int", 5242880,
              "Accepted for Kafka compatibility; loading reads batch by batch.",
              [at_least(1)]),
    ConfigDef("transaction.partition.verification.enable", "bool", True,
              "Leaders verify with the coordinator before a transaction's first write to a "
              "partition (KIP-890)."),
    ConfigDef("producer.id.expiration.check.interval.ms", "int", 600000,
              "How often idle producer ids past producer.id.expiration.ms are forgotten.",
              [at_least(1)]),
    # --- services run in the broker process ------------------------------------------------
    ConfigDef("schema.registry.listeners", "string", None,
              "Set (http://HOST:PORT[,...]) to run a schema registry (Confluent's API, "
              "moldau.registry) in this process; it stores its schemas in the _schemas "
              "topic through this broker's first listener. `make run` sets "
              "http://localhost:8081. Unset: no registry (run `moldau schema-registry`).",
              nullable=True, kafka="Moldau's own: Kafka has no schema registry"),
    ConfigDef("rest.proxy.listeners", "string", None,
              "Set (http://HOST:PORT[,...]) to run a REST Proxy (Confluent's API v2 and v3, "
              "moldau.rest) in this process, its Kafka clients connected to this broker's "
              "first listener and its schema.registry.url the in-process registry's when "
              "schema.registry.listeners is set. `make run` sets http://localhost:8082. "
              "Unset: no proxy (run `moldau rest-proxy`).",
              nullable=True, kafka="Moldau's own: Kafka has no REST proxy"),
]


# Topic-level keys, each with the broker key that supplies its default (Kafka's synonyms).
TOPIC_CONFIGS: list[tuple[ConfigDef, str | None]] = [
    (ConfigDef("cleanup.policy", "list", "delete", "delete and/or compact.",
               [one_of("delete", "compact")]), "log.cleanup.policy"),
    (ConfigDef("compression.type", "string", "producer", "Final compression of batches.",
               [one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")]),
     "compression.type"),
    (ConfigDef("delete.retention.ms", "long", 86400000, "How long tombstones are kept.",
               [at_least(0)]), "log.cleaner.delete.retention.ms"),
    (ConfigDef("file.delete.delay.ms", "long", 60000, "Delay before deleting files.",
               [at_least(0)]), "log.segment.delete.delay.ms"),
    (ConfigDef("flush.messages", "long", LONG_MAX, "fsync after this many messages.",
               [at_least(1)]), "log.flush.interval.messages"),
    (ConfigDef("flush.ms", "long", LONG_MAX, "fsync after this much time.", [at_least(0)]),
     "log.flush.interval.ms"),
    (ConfigDef("index.interval.bytes", "int", 4096, "Bytes between index entries.",
               [at_least(0)]), "log.index.interval.bytes"),
    (ConfigDef("max.compaction.lag.ms", "long", LONG_MAX, "Maximum uncompacted age.",
               [at_least(1)]), "log.cleaner.max.compaction.lag.ms"),
    (ConfigDef("max.message.bytes", "int", 1048588, "Largest record batch.", [at_least(0)]),
     "message.max.bytes"),
    (ConfigDef("message.timestamp.type", "string", "CreateTime",
               "CreateTime or LogAppendTime.", [one_of("CreateTime", "LogAppendTime")]),
     "log.message.timestamp.type"),
    (ConfigDef("min.cleanable.dirty.ratio", "double", 0.5, "Dirty ratio to clean.",
               [between(0, 1)]), "log.cleaner.min.cleanable.ratio"),
    (ConfigDef("min.compaction.lag.ms", "long", 0, "Minimum age before compaction.",
               [at_least(0)]), "log.cleaner.min.compaction.lag.ms"),
    (ConfigDef("min.insync.replicas", "int", 1, "Replicas an acks=all produce needs.",
               [at_least(1)]), "min.insync.replicas"),
    (ConfigDef("preallocate", "bool", False, "Preallocate segment files."), "log.preallocate"),
    (ConfigDef("retention.bytes", "long", -1, "Size limit per partition; -1 unlimited."),
     "log.retention.bytes"),
    (ConfigDef("retention.ms", "long", 604800000, "Time limit; -1 unlimited."),
     "log.retention.ms"),
    (ConfigDef("segment.bytes", "int", 1073741824, "Segment size.", [at_least(14)]),
     "log.segment.bytes"),
    (ConfigDef("segment.index.bytes", "int", 10485760, "Offset index size.", [at_least(4)]),
     "log.index.size.max.bytes"),
    (ConfigDef("segment.jitter.ms", "long", 0, "Roll jitter.", [at_least(0)]),
     "log.roll.jitter.ms"),
    (ConfigDef("segment.ms", "long", 604800000, "Roll segments after this age.",
               [at_least(1)]), "log.roll.ms"),
    (ConfigDef("unclean.leader.election.enable", "bool", False,
               "Allow unclean leader election."), "unclean.leader.election.enable"),
    (ConfigDef("message.timestamp.before.max.ms", "long", LONG_MAX,
               "Reject records whose timestamp is older than this.", [at_least(0)]), None),
    (ConfigDef("message.timestamp.after.max.ms", "long", LONG_MAX,
               "Reject records whose timestamp is further in the future than this.",
               [at_least(0)]), None),
]

BROKER_BY_NAME = {d.name: d for d in BROKER_CONFIGS}
TOPIC_BY_NAME = {d.name: d for d, _ in TOPIC_CONFIGS}
TOPIC_SYNONYM = {d.name: broker_key for d, broker_key in TOPIC_CONFIGS}
