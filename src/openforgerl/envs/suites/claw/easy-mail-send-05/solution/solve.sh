#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw_cli "$@"; }

claw mail send --to mei@tanaka-design.jp --subject Logo --body 'I love the second logo draft.'
