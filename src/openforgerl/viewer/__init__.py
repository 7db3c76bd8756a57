"""`openforgerl view`: a local web viewer for run directories (rollouts, calls, tokens, comparisons)."""
