#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw calendar create --title 'Budget sync' --start 2026-03-10T11:00 --end 2026-03-10T11:30 --attendees carol.diaz@acme.io bob.chen@acme.io
