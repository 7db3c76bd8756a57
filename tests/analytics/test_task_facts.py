"""The task facts `analyze` reads from a task folder come through the SDK and the task's family, never by
importing an environment: a Claw task whose checks use Claw's own kinds still yields its facts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import openforgerl
from openforgerl.env.world_tools import tools_for

SHIPPED = Path(openforgerl.__file__).parent / "envs" / "claw" / "suite" / "tasks" / "calendar-cancel-01"
_TEXT_CHECK = '\n[[checks]]\nkind = "text"\nname = "said_done"\ncontains = ["cancelled"]\n'


def _fresh(code: str, root: Path) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter, where no test has imported Claw's verifier (its kinds unregistered)."""
    return subprocess.run(
        [sys.executable, "-I", "-c", code, str(root)], capture_output=True, text=True, timeout=120
    )


def _task_with_a_claw_kind(tmp_path: Path) -> Path:
    root = shutil.copytree(SHIPPED, tmp_path / "calendar-cancel-01")
    with (root / "tests" / "checks.toml").open("a") as f:
        f.write(_TEXT_CHECK)
    return root


def test_facts_of_a_task_whose_checks_use_claws_kinds(tmp_path: Path) -> None:
    root = _task_with_a_claw_kind(tmp_path)
    out = _fresh(
        "import json, sys\nfrom pathlib import Path\nfrom openforgerl.analytics.rundir import _load_facts\n"
        "f = _load_facts(Path(sys.argv[1]))\n"
        "print(json.dumps({'offered': f.offered, 'forbidden': [t for t, _ in f.forbidden]}))\n",
        root,
    )
    assert out.returncode == 0, out.stderr
    facts = json.loads(out.stdout)
    assert facts["forbidden"] == ["calendar_create"]
    assert facts["offered"] == [t.name for t in tools_for(services=["calendar", "files", "answer"])]


def test_control_the_same_spec_alone_is_refused_without_the_family(tmp_path: Path) -> None:
    """Control: parsed with the SDK alone (no task loaded, so no family registered its kinds), the same
    checks.toml is refused, so the facts above depend on the family's check having run."""
    root = _task_with_a_claw_kind(tmp_path)
    out = _fresh(
        "import sys\nfrom pathlib import Path\nfrom openforgerl.env.checks.spec import load_spec\n"
        "load_spec(Path(sys.argv[1]) / 'tests' / 'checks.toml')\n",
        root,
    )
    assert out.returncode != 0 and "Input tag 'text'" in out.stderr
