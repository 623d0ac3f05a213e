"""What ships is what runs an app: the wheel holds the product and no tool, and a
clean virtualenv with only the wheel installed imports, tests and replays a
user's app without the chaos harness, the simulator or the benchmarks."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import orjson
import pytest

from tests.support.user_apps import write_package

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = {"eddy"}
TOOLS = {"tools", "bench", "tests"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    uv = Path(sys.executable).parent / "uv"  # make venv installs it
    # From the sdist, as a package index would: no stale build/ of this checkout in it.
    subprocess.run([uv, "build", "-q", "-o", str(out), str(ROOT)], check=True)
    (built,) = out.glob("eddy-*.whl")
    return built


def test_the_wheel_holds_the_product_and_no_tool(wheel: Path) -> None:
    import eddy

    assert wheel.name.startswith(f"eddy-{eddy.__version__}-")
    names = zipfile.ZipFile(wheel).namelist()
    packages = {name.split("/")[0] for name in names if name.endswith(".py")}
    assert packages == PRODUCT
    assert "eddy/api/static/dashboard.js" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "eddy = eddy.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_a_clean_virtualenv_runs_an_app_without_the_tools(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True
    )
    assert (venv / "bin" / "eddy").exists()  # the console script
    # The project's locked dependencies, but not the project: a path line, which
    # does not run the editable install's .pth that would put the repository back.
    where = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.check_output([python, "-c", where], text=True).strip())
    (site / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    user = write_package(tmp_path / "user")
    probe = (
        "import importlib.util, eddy, eddy.examples\n"
        "others = ('tools', 'bench', 'tests', 'service', 'tables', 'api', 'agents', 'spark_jobs')\n"
        "missing = [m for m in others if importlib.util.find_spec(m)]\n"
        "assert not missing, missing\n"
        "assert eddy.__file__.startswith(" + repr(str(venv)) + "), eddy.__file__\n"
        "from clickstream.app import app, Click\n"
        "from eddy import TestDriver\n"
        "with TestDriver(app) as d:\n"
        "    d.send('clicks', Click(user='ann', page='/', ts_ms=1_000))\n"
        "    d.send('clicks', Click(user='ann', page='/', ts_ms=70_000))\n"
        "    print(d.read('clicks-per-minute')[0].value['value'])\n"
    )
    env = {"PATH": str(venv / "bin"), "HOME": str(tmp_path)}
    done = subprocess.run(
        [python, "-c", probe], cwd=user, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"
    clicks = tmp_path / "clicks.jsonl"
    clicks.write_bytes(
        b"".join(
            orjson.dumps({"topic": "clicks", "record": {"user": "bob", "page": "/", "ts_ms": ts}})
            + b"\n"
            for ts in (5_000, 6_000, 65_000)
        )
    )
    replayed = subprocess.run(
        [venv / "bin" / "eddy", "replay", "--app", "clickstream.app:app",
         "--agent", "clicks_per_minute", "--input", str(clicks)],
        cwd=user, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert replayed.returncode == 0, replayed.stderr
    (window,) = [orjson.loads(line) for line in replayed.stdout.splitlines()]
    assert (window["topic"], window["value"]["value"]) == ("clicks-per-minute", 2)
