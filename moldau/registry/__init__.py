"""The schema registry: Confluent's Schema Registry REST API, its state kept in the `_schemas`
topic (memory is a view replayed from the log), for Avro, JSON Schema and Protobuf."""
