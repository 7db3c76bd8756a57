"""The attacker: run inside a GUI sandbox as the harness would be (python -I, cwd /workdir).

argv: SOLUTION_PATH HOST_ADDR. Prints one JSON object with what it could and could not do; never
raises, so the test reads every result.
"""

import json
import os
import re
import socket
import sys
import time
import urllib.error
import urllib.request

solution, host_addr = sys.argv[1], sys.argv[2]
out = {}


def status(url, data=None, headers=None, method=None):
    req = urllib.request.Request(url, data=data, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception as e:
        return repr(e)


for _ in range(300):  # the screen is up (what a harness waits for)
    if status("http://127.0.0.1:8765/healthz") == 200:
        break
    time.sleep(0.2)

out["state_plain"] = status("http://127.0.0.1:8080/__state")
out["state_guess"] = status("http://127.0.0.1:8080/__state", headers={"X-Openforgerl-Token": "0" * 32})
out["state_post"] = status("http://127.0.0.1:8080/__state", data=b'{"board": {}}')
out["state_put"] = status("http://127.0.0.1:8080/__state", data=b"{}", method="PUT")
out["locate_plain"] = status("http://127.0.0.1:8765/locate", data=b'{"selector": "body"}')

# Hunt for the token: every readable cmdline/environ and file in the agent's space.
seen, found = 0, set()
hexes = re.compile(rb"[0-9a-f]{32}")
paths = [f"/proc/{p}/{f}" for p in os.listdir("/proc") if p.isdigit() for f in ("cmdline", "environ")]
for top in ("/workdir", "/tmp"):
    for d, _, files in os.walk(top):
        paths += [os.path.join(d, f) for f in files]
for p in paths:
    try:
        with open(p, "rb") as fh:
            data = fh.read(256 * 1024)
    except OSError:
        continue
    seen += 1
    found.update(h.decode() for h in hexes.findall(data))
out["files_read"], out["hex_candidates"] = seen, sorted(found)

# Forge: rewrite the environment config, and try to take over the apps port.
try:
    with open("/workdir/.gui/config.json", "w") as fh:
        json.dump(
            {
                "kind": "browser",
                "apps": {"board": {"cards": [{"id": "c1", "title": "Write report", "column": "done"}]}},
            },
            fh,
        )
    out["config_rewritten"] = True
except OSError as e:
    out["config_rewritten"] = repr(e)
s = socket.socket()
try:
    s.bind(("127.0.0.1", 8080))
    out["port_taken"] = True
except OSError as e:
    out["port_taken"] = e.errno
finally:
    s.close()


# Outside network.
def reach(addr, port):
    try:
        socket.create_connection((addr, port), timeout=2).close()
        return True
    except OSError as e:
        return e.errno or repr(e)


out["net"] = {f"{a}:{p}": reach(a, p) for a, p in (("1.1.1.1", 80), ("8.8.8.8", 53), (host_addr, 22))}
try:
    socket.getaddrinfo("example.com", 80)
    out["dns"] = True
except OSError as e:
    out["dns"] = repr(e)

try:
    with open(solution) as fh:
        out["solution"] = fh.read()[:200]
except OSError as e:
    out["solution"] = None
    out["solution_error"] = repr(e)

out["pids_visible"] = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
listening = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        rows = open(table).read().splitlines()[1:]
    except OSError:
        continue
    listening |= {int(r.split()[1].rsplit(":", 1)[1], 16) for r in rows if r.split()[3] == "0A"}
out["listening"] = sorted(listening)  # no DevTools port: Playwright drives Chromium over a pipe
print(json.dumps(out), flush=True)
# Last: kill everything we can see (our own PID namespace only; this process included).
os.system("kill -9 -1 2>/dev/null")
