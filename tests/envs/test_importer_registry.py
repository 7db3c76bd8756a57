"""`tasks import` finds each format's importer through the `openforgerl.importers` entry points: each
lives in the environment it feeds, and the core that runs them names none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from openforgerl.errors import UnknownNameError
from openforgerl.tasks.importing import IMPORTERS, SHIPPED, TaskImporter, _importer, importer_for

OWNERS = {
    "claw-eval": "openforgerl.envs.claw.importers",
    "qwenclawbench": "openforgerl.envs.claw.importers",
    "tau2": "openforgerl.envs.tau2.importer",
    "webvoyager": "openforgerl.envs.gui.importing",
    "online-mind2web": "openforgerl.envs.gui.importing",
    "osworld": "openforgerl.envs.gui.importing",
}


def test_every_shipped_format_is_registered_by_the_environment_it_feeds() -> None:
    assert set(SHIPPED) <= set(IMPORTERS.names())
    for fmt, module in OWNERS.items():
        assert IMPORTERS.get(fmt).run.__module__ == module, fmt


def test_looking_one_format_up_imports_only_its_environment() -> None:
    code = (
        "import sys\nfrom openforgerl.tasks.importing import IMPORTERS\nIMPORTERS.get('tau2')\n"
        "print(' '.join(m for m in sys.modules if m.startswith('openforgerl.envs.')))"
    )
    loaded = set(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()
    )
    assert "openforgerl.envs.tau2.importer" in loaded
    assert not any(m.startswith(("openforgerl.envs.claw", "openforgerl.envs.gui")) for m in loaded), loaded


def test_an_unknown_format_is_the_same_one_line_as_ever(tmp_path: Path) -> None:
    with pytest.raises(UnknownNameError) as caught:
        importer_for(tmp_path, "clawbench")
    assert str(caught.value) == (
        "unknown format 'clawbench' (claw-eval | qwenclawbench | tau2 | webvoyager | "
        "online-mind2web | osworld | auto)"
    )


def test_an_entry_point_naming_no_importer_is_refused() -> None:
    with pytest.raises(TypeError, match="task importer entry point names function, not a TaskImporter"):
        _importer(importer_for)
    shipped = IMPORTERS.get("tau2")
    assert _importer(shipped) is shipped  # control: a TaskImporter is adopted as is
    assert isinstance(shipped, TaskImporter)
