"""RegistryState.replay: the state is a pure function of the _schemas records."""

from __future__ import annotations

from dataclasses import replace

from moldau.registry.records import (
    ClearSubjectKey,
    ClearSubjectValue,
    ConfigKey,
    ConfigValue,
    DeleteSubjectKey,
    DeleteSubjectValue,
    ModeKey,
    ModeValue,
    NoopKey,
    OtherKey,
    SchemaKey,
    SchemaValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from moldau.registry.schemas.base import Reference
from moldau.registry.state import RegistryState


def _schema(subject: str, version: int, schema_id: int, text: str = '"string"',
            **kwargs: object) -> tuple[SchemaKey, SchemaValue]:
    return SchemaKey(subject, version), SchemaValue(subject, version, schema_id, text,
                                                    **kwargs)  # type: ignore[arg-type]


def _replay(*records: tuple[object, object]) -> RegistryState:
    state = RegistryState()
    for key, value in records:
        # through the bytes, as the store does
        raw_key = decode_key(encode_key(key))  # type: ignore[arg-type]
        assert state.replay(raw_key, decode_value(raw_key, encode_value(value)))  # type: ignore[arg-type]
    return state


def test_versions_ids_and_content_reuse() -> None:
    state = _replay(_schema("a", 1, 1), _schema("b", 1, 1), _schema("a", 2, 2, '"int"'))
    assert [v.version for v in state.versions("a")] == [1, 2]
    assert state.latest("a").id == 2  # type: ignore[union-attr]
    assert state.get("a", -1).version == 2  # type: ignore[union-attr]
    assert [(v.subject, v.version) for v in state.id_versions(1)] == [("a", 1), ("b", 1)]
    assert state.max_id == 2
    assert state.next_version("a") == 3
    assert state.subject_names() == ["a", "b"]
    assert state.schema_by_id(1).schema == '"string"'  # type: ignore[union-attr]


def test_soft_deletes_and_subject_deletes() -> None:
    a1, v1 = _schema("a", 1, 1)
    a2, v2 = _schema("a", 2, 2, '"int"')
    state = _replay((a1, v1), (a2, v2), (a1, replace(v1, deleted=True)))
    assert [v.version for v in state.versions("a")] == [2]
    assert [v.version for v in state.versions("a", deleted=True)] == [1, 2]
    assert state.get("a", 1) is None and state.get("a", 1, deleted=True) is not None
    state.replay(DeleteSubjectKey("a"), DeleteSubjectValue("a", 2))
    assert not state.has_subject("a") and state.has_subject("a", deleted=True)
    assert state.subject_names() == [] and state.subject_names(deleted=True) == ["a"]
    assert state.subject_names(deleted_only=True) == ["a"]
    assert state.schema_by_id(2) is not None  # soft-deleted versions keep their ids
    assert state.next_version("a") == 3


def test_tombstones_forget_versions_but_never_ids() -> None:
    a1, v1 = _schema("a", 1, 5)
    state = _replay((a1, v1), (a1, replace(v1, deleted=True)), (a1, None))
    assert state.subjects == {}
    assert state.schema_by_id(5) is None and state.id_versions(5) == []
    assert state.max_id == 5  # the next id is still 6
    assert state.id_for_content(("AVRO", '"string"', (), "", "")) == 5  # same schema, same id
    assert state.next_version("a") == 1


def test_an_id_taken_by_another_schema_is_ignored() -> None:
    state = RegistryState()
    state.replay(*_schema("a", 1, 1, '"string"'))
    assert state.replay(*_schema("b", 1, 1, '"int"')) is False
    assert not state.has_subject("b")
    assert state.schema_by_id(1).schema == '"string"'  # type: ignore[union-attr]
    # the same subject-version may be rewritten (IMPORT overwrites)
    assert state.replay(*_schema("a", 1, 1, '"long"')) is True
    assert state.schema_by_id(1).schema == '"long"'  # type: ignore[union-attr]


def test_references_and_referrers() -> None:
    ref = Reference("dep.proto", "dep", 1)
    d1 = _schema("dep", 1, 1, "d", schema_type="PROTOBUF")
    m1 = _schema("main", 1, 2, "m", schema_type="PROTOBUF", references=(ref,))
    state = _replay(d1, m1)
    assert [v.id for v in state.referencing("dep", 1)] == [2]
    state.replay(m1[0], replace(m1[1], deleted=True))
    assert state.referencing("dep", 1) == []
    assert [v.id for v in state.referencing("dep", 1, deleted=True)] == [2]
    state.replay(m1[0], None)
    assert state.referencing("dep", 1, deleted=True) == []


def test_config_mode_clear_and_ignored_keys() -> None:
    state = _replay((ConfigKey(), ConfigValue("FULL")), (ConfigKey("s"), ConfigValue("NONE")),
                    (ModeKey(), ModeValue("READONLY")), (ModeKey("s"), ModeValue("IMPORT")))
    assert state.config(None).compatibility == "FULL"  # type: ignore[union-attr]
    assert state.config("s").compatibility == "NONE"  # type: ignore[union-attr]
    assert (state.mode(None), state.mode("s")) == ("READONLY", "IMPORT")
    state.replay(ConfigKey("s"), None)
    state.replay(ModeKey(), None)
    assert state.config("s") is None and state.mode(None) is None
    key, value = _schema("x", 1, 3)
    state.replay(key, replace(value, deleted=True))
    state.replay(*_schema("y", 1, 4))
    assert state.replay(ClearSubjectKey(), ClearSubjectValue())
    assert state.subject_names(deleted=True) == ["y"]
    assert state.replay(NoopKey(), None) and state.replay(OtherKey("ASSOC"), None)
    assert state.replayed == 11
