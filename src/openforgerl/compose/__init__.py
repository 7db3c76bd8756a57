"""The wiring above the stages: each module here turns the one configuration (`openforgerl.config`) into
a stage's arguments and opens its services through the composition root (`openforgerl.stack`).

The stages take their settings and services as arguments and import neither the schema nor the
composition root (tests/test_layers.py holds that); what reads a `Config` lives here, in `stack.py` or
in the CLI. `train` wires the built-in trainer; `verl_loop` is the agent loop veRL loads through the
`verl.plugins` entry point, `verl_worker` the services of one veRL worker.
"""
