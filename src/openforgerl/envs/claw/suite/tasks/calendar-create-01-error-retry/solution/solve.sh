#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw calendar create --title 'Design review' --start 2026-03-05T14:00 --end 2026-03-05T15:00 --attendees dana.w@acme.io || { sleep 0.2; claw calendar create --title 'Design review' --start 2026-03-05T14:00 --end 2026-03-05T15:00 --attendees dana.w@acme.io; }
