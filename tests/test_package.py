"""The installed package: a wheel of this checkout holds every file its modules read at run time."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_a_wheel_holds_every_file_beside_the_modules(tmp_path: Path) -> None:
    # Built from a copy: setuptools writes build/ and *.egg-info into the tree it builds.
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(REPO / "pyproject.toml", source)
    shutil.copytree(REPO / "gpu_tenancy", source / "gpu_tenancy", ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--wheel-dir", str(tmp_path / "wheel"), str(source)],
        capture_output=True, text=True, check=False,
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "wheel").glob("gpu_tenancy-*.whl")
    packed = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(["git", "ls-files", "gpu_tenancy"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.split()
    assert tracked, "no tracked file under gpu_tenancy/"
    missing = sorted(path for path in tracked if path not in packed)
    assert missing == []
