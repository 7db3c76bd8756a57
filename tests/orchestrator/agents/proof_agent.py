"""A scripted "harness" for orchestrator tests: one model call with the official openai SDK.

argv: MODE INSTRUCTION. Modes: ok (write the model's answer to proof.txt, exit 0), fail (write it,
exit 2), runaway (fork children that ignore SIGTERM, then hang), crash-before-call (exit 1 at once),
retry-forever (ask again every half second while the engine fails, as some real CLIs do).
"""

import os
import signal
import subprocess
import sys
import time

import openai

mode, instruction = sys.argv[1], sys.argv[-1]
if mode == "crash-before-call":
    sys.exit(1)
if mode == "runaway":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    marker = os.environ.get("RUNAWAY_MARKER", "runaway-child")
    for _ in range(3):
        subprocess.Popen(["sh", "-c", f"trap '' TERM; exec -a {marker} sleep 1000"], start_new_session=True)
    time.sleep(1000)
client = openai.OpenAI(max_retries=0, timeout=120)
if mode == "retry-forever":
    while True:
        try:
            client.chat.completions.create(model=os.environ["OPENFORGERL_MODEL"],
                                           messages=[{"role": "user", "content": instruction}])
        except openai.APIError:
            pass
        time.sleep(0.5)
reply = client.chat.completions.create(
    model=os.environ["OPENFORGERL_MODEL"], messages=[{"role": "user", "content": instruction}])
with open("/workdir/proof.txt", "w") as fh:
    fh.write(reply.choices[0].message.content or "")
sys.exit(2 if mode == "fail" else 0)
