"""Kafka's dynamic broker configs, as data: every name AlterConfigs may set on a BROKER resource.

Source: Apache Kafka's ``DynamicBrokerConfig.AllDynamicConfigs`` (apache/kafka trunk at
1eb7644, 2024-10-25, the 4.0 line) — ``SslConfigs.RECONFIGURABLE_CONFIGS``,
``LogCleaner.ReconfigurableConfigs``, ``DynamicLogConfig.ReconfigurableConfigs`` (the first
broker synonym of each topic config but ``message.format.version``),
``DynamicThreadPool``, ``metric.reporters``, ``DynamicListenerConfig``, ``SocketServer``,
the producer-state and remote-log sets — plus the broker quota configs that exist only
dynamically (``QuotaConfig.brokerQuotaConfigs``). Kafka's own rules about them, kept here:

* ``listener.name.<listener>.<config>`` sets ``<config>`` for one listener; SASL
  mechanism configs take the mechanism too (``listener.name.<l>.<mechanism>.sasl.jaas.config``).
* The SSL key/trust store configs can be set per listener only (with the prefix).
* The SSL/SASL/listener configs are per-broker: the cluster-wide default (resource name "")
  refuses them, except ``max.connections``, ``max.connection.creation.rate`` and
  ``num.network.threads``.

Keys Moldau already defines (:data:`~.definitions.BROKER_BY_NAME`) keep Moldau's definition;
the others are defined here with Kafka's type and default, so values are checked as Kafka
checks their type. Which of them change anything in Moldau is rendered into
docs/configuration.md by :mod:`.docs` (most do nothing: there is no TLS, SASL, quota, remote
storage or thread pool to reconfigure).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Mapping

from .definitions import BROKER_BY_NAME
from .types import INT_MAX, LONG_MAX, ConfigDef, at_least, between

_SHORT = between(-(2**15), 2**15 - 1)
DOUBLE_MAX = 1.7976931348623157e308

# Groups (for the documentation table and the reason a key has no effect in Moldau).
SSL, SASL, LISTENER, SOCKET, THREADS, CLEANER, LOG, METRICS, PRODUCER, REMOTE, QUOTA = (
    "ssl", "sasl", "listeners", "connections", "threads", "log cleaner", "log", "metrics",
    "producer state", "remote storage", "replication quota")

# Kafka's dynamic broker configs that Moldau does not define otherwise: name -> (definition,
# group). Types and defaults as Kafka's KafkaConfig defines them.
_KAFKA_ONLY: list[tuple[ConfigDef, str]] = [
    # --- SslConfigs.RECONFIGURABLE_CONFIGS (per listener only) and other listener SSL configs
    (ConfigDef("ssl.keystore.type", "string", "JKS", "Key store file format."), SSL),
    (ConfigDef("ssl.keystore.location", "string", None, "Key store file path.",
               nullable=True), SSL),
    (ConfigDef("ssl.keystore.password", "password", None, "Key store password.",
               nullable=True), SSL),
    (ConfigDef("ssl.key.password", "password", None, "Private key password.",
               nullable=True), SSL),
    (ConfigDef("ssl.keystore.certificate.chain", "password", None,
               "Certificate chain in PEM format.", nullable=True), SSL),
    (ConfigDef("ssl.keystore.key", "password", None, "Private key in PEM format.",
               nullable=True), SSL),
    (ConfigDef("ssl.truststore.type", "string", "JKS", "Trust store file format."), SSL),
    (ConfigDef("ssl.truststore.location", "string", None, "Trust store file path.",
               nullable=True), SSL),
    (ConfigDef("ssl.truststore.password", "password", None, "Trust store password.",
               nullable=True), SSL),
    (ConfigDef("ssl.truststore.certificates", "password", None,
               "Trusted certificates in PEM format.", nullable=True), SSL),
    (ConfigDef("ssl.protocol", "string", "TLSv1.3", "TLS protocol of the SSL context."), SSL),
    (ConfigDef("ssl.provider", "string", None, "Security provider of the SSL context.",
               nullable=True), SSL),
    (ConfigDef("ssl.cipher.suites", "list", "", "Enabled cipher suites."), SSL),
    (ConfigDef("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", "Enabled TLS protocols."),
     SSL),
    (ConfigDef("ssl.keymanager.algorithm", "string", "SunX509",
               "Key manager factory algorithm (Kafka's default: the JVM's)."), SSL),
    (ConfigDef("ssl.trustmanager.algorithm", "string", "PKIX",
               "Trust manager factory algorithm (Kafka's default: the JVM's)."), SSL),
    (ConfigDef("ssl.endpoint.identification.algorithm", "string", "https",
               "Host name verification of peer certificates."), SSL),
    (ConfigDef("ssl.secure.random.implementation", "string", None,
               "SecureRandom implementation.", nullable=True), SSL),
    (ConfigDef("ssl.client.auth", "string", "none", "Client authentication: required, "
               "requested or none."), SSL),
    (ConfigDef("ssl.engine.factory.class", "class", None, "Custom SSL engine factory.",
               nullable=True), SSL),
    (ConfigDef("principal.builder.class", "class",
               "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
               "Builds the principal of a connection."), SSL),
    # --- SASL (DynamicListenerConfig)
    (ConfigDef("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI",
               "SASL mechanism between brokers."), SASL),
    (ConfigDef("sasl.jaas.config", "password", None, "JAAS login context.",
               nullable=True), SASL),
    (ConfigDef("sasl.enabled.mechanisms", "list", "GSSAPI", "Enabled SASL mechanisms."), SASL),
    (ConfigDef("sasl.kerberos.service.name", "string", None, "Kerberos principal name.",
               nullable=True), SASL),
    (ConfigDef("sasl.kerberos.kinit.cmd", "string", "/usr/bin/kinit", "Kerberos kinit path."),
     SASL),
    (ConfigDef("sasl.kerberos.ticket.renew.window.factor", "double", 0.8,
               "Fraction of a ticket's lifetime after which it is renewed."), SASL),
    (ConfigDef("sasl.kerberos.ticket.renew.jitter", "double", 0.05,
               "Random jitter added to the renewal time."), SASL),
    (ConfigDef("sasl.kerberos.min.time.before.relogin", "long", 60000,
               "Sleep between refresh attempts (ms)."), SASL),
    (ConfigDef("sasl.kerberos.principal.to.local.rules", "list", "DEFAULT",
               "Principal to short name mapping rules."), SASL),
    (ConfigDef("sasl.login.refresh.window.factor", "double", 0.8,
               "Fraction of a credential's lifetime after which it is refreshed."), SASL),
    (ConfigDef("sasl.login.refresh.window.jitter", "double", 0.05,
               "Random jitter added to the refresh time."), SASL),
    (ConfigDef("sasl.login.refresh.min.period.seconds", "int", 60,
               "Minimum time between credential refreshes (s).", [_SHORT]), SASL),
    (ConfigDef("sasl.login.refresh.buffer.seconds", "int", 300,
               "Time kept before credential expiry when refreshing (s).", [_SHORT]), SASL),
    # --- connections (SocketServer, DynamicListenerConfig)
    (ConfigDef("max.connections.per.ip", "int", INT_MAX, "Connections accepted per address.",
               [at_least(0)]), SOCKET),
    (ConfigDef("max.connections.per.ip.overrides", "string", "",
               "Per-address exceptions (host:count,...)."), SOCKET),
    (ConfigDef("max.connection.creation.rate", "int", INT_MAX,
               "New connections accepted per second.", [at_least(0)]), SOCKET),
    # --- thread pools (DynamicThreadPool)
    (ConfigDef("background.threads", "int", 10, "Threads for background tasks.",
               [at_least(1)]), THREADS),
    # --- log cleaner (LogCleaner.ReconfigurableConfigs)
    (ConfigDef("log.cleaner.threads", "int", 1, "Log cleaner threads.", [at_least(0)]),
     CLEANER),
    (ConfigDef("log.cleaner.dedupe.buffer.size", "long", 134217728,
               "Memory for deduplication across cleaner threads."), CLEANER),
    (ConfigDef("log.cleaner.io.buffer.load.factor", "double", 0.9,
               "Load factor of the dedupe buffer."), CLEANER),
    (ConfigDef("log.cleaner.io.buffer.size", "int", 524288,
               "I/O buffer memory across cleaner threads.", [at_least(0)]), CLEANER),
    (ConfigDef("log.cleaner.io.max.bytes.per.second", "double", DOUBLE_MAX,
               "Cleaner I/O throttle."), CLEANER),
    # --- topic-config defaults Moldau has no broker key for (DynamicLogConfig)
    (ConfigDef("compression.gzip.level", "int", -1, "Default gzip level of topics.",
               [between(-1, 9)]), LOG),
    (ConfigDef("compression.lz4.level", "int", 9, "Default lz4 level of topics.",
               [between(1, 17)]), LOG),
    (ConfigDef("compression.zstd.level", "int", 3, "Default zstd level of topics.",
               [between(-131072, 22)]), LOG),
    (ConfigDef("log.message.timestamp.difference.max.ms", "long", LONG_MAX,
               "Default of message.timestamp.difference.max.ms.", [at_least(0)]), LOG),
    (ConfigDef("log.message.timestamp.before.max.ms", "long", LONG_MAX,
               "Default of message.timestamp.before.max.ms.", [at_least(0)]), LOG),
    (ConfigDef("log.message.timestamp.after.max.ms", "long", LONG_MAX,
               "Default of message.timestamp.after.max.ms.", [at_least(0)]), LOG),
    (ConfigDef("log.message.downconversion.enable", "bool", True,
               "Default of message.downconversion.enable."), LOG),
    (ConfigDef("log.local.retention.ms", "long", -2,
               "Default of local.retention.ms (tiered storage).", [at_least(-2)]), REMOTE),
    (ConfigDef("log.local.retention.bytes", "long", -2,
               "Default of local.retention.bytes (tiered storage).", [at_least(-2)]), REMOTE),
    # --- metrics, producer state, remote storage
    (ConfigDef("metric.reporters", "list", "org.apache.kafka.common.metrics.JmxReporter",
               "Metrics reporter classes."), METRICS),
    (ConfigDef("remote.log.index.file.cache.total.size.bytes", "long", 1073741824,
               "Cache of remote index files.", [at_least(1)]), REMOTE),
    (ConfigDef("remote.fetch.max.wait.ms", "int", 500, "Wait of a remote fetch.",
               [at_least(1)]), REMOTE),
    (ConfigDef("remote.log.manager.copy.max.bytes.per.second", "long", LONG_MAX,
               "Copy throttle to remote storage.", [at_least(1)]), REMOTE),
    (ConfigDef("remote.log.manager.fetch.max.bytes.per.second", "long", LONG_MAX,
               "Fetch throttle from remote storage.", [at_least(1)]), REMOTE),
    (ConfigDef("remote.list.offsets.request.timeout.ms", "long", 30000,
               "Time-out of ListOffsets answered from remote storage.", [at_least(1)]), REMOTE),
    # --- broker replication quotas (dynamic only in Kafka)
    (ConfigDef("leader.replication.throttled.rate", "long", LONG_MAX,
               "Replication throttle of leaders (bytes/s).", [at_least(0)]), QUOTA),
    (ConfigDef("follower.replication.throttled.rate", "long", LONG_MAX,
               "Replication throttle of followers (bytes/s).", [at_least(0)]), QUOTA),
    (ConfigDef("replica.alter.log.dirs.io.max.bytes.per.second", "long", LONG_MAX,
               "Throttle of moves between log dirs (bytes/s).", [at_least(0)]), QUOTA),
]

KAFKA_ONLY: dict[str, ConfigDef] = {d.name: d for d, _ in _KAFKA_ONLY}
"""Kafka's dynamic broker configs that Moldau defines nowhere else."""

