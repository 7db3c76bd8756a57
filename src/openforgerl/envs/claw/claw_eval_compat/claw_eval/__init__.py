"""openforgerl's stand-in for the parts of upstream Claw-Eval's `claw_eval` package its task graders use."""
