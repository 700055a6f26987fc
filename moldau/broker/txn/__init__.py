"""The transaction coordinator (KIP-98, KIP-360, KIP-890 part 1): ``__transaction_state``
records, states and pure transitions, the shard and coordinator on the shared coordinator
runtime, housekeeping and admin answers."""
