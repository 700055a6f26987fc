"""The client reads DescribeTransactions' start time of -1 (kio's datetime type refuses it)."""

from __future__ import annotations

import datetime
import io

from kio.serial import entity_reader, entity_writer

from moldau.client import kio_fixes
from moldau.protocol.api_keys import ApiKey
from moldau.protocol.errors import ErrorCode
from moldau.protocol.schemas import response_schema


def test_describe_transactions_start_time_minus_one_decodes() -> None:
    schema = response_schema(ApiKey.DESCRIBE_TRANSACTIONS, 0)
    assert schema is kio_fixes.DescribeTransactionsResponse
    state = kio_fixes.TransactionState(
        error_code=ErrorCode.transactional_id_not_found, transactional_id="x",
        transaction_state="", transaction_timeout=datetime.timedelta(0),
        transaction_start_time=-1, producer_id=-1, producer_epoch=-1, topics=())
    buf = io.BytesIO()
    entity_writer(schema)(buf, schema(throttle_time=datetime.timedelta(0),
                                      transaction_states=(state,)))
    decoded, _size = entity_reader(schema)(memoryview(buf.getvalue()), 0)
    assert decoded.transaction_states[0].transaction_start_time == -1
