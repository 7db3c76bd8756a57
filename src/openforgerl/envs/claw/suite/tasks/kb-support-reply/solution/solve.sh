#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw mail list
claw mail read --id m6
claw kb search --query 'password reset'
claw kb read --id kb2
claw mail reply --id m6 --body 'Sorry about that! Reset links expire after 30 minutes. Please request a new link at https://id.acme.io/reset and use it right away.'
