"""A local S3-compatible server (moto's server mode) for snapshots and savepoints
on an object store: ``python -m tools s3 start|stop|status``, and the tests' fixture.

It keeps objects in memory: they are gone when it stops. It speaks the S3 API
that pyarrow (the workers, ``eddy snapshot``) and hadoop-aws (Spark's ``s3a://``)
use, with any access key.
"""

from tools.s3.server import BUCKET, LocalS3, client_env, layout, start, status, stop

__all__ = ["BUCKET", "LocalS3", "client_env", "layout", "start", "status", "stop"]
