"""Protobuf schemas: .proto text and base64 FileDescriptorProtos (confluent-kafka's form),
the printed canonical text, identity across both forms, references, invalid schemas."""

from __future__ import annotations

import base64
import sys
import types

import pytest
from confluent_kafka.schema_registry.common.protobuf import _schema_to_str
from google.protobuf import descriptor_pb2
from grpc_tools import _protoc_compiler

from moldau.registry.schemas import InvalidSchemaError, parse_schema
from moldau.registry.schemas.protobuf import compile_proto

ORDER = """syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";

// an order
message Order {
  string id = 1;
  google.protobuf.Timestamp placed = 2;
  repeated Line lines = 3;
  map<string, string> tags = 4;
  oneof payment {
    string card = 5;
    Voucher voucher = 6;
  }
  optional int64 discount = 7;
  Status status = 8;
  message Line {
    string sku = 1;
    int32 quantity = 2;
    reserved 3, 10 to 20;
    reserved "price";
  }
}

message Voucher { string code = 1; }

enum Status {
  STATUS_UNKNOWN = 0;
  STATUS_PLACED = 1;
}
"""


def proto(text: str, references: dict[str, str] | None = None, **kwargs: bool):
    return parse_schema("PROTOBUF", text, references or {}, **kwargs)


def test_canonical_text_is_printed_from_the_descriptor() -> None:
    assert proto(ORDER).canonical() == """syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";

message Order {
  string id = 1;
  .google.protobuf.Timestamp placed = 2;
  repeated .shop.v1.Order.Line lines = 3;
  map<string, string> tags = 4;
  oneof payment {
    string card = 5;
    .shop.v1.Voucher voucher = 6;
  }
  optional int64 discount = 7;
  .shop.v1.Status status = 8;
  message Line {
    reserved 3, 10 to 20;
    reserved "price";
    string sku = 1;
    int32 quantity = 2;
  }
}

message Voucher {
  string code = 1;
}

enum Status {
  STATUS_UNKNOWN = 0;
  STATUS_PLACED = 1;
}
"""


def test_canonical_compiles_to_the_same_descriptor() -> None:
    parsed = proto(ORDER)
    original = compile_proto(ORDER, {})["default"]
    assert parsed.descriptor == original
    assert proto(parsed.canonical()).canonical() == parsed.canonical()


def test_text_and_base64_have_the_same_identity() -> None:
    text = proto(ORDER)
    serialized = text.serialized()
    assert base64.b64decode(serialized) == text.descriptor.SerializeToString()
    from_base64 = proto(serialized)
    assert from_base64.identity() == text.identity()
    assert from_base64.canonical() == text.canonical()
    assert from_base64.serialized() == serialized
    assert from_base64.formatted("serialized") == serialized
    assert from_base64.formatted("") == text.canonical()


def test_whitespace_and_comments_do_not_change_identity() -> None:
    compact = 'syntax="proto3";package p;message M{int32 a=1;/*x*/string b=2;}'
    spaced = 'syntax = "proto3";\n\npackage p;\n// c\nmessage M {\n  int32 a = 1;\n' \
             '  string b = 2;\n}\n'
    assert proto(compact).identity() == proto(spaced).identity()