# Kafka dynamic configs that Moldau also defines in definitions.py, with their group.
_ALSO_MOLDAU: dict[str, str] = {
    "listeners": LISTENER, "advertised.listeners": LISTENER,
    "listener.security.protocol.map": LISTENER,
    "num.network.threads": THREADS, "num.io.threads": THREADS, "num.replica.fetchers": THREADS,
    "num.recovery.threads.per.data.dir": THREADS,
    "log.cleaner.backoff.ms": CLEANER, "producer.id.expiration.ms": PRODUCER,
    "transaction.partition.verification.enable": PRODUCER,
    "max.connections": SOCKET,
    # DynamicLogConfig: the first broker synonym of each topic config
    **{name: LOG for name in (
        "log.segment.bytes", "log.roll.ms", "log.roll.jitter.ms", "log.index.size.max.bytes",
        "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.bytes",
        "log.retention.ms", "message.max.bytes", "log.index.interval.bytes",
        "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
        "log.cleaner.min.cleanable.ratio", "log.cleanup.policy",
        "unclean.leader.election.enable", "min.insync.replicas", "compression.type",
        "log.preallocate", "log.message.timestamp.type")},
}

GROUP: dict[str, str] = {**_ALSO_MOLDAU, **{d.name: g for d, g in _KAFKA_ONLY}}
"""Every Kafka dynamic broker config name -> its group."""

