#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw mail search --query Carol
claw mail read --id m2
claw calendar create --title 'Vendor review' --start 2026-03-04T10:00 --end 2026-03-04T11:00 --attendees carol.diaz@acme.io --location Maple
claw mail reply --id m2 --body 'Confirmed: 2026-03-04 at 10:00. See you then.'
