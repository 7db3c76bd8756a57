"""A scripted "harness" for orchestrator tests: one model call with the official openai SDK.

argv: MODE INSTRUCTION. Modes: ok (write the model's answer to proof.txt, exit 0), fail (write it,
exit 2), runaway (fork children that ignore SIGTERM, then hang), crash-before-call (print a config
error and exit 1 at once), exit-0-before-call (exit 0 without asking), retry-forever (ask again every
half second while the engine fails, as some real CLIs do), huge-max-tokens (ask with max_tokens 100000,
write the answer, exit 0), overflow-loop (a prompt too long for the context, then a summary call, then
the long prompt again, until something other than a 400 ends it, as opencode did with SmolLM2),
answer-then-overflow-loop (one ordinary call first, then the same loop), parallel-long (eight
calls at once, each asking max_tokens 100000, then exit 1 when any fails).
"""

import os
import signal
import subprocess
import sys
import time

import openai

mode, instruction = sys.argv[1], sys.argv[-1]
if mode == "crash-before-call":
    print("starting agent", flush=True)
    print("error: cannot read ~/.agent/settings.json: no such file", file=sys.stderr)
    sys.exit(1)
if mode == "exit-0-before-call":
    sys.exit(0)
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
            client.chat.completions.create(
                model=os.environ["OPENFORGERL_MODEL"], messages=[{"role": "user", "content": instruction}]
            )
        except openai.APIError:
            pass
        time.sleep(0.5)
if mode in ("overflow-loop", "answer-then-overflow-loop"):
    model = os.environ["OPENFORGERL_MODEL"]
    if mode == "answer-then-overflow-loop":
        client.chat.completions.create(model=model, messages=[{"role": "user", "content": instruction}])
    while True:
        try:
            client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": instruction + " pad" * 600}]
            )
        except openai.BadRequestError:
            client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "Summarize: " + instruction}]
            )
if mode == "parallel-long":
    from concurrent.futures import ThreadPoolExecutor

    def ask(_: int) -> str:
        return (
            client.chat.completions.create(
                model=os.environ["OPENFORGERL_MODEL"],
                max_tokens=100000,
                messages=[{"role": "user", "content": instruction}],
            )
            .choices[0]
            .message.content
            or ""
        )

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(8)))
    sys.exit(0)
extra = {"max_tokens": 100000} if mode == "huge-max-tokens" else {}
reply = client.chat.completions.create(
    model=os.environ["OPENFORGERL_MODEL"], messages=[{"role": "user", "content": instruction}], **extra
)
with open("/workdir/proof.txt", "w") as fh:
    fh.write(reply.choices[0].message.content or "")
sys.exit(2 if mode == "fail" else 0)