def _generated_module(name: str, text: str, references: dict[str, str],
                      monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """Compile ``text`` as protoc does for an application and import the generated modules
    (the dependencies first, as Python imports them)."""
    loaded = {}
    for path, code in _compile_python(name, text, references):
        if path.startswith("google/"):
            continue
        dotted = path.removesuffix(".py").replace("/", ".")
        package = dotted.rpartition(".")[0]
        if package and package not in sys.modules:
            monkeypatch.setitem(sys.modules, package, types.ModuleType(package))
        module = types.ModuleType(dotted)
        monkeypatch.setitem(sys.modules, dotted, module)
        exec(code, module.__dict__)
        loaded[dotted] = module
    return loaded[name.removesuffix(".proto").replace("/", ".") + "_pb2"]


def _compile_python(name: str, text: str, references: dict[str, str]):
    import tempfile
    from pathlib import Path

    from grpc_tools import protoc
    with tempfile.TemporaryDirectory() as work:
        for ref_name, ref_text in {**references, name: text}.items():
            Path(work, ref_name).parent.mkdir(parents=True, exist_ok=True)
            Path(work, ref_name).write_text(ref_text)
        include = [work.encode(), str(Path(protoc.__file__).parent / "_proto").encode()]
        for module, code in _protoc_compiler.get_protos(name.encode(), include):
            yield module.decode(), code


def test_confluent_kafka_serializer_form_of_a_generated_message_parses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    common = 'syntax = "proto3";\npackage moldau.test.common;\nmessage Money {\n' \
             '  string currency = 1;\n  int64 units = 2;\n}\n'
    main = 'syntax = "proto3";\npackage moldau.test;\n' \
           'import "moldau_test/common.proto";\nimport "google/protobuf/timestamp.proto";\n' \
           'message Payment {\n  string id = 1;\n  moldau.test.common.Money amount = 2;\n' \
           '  google.protobuf.Timestamp at = 3;\n}\n'
    generated = _generated_module("moldau_test/payment.proto", main,
                                  {"moldau_test/common.proto": common}, monkeypatch)
    file_descriptor = generated.Payment.DESCRIPTOR.file
    # what ProtobufSerializer registers: the file and its non-builtin dependency, base64
    dependency = file_descriptor.dependencies[0]
    assert dependency.name == "moldau_test/common.proto"
    references = {dependency.name: _schema_to_str(dependency)}
    registered = proto(_schema_to_str(file_descriptor), references)
    assert "message Payment {" in registered.canonical()
    assert 'import "moldau_test/common.proto";' in registered.canonical()
    # the same schema registered as text by another client gets the same identity
    assert proto(main, {"moldau_test/common.proto": common}).identity() == \
        registered.identity()
    # what the deserializer does with format=serialized: a pool with the reference, then
    # the schema under the name "default"
    from google.protobuf import descriptor_pool
    pool = descriptor_pool.DescriptorPool()
    from google.protobuf import timestamp_pb2
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    dep = proto(references[dependency.name])
    dep_fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(dep.serialized()))
    dep_fdp.name = dependency.name
    pool.Add(dep_fdp)
    main_fdp = descriptor_pb2.FileDescriptorProto.FromString(
        base64.b64decode(registered.formatted("serialized")))
    pool.Add(main_fdp)
    payment = pool.FindMessageTypeByName("moldau.test.Payment")
    assert [f.name for f in payment.fields] == ["id", "amount", "at"]


def test_references_as_text_and_nested_imports() -> None:
    refs = {
        "a.proto": 'syntax = "proto3";\npackage a;\nimport "b.proto";\n'
                   'message A { b.B b = 1; }\n',
        "b.proto": 'syntax = "proto3";\npackage b;\nmessage B { int32 x = 1; }\n',
    }
    parsed = proto('syntax = "proto3";\nimport "a.proto";\nmessage Top { a.A a = 1; }\n', refs)
    assert ".a.A a = 1;" in parsed.canonical()


def test_known_dependencies_need_no_references() -> None:
    parsed = proto('syntax = "proto3";\nimport "confluent/type/decimal.proto";\n'
                   'import "google/type/date.proto";\nimport "confluent/meta.proto";\n'
                   'message M {\n  confluent.type.Decimal price = 1 '
                   '[(confluent.field_meta) = { doc: "the price" }];\n'
                   '  google.type.Date day = 2;\n}\n')
    assert '[(confluent.field_meta) = { doc: "the price" }]' in parsed.canonical()
    assert proto(parsed.serialized()).identity() == parsed.identity()


def test_proto2_features_print_and_compile() -> None:
    text = """syntax = "proto2";
package legacy;
message Old {
  required string id = 1;
  optional int32 count = 2 [default = 7];
  optional string name = 3 [default = "a\\"b"];
  repeated group Item = 4 {
    optional int32 x = 1;
  }
  extensions 100 to 199;
}
extend Old {
  optional string extra = 100;
}
"""
    parsed = proto(text)
    canonical = parsed.canonical()
    assert "required string id = 1;" in canonical
    assert "optional int32 count = 2 [default = 7];" in canonical
    assert "repeated group Item = 4 {" in canonical
    assert "extend .legacy.Old {" in canonical
    assert proto(canonical).canonical() == canonical
    assert proto(parsed.serialized()).identity() == parsed.identity()


def test_services_and_options() -> None:
    text = 'syntax = "proto3";\noption java_package = "com.acme";\n' \
           'message Req { option deprecated = true; }\n' \
           'service Api { rpc Call (Req) returns (stream Req); }\n'
    canonical = proto(text).canonical()
    assert 'option java_package = "com.acme";' in canonical
    assert "option deprecated = true;" in canonical
    assert "rpc Call (.Req) returns (stream .Req);" in canonical