KAFKA_DYNAMIC_NAMES: frozenset[str] = frozenset(GROUP)
"""Kafka's ``DynamicBrokerConfig.AllDynamicConfigs`` plus the broker quota configs."""

LISTENER_ONLY: frozenset[str] = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"})
"""Kafka's ``SslConfigs.RECONFIGURABLE_CONFIGS``: settable only with a listener prefix."""

_CLUSTER_LEVEL_LISTENER = frozenset({"max.connections", "max.connection.creation.rate",
                                     "num.network.threads"})
PER_BROKER: frozenset[str] = frozenset(n for n, g in GROUP.items() if g in (SSL, SASL, LISTENER))
"""Configs the cluster-wide default (resource name "") refuses (Kafka's PerBrokerConfigs:
the security and listener configs but the cluster-level connection limits)."""

# What a listener prefix may set: the security configs and the per-listener connection limits
# (Kafka's SocketServer.ListenerReconfigurableConfigs).
_LISTENER_CONFIGS = frozenset(n for n, g in GROUP.items() if g in (SSL, SASL)) | {
    "max.connections", "max.connection.creation.rate"}

# Listener-prefixed names may also name a SASL mechanism: listener.name.<l>.<mech>.<config>.
_MECHANISM_CONFIGS: dict[str, ConfigDef] = {
    "sasl.jaas.config": KAFKA_ONLY["sasl.jaas.config"],
    "sasl.login.callback.handler.class": ConfigDef(
        "sasl.login.callback.handler.class", "class", None, "SASL login callback handler.",
        nullable=True),
    "sasl.login.class": ConfigDef("sasl.login.class", "class", None, "SASL login class.",
                                  nullable=True),
    "sasl.server.callback.handler.class": ConfigDef(
        "sasl.server.callback.handler.class", "class", None, "SASL server callback handler.",
        nullable=True),
    "connections.max.reauth.ms": ConfigDef(
        "connections.max.reauth.ms", "long", 0, "Re-authentication interval of SASL "
        "connections (ms)."),
}
_LISTENER_PREFIX = re.compile(r"listener\.name\.([^.]*)\.(.+)", re.DOTALL)


