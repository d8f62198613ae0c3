"""Experiments that run tidegate's scheduling core against published protocols and traces.

This layer sits above the scheduler and the trace readers and below the CLI. `fragmentation` is the
ATC'23 GPU-sharing placement experiment; `plot` draws its results.
"""
