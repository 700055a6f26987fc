"""The version rule: PRODUCER_FENCED reaches old request versions as INVALID_PRODUCER_EPOCH."""

from __future__ import annotations

import pytest

from moldau.broker.txn.errors import for_version
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode as E


@pytest.mark.parametrize(("api", "first"), [(ApiKey.INIT_PRODUCER_ID, 4),
                                            (ApiKey.ADD_PARTITIONS_TO_TXN, 2),
                                            (ApiKey.ADD_OFFSETS_TO_TXN, 2),
                                            (ApiKey.END_TXN, 2)])
def test_producer_fenced_by_version(api: ApiKey, first: int) -> None:
    for version in range(first):
        assert for_version(api, version, E.producer_fenced) == E.invalid_producer_epoch
    for version in range(first, first + 3):
        assert for_version(api, version, E.producer_fenced) == E.producer_fenced


def test_other_codes_pass() -> None:
    assert for_version(ApiKey.END_TXN, 0, E.invalid_txn_state) == E.invalid_txn_state
    assert for_version(ApiKey.END_TXN, 0, E.none) == E.none
