"""One root for Eddy's files: ``EDDY_HOME`` (service/paths.py).

The rule users rely on: relative paths of the folders Eddy owns are taken from
``EDDY_HOME``, which defaults to ``.eddy`` in the directory Eddy starts in; absolute
paths and URIs stay as given. So a command run from another directory finds the
same state, snapshots and broker as long as it is given the same ``EDDY_HOME``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from eddy import cli
from eddy.paths import eddy_home
from eddy.settings import load_settings, settings_table
from eddy.snapshot.layout import SnapshotRoot
from eddy.snapshot.offline import snapshot_stores
from tests.unit.test_snapshot_export import store_with_rows
from tools.localkafka import config as kafka_config
from tools.localkafka.config import HOME_ENV, home_dir
from tools.postgres import server

APP_ID = "paths-test"


@pytest.fixture(autouse=True)
def no_eddy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make test` exports EDDY_HOME: each test here says what it sets."""
    for name in [k for k in os.environ if k.startswith("EDDY_")]:
        monkeypatch.delenv(name)


def test_eddy_owned_folders_are_under_eddy_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDDY_HOME", "/x")
    settings = load_settings()
    assert settings.home == Path("/x")
    assert settings.state_dir == Path("/x/state")
    assert settings.snapshot_root == "/x/snapshots"
    assert settings.savepoint_root == "/x/savepoints"


def test_relative_settings_are_taken_from_eddy_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDDY_HOME", "/x")
    monkeypatch.setenv("EDDY_STATE_DIR", "rocks/db")
    monkeypatch.setenv("EDDY_SNAPSHOT_ROOT", "../shared/snapshots")
    settings = load_settings()
    assert settings.state_dir == Path("/x/rocks/db")
    assert settings.snapshot_root == "/shared/snapshots"


def test_absolute_paths_and_uris_stay_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EDDY_HOME", "/x")
    monkeypatch.setenv("EDDY_STATE_DIR", "/var/lib/eddy/state")
    monkeypatch.setenv("EDDY_SNAPSHOT_ROOT", "s3://bucket/eddy")
    monkeypatch.setenv("EDDY_SAVEPOINT_ROOT", "file:///mnt/savepoints")
    settings = load_settings()
    assert settings.state_dir == Path("/var/lib/eddy/state")
    assert settings.snapshot_root == "s3://bucket/eddy"
    assert settings.savepoint_root == "file:///mnt/savepoints"


def test_the_default_home_is_dot_eddy_in_the_starting_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    assert settings.home == tmp_path / ".eddy"
    assert settings.state_dir == tmp_path / ".eddy" / "state"
    assert settings.snapshot_root == str(tmp_path / ".eddy" / "snapshots")
    monkeypatch.setenv("EDDY_HOME", "")  # set but empty: the default, as the tools read it
    assert load_settings().home == tmp_path / ".eddy"
    monkeypatch.setenv("EDDY_HOME", "run/home")  # relative: from the starting directory
    assert load_settings().state_dir == tmp_path / "run" / "home" / "state"


def test_paths_are_resolved_once_at_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker handed the settings (to_env) from another directory means the same folders."""
    monkeypatch.chdir(tmp_path)
    settings = load_settings()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert settings.state_dir == tmp_path / ".eddy" / "state"
    for name, value in settings.to_env().items():
        monkeypatch.setenv(name, value)
    again = load_settings()
    assert (again.home, again.state_dir, again.snapshot_root, again.savepoint_root) == (
        settings.home,
        settings.state_dir,
        settings.snapshot_root,
        settings.savepoint_root,
    )


def test_files_the_user_names_are_read_from_the_current_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EDDY_HOME", "/x")
    monkeypatch.setenv("EDDY_SSL_CAFILE", "certs/ca.pem")
    assert load_settings().ssl_cafile == Path("certs/ca.pem")


def test_the_tools_use_the_same_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A broker another checkout started would win (see the next test): pretend none runs.
    monkeypatch.setattr(kafka_config, "RUNNING_HOME", tmp_path / "no-broker.home")
    monkeypatch.chdir(tmp_path)
    assert eddy_home() == load_settings().home == tmp_path / ".eddy"
    assert home_dir() == tmp_path / ".eddy" / "kafka"
    assert server.layout().home == tmp_path / ".eddy" / "postgres"
    monkeypatch.setenv("EDDY_HOME", str(tmp_path / "h"))
    assert eddy_home() == load_settings().home == tmp_path / "h"
    assert home_dir() == tmp_path / "h" / "kafka"
    assert server.layout().data == tmp_path / "h" / "postgres" / "data"
    monkeypatch.setenv(HOME_ENV, str(tmp_path / "k"))  # still wins for the broker alone
    assert home_dir() == tmp_path / "k"


def test_the_configuration_docs_and_eddy_config_show_eddy_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "| `EDDY_HOME` | `.eddy` |" in settings_table()
    assert "| `EDDY_STATE_DIR` | `state` |" in settings_table()
    monkeypatch.setenv("EDDY_HOME", str(tmp_path / "h"))
    assert cli.main(["config"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert f"EDDY_HOME={tmp_path / 'h'}" in shown
    assert f"EDDY_STATE_DIR={tmp_path / 'h' / 'state'}" in shown


# --- the rule, as a user meets it: `eddy snapshot list` from another directory --------


def eddy_snapshot_list(cwd: Path, **variables: str) -> list[dict[str, object]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDDY_")}
    env.update(EDDY_APP_ID=APP_ID, **variables)
    done = subprocess.run(
        [sys.executable, "-m", "eddy", "snapshot", "list", "--json"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found: list[dict[str, object]] = orjson.loads(done.stdout)
    return found


def test_snapshot_list_finds_the_homes_snapshots_from_any_directory(tmp_path: Path) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    elsewhere.mkdir()
    home = project / ".eddy"
    store = store_with_rows(tmp_path / "db")
    published = snapshot_stores(
        SnapshotRoot.open(str(home / "snapshots")),  # where a worker run in project/ puts it
        APP_ID,
        {"sensor_averages": {0: store}},
        tmp_path / "scratch",
        snapshot_id="20300101T000000000Z",
    )
    store.close()
    assert published.manifest is not None

    from_elsewhere = eddy_snapshot_list(elsewhere, EDDY_HOME=str(home))
    assert [s["id"] for s in from_elsewhere] == ["20300101T000000000Z"]
    assert str(from_elsewhere[0]["location"]).startswith(str(home / "snapshots"))
    assert eddy_snapshot_list(elsewhere) == []  # elsewhere/.eddy: nothing there
    assert [s["id"] for s in eddy_snapshot_list(project)] == ["20300101T000000000Z"]