def listener_settable(name: str) -> bool:
    """Whether ``listener.name.<listener>.<name>`` is a key AlterConfigs accepts."""
    return name in _LISTENER_CONFIGS


def listener_base(name: str) -> str | None:
    """The config a ``listener.name.<listener>.<config>`` name sets, else None."""
    match = _LISTENER_PREFIX.fullmatch(name)
    return match[2] if match else None


def mechanism_config(base: str) -> str | None:
    """The SASL config a ``<mechanism>.<config>`` listener setting names, else None."""
    mechanism, _, config = base.partition(".")
    return config if mechanism and config in _MECHANISM_CONFIGS else None


def _listener_definition(name: str, base: str) -> ConfigDef | None:
    definition = None
    if base in _LISTENER_CONFIGS:
        definition = BROKER_BY_NAME.get(base) or KAFKA_ONLY.get(base)
    elif (config := mechanism_config(base)) is not None:
        definition = _MECHANISM_CONFIGS[config]
    return None if definition is None else dataclasses.replace(definition, name=name)


def broker_definition(name: str) -> ConfigDef | None:
    """The definition of a broker config name AlterConfigs may store: Moldau's own keys,
    Kafka's dynamic broker configs, and their listener-prefixed forms; else None."""
    definition = BROKER_BY_NAME.get(name) or KAFKA_ONLY.get(name)
    if definition is not None:
        return definition
    base = listener_base(name)
    return _listener_definition(name, base) if base is not None else None


def is_dynamic(name: str) -> bool:
    """Whether Kafka lets AlterConfigs change ``name`` at run time."""
    if name in KAFKA_DYNAMIC_NAMES:
        return True
    base = listener_base(name)
    return base is not None and broker_definition(name) is not None


def scope_problems(resource_name: str, names: Iterable[str]) -> str | None:
    """Kafka's placement rules (``DynamicBrokerConfig.validateConfigs``): SSL store configs
    need a listener prefix; SSL/SASL/listener configs need a broker id. A message, or None."""
    names = sorted(set(names))
    unprefixed = [n for n in names if n in LISTENER_ONLY]
    if unprefixed:
        return ("These security configs can be dynamically updated only per-listener using "
                f"the listener prefix (listener.name.<listener>.<config>): "
                f"{', '.join(unprefixed)}")
    if resource_name == "":
        per_broker = [n for n in names if n in PER_BROKER or (
            (base := listener_base(n)) is not None and base not in _CLUSTER_LEVEL_LISTENER)]
        if per_broker:
            return ("Cannot update these configs at default cluster level, broker id must be "
                    f"specified: {', '.join(per_broker)}")
    return None


class _BrokerDefinitions(Mapping[str, ConfigDef]):
    """Broker config definitions by name, listener-prefixed names included (for lookups; it
    iterates over the names without a prefix only)."""

    def __getitem__(self, name: str) -> ConfigDef:
        definition = broker_definition(name)
        if definition is None:
            raise KeyError(name)
        return definition

    def __iter__(self) -> Iterator[str]:
        yield from BROKER_BY_NAME
        yield from (n for n in KAFKA_ONLY if n not in BROKER_BY_NAME)

    def __len__(self) -> int:
        return len(BROKER_BY_NAME) + sum(1 for n in KAFKA_ONLY if n not in BROKER_BY_NAME)


BROKER_DEFINITIONS: Mapping[str, ConfigDef] = _BrokerDefinitions()
"""Every broker config name AlterConfigs may store, with its definition."""
