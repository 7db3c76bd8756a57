"""pytest markers shared by the suite (imported by tests only: this module needs pytest)."""

from __future__ import annotations

import shutil

import pytest

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
