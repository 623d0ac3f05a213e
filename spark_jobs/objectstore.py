"""Spark's ``s3a://`` settings from the variables the workers' pyarrow reads.

The workers find an S3-compatible store through ``AWS_ENDPOINT_URL`` (or
``AWS_ENDPOINT_URL_S3``) and ``AWS_REGION``; the jobs read the same snapshots
through hadoop-aws, which has its own settings for them. Taking both from one
set of variables keeps a worker and a job from looking at two different stores.
"""

from __future__ import annotations

from collections.abc import Mapping


def s3a_conf(environ: Mapping[str, str]) -> dict[str, str]:
    """Spark settings for hadoop-aws: none on plain AWS S3 (its defaults find it),
    the endpoint and the region when ``environ`` names an S3-compatible store.

    Credentials are not copied into settings (they would show in Spark's UI and
    logs): hadoop-aws reads ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` from
    each process's environment, or a node's instance profile.
    """
    endpoint = environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL")
    if not endpoint:
        return {}
    conf = {
        "spark.hadoop.fs.s3a.endpoint": endpoint,
        # A store on its own host name (http://minio:9000) has no <bucket>.minio
        # DNS names: address buckets in the path.
        "spark.hadoop.fs.s3a.path.style.access": "true",
    }
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = region
    return conf
