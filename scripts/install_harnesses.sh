#!/usr/bin/env bash
# Install the pinned harness CLIs (npm + PyPI only) under $OPENFORGERL_TOOLS (default <repo>/.tools).
# Idempotent: a CLI whose stamp matches its pinned spec is skipped, so a second run takes about a second.
# Usage: scripts/install_harnesses.sh [codex claude_code qwen_code openclaw opencode mini_swe_agent]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export OPENFORGERL_TOOLS="${OPENFORGERL_TOOLS:-$repo/.tools}"
exec python -m openforgerl.harness.command_main install "$@"
