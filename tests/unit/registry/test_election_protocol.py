"""The election's JSON (Confluent's SchemaRegistryIdentity and Assignment) and the leader's
choice of primary, as pure functions."""

from __future__ import annotations

import json

import pytest

from moldau.registry.election import (
    DUPLICATE_URLS,
    NO_ERROR,
    Assignment,
    Identity,
    choose_primary,
)


def test_identity_json_has_confluents_field_names() -> None:
    raw = Identity("reg-1", 8081, "http", True).to_json()
    assert json.loads(raw) == {"version": 1, "host": "reg-1", "port": 8081,
                               "master_eligibility": True, "scheme": "http"}
    assert Identity.from_json(raw) == Identity("reg-1", 8081, "http", True)


def test_identity_reads_other_implementations() -> None:
    # Confluent without scheme (older versions): http is the default.
    assert Identity.from_json(b'{"version":1,"host":"a","port":1,"master_eligibility":false}'
                              ) == Identity("a", 1, "http", False)
    # Karapace writes version 2; unknown fields are ignored, leader_eligibility accepted.
    raw = json.dumps({"version": 2, "host": "k", "port": 8081, "scheme": "https",
                      "leader_eligibility": True, "extra": [1]}).encode()
    assert Identity.from_json(raw) == Identity("k", 8081, "https", True, 2)


@pytest.mark.parametrize("raw", [b"", b"[]", b"{", b'{"host":"a"}', b'{"port":1}',
                                 b'{"host":"a","port":"1","master_eligibility":true}',
                                 b'{"host":"","port":1}', b"\xff"])
def test_malformed_identities_are_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        Identity.from_json(raw)


def test_identity_for_listener() -> None:
    assert Identity.for_listener("http://127.0.0.1:8081") == Identity("127.0.0.1", 8081)
    assert Identity.for_listener("https://0.0.0.0:9", host_name="reg-2", eligible=False
                                 ) == Identity("reg-2", 9, "https", False)
    assert Identity.for_listener("http://0.0.0.0:8081").host not in ("", "0.0.0.0")
    with pytest.raises(ValueError, match="HOST:PORT"):
        Identity.for_listener("localhost:8081")


def test_lowest_eligible_url_is_primary() -> None:
    members = {
        "m-a": Identity("b-host", 8081),
        "m-b": Identity("a-host", 8082),
        "m-c": Identity("a-host", 8081, eligible=False),
    }
    chosen = choose_primary(members)
    assert (chosen.error, chosen.primary_member, chosen.primary) == (
        NO_ERROR, "m-b", Identity("a-host", 8082))


def test_no_eligible_member_names_no_primary_without_error() -> None:
    chosen = choose_primary({"m": Identity("h", 1, eligible=False)})
    assert chosen == Assignment(NO_ERROR, None, None)
    assert json.loads(chosen.to_json()) == {"version": 1, "error": 0}
    assert choose_primary({}) == Assignment()


def test_duplicate_urls_are_an_error() -> None:
    chosen = choose_primary({"x": Identity("h", 1), "y": Identity("h", 1)})
    assert chosen.error == DUPLICATE_URLS


def test_assignment_json_round_trip_and_confluents_shape() -> None:
    assignment = Assignment(NO_ERROR, "member-1", Identity("h", 8081))
    data = json.loads(assignment.to_json())
    assert data == {"version": 1, "error": 0, "master": "member-1",
                    "master_identity": {"version": 1, "host": "h", "port": 8081,
                                        "master_eligibility": True, "scheme": "http"}}
    assert Assignment.from_json(assignment.to_json()) == assignment
    # Jackson leaves out empty fields: a bare object is "no error, no primary".
    assert Assignment.from_json(b"{}") == Assignment()


@pytest.mark.parametrize("raw", [b"", b"nope", b"[1]", b'{"error":"x"}', b'{"master":3}'])
def test_malformed_assignments_are_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        Assignment.from_json(raw)
