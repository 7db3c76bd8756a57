#!/usr/bin/env bash
echo hello >> /workdir/greeting.txt
