#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw mail search --query Priya
claw mail read --id m7
claw calendar create --title 'Lunch with Priya' --start 2026-03-05T12:30 --end 2026-03-05T13:30 --attendees priya@northwind.com
claw mail reply --id m7 --body 'Confirmed: 2026-03-05 at 12:30. See you then.'
