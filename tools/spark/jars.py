"""hadoop-aws for pyspark's Hadoop, fetched from Maven Central by Maven.

Spark reads ``s3a://`` through hadoop-aws, which must be the release of the
Hadoop that pyspark ships (``hadoop-client-api-<version>.jar``): its classes
call into that Hadoop's internals. hadoop-aws asks for the AWS SDK's ``bundle``
(every AWS service, over 500 MB, shaded); the S3 modules of the same SDK version
are what it uses, about 15 MB. Jars that Spark already has (netty, the Apache
HTTP client, SLF4J, commons-codec and -logging) are left out, so one copy of
each is on the classpath.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
from pathlib import Path

from eddy.errors import EddyError
from eddy.paths import eddy_home

COPY_DEPENDENCIES = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy-dependencies"
# The AWS SDK v2 version each Hadoop release builds hadoop-aws against: the
# property aws-java-sdk-v2.version of org.apache.hadoop:hadoop-project:<hadoop>.
SDK_OF_HADOOP = {"3.5.0": "2.35.4"}
SDK_MODULES = ("s3", "sts", "s3-transfer-manager", "apache-client")
ALREADY_IN_SPARK = "io.netty,org.slf4j,commons-codec,commons-logging,org.apache.httpcomponents"
_COMPLETE = ".complete"

POM = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by `python -m tools spark fetch` (tools/spark/jars.py). -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.eddy.tools</groupId>
  <artifactId>spark-s3a</artifactId>
  <version>{hadoop}</version>
  <packaging>pom</packaging>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>software.amazon.awssdk</groupId>
        <artifactId>bom</artifactId>
        <version>{sdk}</version>
        <type>pom</type>
        <scope>import</scope>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>org.apache.hadoop</groupId>
      <artifactId>hadoop-aws</artifactId>
      <version>{hadoop}</version>
      <exclusions>
        <exclusion>
          <groupId>software.amazon.awssdk</groupId>
          <artifactId>bundle</artifactId>
        </exclusion>
      </exclusions>
    </dependency>
{modules}
  </dependencies>
</project>
"""


class SparkJarsError(EddyError):
    """hadoop-aws could not be fetched: Maven's last lines are in the message.
    Maven (``mvn``) and Maven Central must be reachable; the pom is left in place."""


def spark_home() -> Path:
    """pyspark's own distribution: bin/, jars/, python/."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def hadoop_version(home: Path | None = None) -> str:
    """The Hadoop release pyspark ships, from its client jar's name."""
    jars = (home or spark_home()) / "jars"
    found = sorted(
        m.group(1)
        for p in jars.glob("hadoop-client-api-*.jar")
        if (m := re.fullmatch(r"hadoop-client-api-(.+)\.jar", p.name))
    )
    if len(found) != 1:
        raise SparkJarsError(f"expected one hadoop-client-api jar in {jars}, found {found}")
    return found[0]


def jars_dir(hadoop: str) -> Path:
    return eddy_home() / "spark" / f"hadoop-aws-{hadoop}"


def render_pom(hadoop: str) -> str:
    sdk = SDK_OF_HADOOP.get(hadoop)
    if sdk is None:
        raise SparkJarsError(
            f"pyspark ships Hadoop {hadoop}, whose AWS SDK version tools/spark/jars.py "
            "does not know: add it to SDK_OF_HADOOP (hadoop-project's "
            "aws-java-sdk-v2.version)"
        )
    modules = "\n".join(
        "    <dependency>\n"
        "      <groupId>software.amazon.awssdk</groupId>\n"
        f"      <artifactId>{name}</artifactId>\n"
        "    </dependency>"
        for name in SDK_MODULES
    )
    return POM.format(hadoop=hadoop, sdk=sdk, modules=modules)


def fetch() -> list[Path]:
    """The jars to add to Spark (``--jars``, ``spark.jars``) for ``s3a://``;
    fetched once per Hadoop version, under a lock (tests may ask at once)."""
    hadoop = hadoop_version()
    directory = jars_dir(hadoop)
    lib = directory / "lib"
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (lib / _COMPLETE).exists():
            _fetch_unlocked(hadoop, directory, lib)
    return sorted(lib.glob("*.jar"))


def _fetch_unlocked(hadoop: str, directory: Path, lib: Path) -> None:
    """Into a staging folder, renamed when complete: a killed fetch never leaves a
    half lib that a later run would trust."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SparkJarsError("mvn is not on PATH: install Maven to fetch hadoop-aws")
    (directory / "pom.xml").write_text(render_pom(hadoop))
    staging = directory / f"lib.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    command = [mvn, "-B", "-q", "-Dstyle.color=never", COPY_DEPENDENCIES]
    command += [
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
        f"-DexcludeGroupIds={ALREADY_IN_SPARK}",
    ]
    result = subprocess.run(command, cwd=directory, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not (staging / f"hadoop-aws-{hadoop}.jar").exists():
        shutil.rmtree(staging, ignore_errors=True)
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise SparkJarsError(
            f"mvn could not fetch hadoop-aws {hadoop} (exit {result.returncode}; pom in "
            f"{directory}). mvn said:\n{tail or '(nothing)'}"
        )
    (staging / _COMPLETE).write_text(f"{hadoop}\n")
    shutil.rmtree(lib, ignore_errors=True)
    staging.rename(lib)
