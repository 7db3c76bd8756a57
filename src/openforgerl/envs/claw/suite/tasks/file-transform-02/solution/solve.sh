#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw files read --path team.txt
claw files write --path team_sorted.txt --content 'Bob Chen
Carol Diaz
Dana Whitfield
'
