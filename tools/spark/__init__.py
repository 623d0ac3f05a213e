"""Spark around the jobs, for development and tests: hadoop-aws for ``s3a://``
(fetched by Maven, like the local broker's jars), the jobs zipped for
``spark-submit --py-files``, and a standalone master and worker from pyspark's
own distribution (``python -m tools spark ...``)."""
