"""Transactions: the transaction coordinator, its records and state, and the marker path."""
