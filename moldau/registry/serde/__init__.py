"""Schema-registry serializers and deserializers: Confluent's wire format for Avro, JSON Schema
and Protobuf, byte for byte as Confluent's (Java and confluent-kafka) serializers write it.

    from moldau.registry.client import SchemaRegistryClient
    from moldau.registry.serde import AvroSerializer, AvroDeserializer

    client = SchemaRegistryClient({"url": "http://localhost:8081"})
    serialize = AvroSerializer(client, schema_text)
    data = serialize("orders", {"id": 1})          # registered as "orders-value"
    record = AvroDeserializer(client)("orders", data)

Inside an event loop use an :class:`~moldau.registry.client.AsyncSchemaRegistryClient` and the
``serialize_async`` / ``deserialize_async`` methods.
"""

from .avro import AvroDeserializer, AvroSerializer
from .json_schema import JSONDeserializer, JSONSerializer
from .protobuf import ProtobufDeserializer, ProtobufSerializer
from .strategies import (
    record_name_strategy,
    strategy_from_config,
    topic_name_strategy,
    topic_record_name_strategy,
)
from .wire import Frame, SerializationError, frame, parse_frame, schema_id_of

__all__ = [
    "AvroDeserializer", "AvroSerializer", "Frame", "JSONDeserializer", "JSONSerializer",
    "ProtobufDeserializer", "ProtobufSerializer", "SerializationError", "frame", "parse_frame",
    "record_name_strategy", "schema_id_of", "strategy_from_config", "topic_name_strategy",
    "topic_record_name_strategy",
]
