"""The attacker: run inside a bubblewrap sandbox as the harness, with the rollout's base URL and key.

It knows everything an attacker could learn or guess (the admin port, another rollout's id) and
tries every admin action through every address it can reach, then prints one JSON line of what
happened. Standard library only: it runs under whatever Python the sandbox offers.
"""

import json
import os
import socket
import sys
import urllib.error
import urllib.request
from urllib.parse import urlsplit

intel = json.loads(sys.argv[-1].splitlines()[0])
base = os.environ["OPENAI_BASE_URL"]  # http://127.0.0.1:<forwarded port>/r/<own id>/v1
key = os.environ["OPENAI_API_KEY"]
fwd = urlsplit(base)
own = fwd.path.split("/")[2]
victim = intel["victim"]


def call(method, url, body=None, auth=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    if auth:
        req.add_header("Authorization", auth)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except urllib.error.URLError as e:
        return type(e.reason).__name__
    except OSError as e:
        return type(e).__name__


ATTACKS = [
    ("POST", "/admin/pause", None),
    ("POST", "/admin/pause?timeout=nan", None),
    ("POST", "/admin/resume", None),
    ("POST", f"/rollouts/{victim}/close", {}),
    ("GET", f"/rollouts/{victim}/calls", None),
    ("GET", f"/rollouts/{victim}", None),
    ("POST", "/rollouts", {"task_id": "forged", "reward": 1.0}),
    ("POST", f"/rollouts/{own}/reward", {"reward": 1.0}),
    ("POST", f"/rollouts/{own}/outcome", {"status": "ok", "reward": 1.0, "in_batch": True}),
    ("POST", f"/rollouts/{victim}/outcome", {"status": "agent_failed", "reward": 0.0}),
    ("GET", "/metrics", None),
]
roots = {
    "forwarded": f"http://{fwd.netloc}",
    "admin_port_inside": f"http://127.0.0.1:{intel['admin_port']}",
    "prefixed": f"http://{fwd.netloc}/r/{own}/v1/..",
}
auths = {"none": None, "own_key": f"Bearer {key}", "guessed": "Bearer admin"}
results = {}
for root_name, root in roots.items():
    for auth_name, auth in auths.items():
        for method, path, body in ATTACKS:
            results[f"{root_name}|{auth_name}|{method} {path}"] = call(method, root + path, body, auth)


def open_ports():
    found = []
    for port in range(1, 65536):
        with socket.socket() as s:
            s.settimeout(0.2)
            if s.connect_ex(("127.0.0.1", port)) == 0 and s.getsockname()[1] != port:  # not a self-connect
                found.append(port)
    return found


chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
victim_call = call("POST", f"http://{fwd.netloc}/r/{victim}/v1/chat/completions", chat, f"Bearer {key}")
host_admin = "unreachable"
for host in intel["host_addresses"]:
    with socket.socket() as s:
        s.settimeout(1)
        if s.connect_ex((host, intel["admin_port"])) == 0:
            host_admin = host
honest = call("POST", base + "/chat/completions", chat, f"Bearer {key}")
REFUSED = (404, "ConnectionRefusedError")
report = {
    "attempts": len(results),
    "statuses": sorted({str(v) for v in results.values()}),
    "not_refused": {k: v for k, v in results.items() if v not in REFUSED},
    "open_ports": open_ports(),
    "victim_call": victim_call,
    "host_admin": host_admin,
    "honest": honest,
    "fwd_port": fwd.port,
}
print(json.dumps(report, separators=(",", ":")))
