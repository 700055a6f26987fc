"""Where a config value comes from, numbered as Kafka's DescribeConfigs ``config_source``."""

from __future__ import annotations

import enum


class ConfigSource(enum.IntEnum):
    """Kafka's ``DescribeConfigsResponse`` ``config_source`` values (v1+)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8