def test_normalize_orders_fields_by_number_and_sorts_imports() -> None:
    text = 'syntax = "proto3";\nimport "google/protobuf/timestamp.proto";\n' \
           'import "google/protobuf/duration.proto";\n' \
           'message M { google.protobuf.Timestamp b = 2; google.protobuf.Duration a = 1; }\n'
    swapped = 'syntax = "proto3";\nimport "google/protobuf/duration.proto";\n' \
              'import "google/protobuf/timestamp.proto";\n' \
              'message M { google.protobuf.Duration a = 1; google.protobuf.Timestamp b = 2; }\n'
    assert proto(text).identity() != proto(swapped).identity()
    one, two = proto(text, normalize=True), proto(swapped, normalize=True)
    assert one.identity() == two.identity()
    assert one.canonical().index("a = 1") < one.canonical().index("b = 2")


@pytest.mark.parametrize("text, fragment", [
    ("", "empty"),
    ("   ", "empty"),
    ('syntax = "proto3";\nmessage M { strin a = 1; }', '"strin" is not defined'),
    ('syntax = "proto3";\nmessage M { int32 a = 1; int32 b = 1; }', "already been used"),
    ('syntax = "proto3";\nmessage M { int32 a = 1 }', "default:2:25"),
    ('syntax = "proto3";\nimport "missing.proto";\nmessage M {}', "missing.proto"),
    ('syntax = "proto4";', "proto4"),
    ("bm90IGEgZGVzY3JpcHRvcg==", "Invalid Protobuf schema"),
    ("{}", "Invalid Protobuf schema"),
])
def test_invalid_schemas(text: str, fragment: str) -> None:
    with pytest.raises(InvalidSchemaError) as caught:
        proto(text)
    assert fragment in str(caught.value)


def test_invalid_reference_name() -> None:
    with pytest.raises(InvalidSchemaError, match="reference name"):
        proto('syntax = "proto3";\nmessage M {}', {"../escape.proto": 'syntax = "proto3";'})


def test_nested_type_order_survives_map_fields_and_groups() -> None:
    # protoc adds a map field's entry type (and a group's) to nested_type where the field is
    # declared; confluent-kafka's message indexes count nested types, so the order must hold
    text = """syntax = "proto2";
message A {
  message B { optional int32 x = 1; }
  optional int32 a = 1;
  map<string, int32> m = 2;
  message C { optional int32 y = 1; }
  optional group G = 3 { optional int32 z = 1; }
  message D {}
}
"""
    parsed = proto(text)
    assert parsed.descriptor == compile_proto(text, {})["default"]
    nested = [n.name for n in parsed.descriptor.message_type[0].nested_type]
    assert nested == ["B", "MEntry", "C", "G", "D"]
    assert proto(parsed.serialized()).descriptor == parsed.descriptor


@pytest.mark.parametrize("text, declared", [
    ("message snack { required string name = 1; }", False),
    ("// a comment\n/* and\n another */\nmessage snack { required string name = 1; }", False),
    ('syntax = "proto2";\nmessage snack { required string name = 1; }', True),
    ('// c\nsyntax="proto2";message snack { required string name = 1; }', True),
])
def test_proto2_syntax_line_only_when_declared(text: str, declared: bool) -> None:
    # Confluent prints `syntax = "proto2";` only for a file that declared it (kafi's suite
    # compares the answered text with the registered one)
    parsed = proto(text)
    canonical = parsed.canonical()
    body = "\nmessage snack {\n  required string name = 1;\n}\n"
    assert canonical == ('syntax = "proto2";\n' if declared else "") + body
    assert parsed.normalized().startswith("syntax") is declared
    assert proto(canonical).canonical() == canonical
    again = proto(parsed.serialized())
    assert again.identity() == parsed.identity()
    assert again.descriptor == parsed.descriptor


def test_base64_descriptor_without_syntax_prints_none() -> None:
    # protoc (and so confluent-kafka's registration) leaves syntax empty for proto2 files
    fdp = compile_proto("message M { optional int32 a = 1; }", {})["default"]
    assert fdp.syntax == ""
    encoded = base64.b64encode(fdp.SerializeToString()).decode()
    parsed = proto(encoded)
    assert parsed.canonical() == "\nmessage M {\n  optional int32 a = 1;\n}\n"
    assert parsed.identity() == proto("message M { optional int32 a = 1; }").identity()
    three = proto('syntax = "proto3";\nmessage M { int32 a = 1; }')
    assert three.canonical().startswith('syntax = "proto3";')
