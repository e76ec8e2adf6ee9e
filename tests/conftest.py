from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@pytest.fixture
def shared() -> Path:
    if not (SHARED / "schemas").is_dir():
        pytest.skip(f"upstream schemas and charts not found at {SHARED} (../shared is absent)")
    return SHARED
