"""Benchmarks for tidegate (run with `python -m bench.run_all`; results go to BENCHMARKS.md)."""
