"""Batch analytics on Eddy's state snapshots, run by Spark.

Each job is a module with ``main(argv)`` and a pure ``transform(...)``; none
imports Faust, the agents or the API. The snapshot export they read is built in
a later step; until then this package holds no jobs.
"""
