#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw calendar list
claw calendar update --id e1 --start 2026-03-03T10:00 --end 2026-03-03T10:15
