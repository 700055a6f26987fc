"""Responses the client decodes with a variant of kio's schema, because a kio field type
cannot hold a value brokers send.

- DescribeTransactions v0: kio reads ``TransactionStartTimeMs`` as a datetime and refuses -1,
  which brokers (Kafka's too) send for a transactional id without an open transaction; it is
  read here as the plain int64 it is on the wire.

No ``from __future__ import annotations`` here: kio builds its readers from the real field
types of these dataclasses.
"""

import dataclasses

from kio.schema.describe_transactions.v0 import response as describe_v0
from kio.static.primitive import i64

from moldau.protocol.api_keys import ApiKey
from moldau.protocol.schemas import override_response_schema


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TransactionState(describe_v0.TransactionState):
    """kio's TransactionState with ``transaction_start_time`` as milliseconds (-1: none)."""

    transaction_start_time: i64 = dataclasses.field(metadata={"kafka_type": "int64"})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTransactionsResponse(describe_v0.DescribeTransactionsResponse):
    """kio's DescribeTransactionsResponse v0 over :class:`TransactionState`."""

    transaction_states: tuple[TransactionState, ...]


override_response_schema(ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsResponse)
