from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# Property tests run the same examples on every run, CI or not (Hypothesis' own "ci" profile: derandomised,
# no example database, no deadline). HYPOTHESIS_PROFILE=default draws fresh random examples instead.
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def shared() -> Path:
    if not (SHARED / "schemas").is_dir():
        pytest.skip(f"upstream schemas and charts not found at {SHARED} (../shared is absent)")
    return SHARED
