"""Broker configuration with Kafka's key names, defaults and validation."""

from .listeners import Endpoint, ListenerConfig
from .loader import BrokerConfig, build_config, load_config
from .types import ConfigError

__all__ = [
    "BrokerConfig",
    "ConfigError",
    "Endpoint",
    "ListenerConfig",
    "build_config",
    "load_config",
]
