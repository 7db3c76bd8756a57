from __future__ import annotations

from pathlib import Path

import pytest

from viewer._fixture import build_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return build_runs(tmp_path_factory.mktemp("runs"))
