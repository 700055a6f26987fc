"""Transactions: the transaction coordinator, its markers and verification (design14 §6-7)."""
