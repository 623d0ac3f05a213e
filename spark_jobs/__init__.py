"""Batch analytics on Eddy's state snapshots, run by Spark (docs/snapshots.md).

Each job is a module with ``main(argv)`` and a pure ``transform(...)`` (DataFrames
in, DataFrames out, no I/O), runnable as ``python -m eddy.spark_jobs.<job>`` or with
``spark-submit``. ``python -m eddy.spark_jobs`` runs them all on the newest snapshot.
None imports Faust, the agents or the API.
"""

JOBS = ("sensor_report", "vehicle_speed_report", "hashtag_trends", "snapshot_diff")
