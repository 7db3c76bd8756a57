#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw mail search --query Priya
claw mail reply --id m7 --body 'Thursday at 12:30 works, see you there!'
