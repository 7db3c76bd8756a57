#!/usr/bin/env bash
# Install the pinned harness CLIs (npm + PyPI only) under $OPENFORGERL_TOOLS (default <repo>/.tools).
# Idempotent: a CLI whose stamp matches its pinned spec is skipped, so a second run takes about a second.
# GUI harnesses (libraries, driven by our small programs, see harness/ui_tars and harness/browser_use):
#   ui-tars      npm @ui-tars/sdk@1.2.3 (+ uuid@11.1.0, which it requires undeclared) on Node 24: 50 MB, 13 s
#                (25 s with Node 24 itself, 189 MB, shared with openclaw)
#   browser-use  PyPI browser-use==0.13.14 in its own venv: 364 MB, 59-84 s (no browser download: it
#                launches Debian's /usr/lib/chromium/chromium)
# Usage: scripts/install_harnesses.sh [codex claude_code qwen_code openclaw opencode mini_swe_agent ui-tars browser-use]
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export OPENFORGERL_TOOLS="${OPENFORGERL_TOOLS:-$repo/.tools}"
exec python -m openforgerl.cli harness install "$@"
