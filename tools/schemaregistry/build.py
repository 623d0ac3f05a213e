"""Apicurio Registry built into a runnable jar from Maven Central by Maven.

Apicurio publishes its registry as a library (``apicurio-registry-app``), not
as a runnable distribution; a Quarkus application becomes runnable through the
Quarkus Maven plugin's ``build``. The pom written here unpacks the app's classes
as the application (so Quarkus indexes its beans as Apicurio's own build does)
and takes its dependencies from the app's pom. 2.4.2.Final is the release whose
dependencies Maven Central serves (later ones need artifacts published
elsewhere) and it runs on Java 11+, so on the machine's Java 17. Two of its
dependencies need standing in for:

- ``org.everit.json.schema`` is published to Central by its maintainer as
  ``com.github.erosb:everit-json-schema`` (same classes);
- the ``config-index`` Quarkus extension's build-time half is not on Central;
  it only lists the registry's dynamic (runtime-editable) settings, so the
  extension is left out and ``NoDynamicConfig.java`` provides an empty list.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

from eddy.errors import EddyError
from eddy.paths import eddy_home

VERSION = "2.4.2.Final"
QUARKUS = "2.16.4.Final"  # the quarkus.version of io.apicurio:apicurio-registry:2.4.2.Final
_COMPLETE = ".complete"
_JAVA_SOURCE = Path(__file__).with_name("NoDynamicConfig.java")

POM = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by `python -m tools registry fetch` (tools/schemaregistry/build.py). -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.eddy.tools</groupId>
  <artifactId>schema-registry</artifactId>
  <version>{version}</version>
  <properties>
    <maven.compiler.release>11</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>io.apicurio</groupId>
        <artifactId>apicurio-registry</artifactId>
        <version>{version}</version>
        <type>pom</type>
        <scope>import</scope>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency>
      <!-- The app's dependencies, without its jar: its classes are unpacked below. -->
      <groupId>io.apicurio</groupId>
      <artifactId>apicurio-registry-app</artifactId>
      <version>{version}</version>
      <type>pom</type>
      <exclusions>
        <exclusion>
          <groupId>io.apicurio</groupId>
          <artifactId>apicurio-common-app-components-config-index</artifactId>
        </exclusion>
        <exclusion>
          <groupId>com.github.everit-org.json-schema</groupId>
          <artifactId>org.everit.json.schema</artifactId>
        </exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>com.github.erosb</groupId>
      <artifactId>everit-json-schema</artifactId>
      <version>1.14.2</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>3.11.0</version>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>3.6.1</version>
        <executions>
          <execution>
            <id>unpack-app</id>
            <phase>generate-resources</phase>
            <goals><goal>unpack</goal></goals>
            <configuration>
              <artifactItems>
                <artifactItem>
                  <groupId>io.apicurio</groupId>
                  <artifactId>apicurio-registry-app</artifactId>
                  <version>{version}</version>
                  <type>jar</type>
                </artifactItem>
              </artifactItems>
              <outputDirectory>${{project.build.outputDirectory}}</outputDirectory>
            </configuration>
          </execution>
        </executions>
      </plugin>
      <plugin>
        <groupId>io.quarkus</groupId>
        <artifactId>quarkus-maven-plugin</artifactId>
        <version>{quarkus}</version>
        <executions>
          <execution>
            <goals><goal>build</goal></goals>
          </execution>
        </executions>
      </plugin>
    </plugins>
  </build>
</project>
"""


# Apicurio's poms name other repositories (Confluent's, Eclipse's) for artifacts
# that Maven Central also serves: Maven asks Central for those too.
SETTINGS = """<settings>
  <mirrors>
    <mirror>
      <id>central-for-others</id>
      <mirrorOf>external:*,!central</mirrorOf>
      <url>https://repo.maven.apache.org/maven2</url>
    </mirror>
  </mirrors>
</settings>
"""


class RegistryBuildError(EddyError):
    """Apicurio Registry could not be built: Maven's last lines are in the message.
    Maven (``mvn``), a JDK (``javac``) and Maven Central must be reachable."""


def build_dir() -> Path:
    return eddy_home() / "schema-registry" / f"apicurio-{VERSION}"


def runner_jar(directory: Path | None = None) -> Path:
    """The built registry (its ``lib/`` beside it), once :func:`fetch` has run."""
    return (directory or build_dir()) / "app" / f"schema-registry-{VERSION}-runner.jar"


def fetch() -> Path:
    """Build the registry once per version, under a lock (tests may ask at once);
    the runnable jar."""
    directory = build_dir()
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (directory / "app" / _COMPLETE).exists():
            _build_unlocked(directory)
    return runner_jar(directory)


def _build_unlocked(directory: Path) -> None:
    """Built in ``project/``, copied to a staging folder renamed when complete: a
    killed build never leaves a half ``app/`` that a later run would trust."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RegistryBuildError("mvn is not on PATH: install Maven to build the registry")
    project = directory / "project"
    shutil.rmtree(project, ignore_errors=True)
    sources = project / "src" / "main" / "java" / "dev" / "eddy" / "registry"
    sources.mkdir(parents=True)
    shutil.copy(_JAVA_SOURCE, sources / _JAVA_SOURCE.name)
    (project / "pom.xml").write_text(POM.format(version=VERSION, quarkus=QUARKUS))
    (project / "settings.xml").write_text(SETTINGS)
    command = [mvn, "-B", "-q", "-s", "settings.xml", "-Dstyle.color=never", "-DskipTests"]
    command.append("package")
    result = subprocess.run(command, cwd=project, capture_output=True, text=True, check=False)
    built = project / "target" / runner_jar().name
    if result.returncode != 0 or not built.exists():
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise RegistryBuildError(
            f"mvn could not build Apicurio Registry {VERSION} (exit {result.returncode}; "
            f"pom in {project}). mvn said:\n{tail or '(nothing)'}"
        )
    staging = directory / f"app.tmp-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    shutil.copy(built, staging / built.name)
    shutil.copytree(built.parent / "lib", staging / "lib")
    (staging / _COMPLETE).write_text(f"{VERSION}\n")
    shutil.rmtree(directory / "app", ignore_errors=True)
    staging.rename(directory / "app")
    shutil.rmtree(project, ignore_errors=True)
