#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw files write --path notes_travel.txt --content 'hotel flight' || { sleep 0.2; claw files write --path notes_travel.txt --content 'hotel flight'; }
