"""Benchmarks (not tests): ``python -m bench.run`` compares Moldau with peer brokers."""
