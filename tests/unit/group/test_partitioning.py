from moldau.broker.group.partitioning import java_string_hash, kafka_abs, partition_for

# (string, String.hashCode(), Kafka's partition among 50), computed with Java 17.
JAVA_VALUES = [
    ("hello", 99162322, 22),
    ("mygroup", 1516409939, 39),
    ("polygenelubricants", -(2**31), 0),
    ("console-consumer-12345", 158455506, 6),
    ("\U0001F600gr", 1703759246, 46),
    ("test-group", 627841412, 12),
]


def test_java_string_hash_and_partition_match_java() -> None:
    for text, hash_code, partition in JAVA_VALUES:
        assert java_string_hash(text) == hash_code, text
        assert partition_for(text, 50) == partition, text


def test_empty_string_hashes_to_zero() -> None:
    assert java_string_hash("") == 0
    assert partition_for("", 7) == 0


def test_kafka_abs_maps_min_value_to_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
