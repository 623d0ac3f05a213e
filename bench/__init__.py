"""Benchmarks: run as modules (``python -m bench.core``), never as timed tests.

Figures are CPU time per core (``time.process_time``), best of several runs, and
each report carries a same-run baseline so numbers from a noisy, shared machine
can be compared across runs by their ratio rather than their absolute value.
"""
