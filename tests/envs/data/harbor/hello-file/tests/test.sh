#!/usr/bin/env bash
mkdir -p /logs/verifier
if grep -q hello /workdir/greeting.txt; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
