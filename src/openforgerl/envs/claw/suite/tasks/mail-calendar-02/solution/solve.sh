#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw mail search --query Mei
claw mail read --id m8
claw calendar create --title 'Logo review' --start 2026-03-06T15:00 --end 2026-03-06T15:30 --attendees mei@tanaka-design.jp
claw mail reply --id m8 --body 'Confirmed: 2026-03-06 at 15:00. See you then.'
