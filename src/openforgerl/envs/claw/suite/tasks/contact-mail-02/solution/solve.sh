#!/usr/bin/env bash
# Oracle: replays solution/actions.json through the shell CLI.
set -euo pipefail
claw() { "${OPENFORGERL_PYTHON:-python3}" -m openforgerl.envs.claw.cli "$@"; }

claw contacts find --query Priya
claw mail send --to priya@northwind.com --subject 'Invoice 2231' --body 'Invoice 2231 was paid today.'
