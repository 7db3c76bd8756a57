"""A fake Kubernetes API server for tests. **It is a simulation, not Kubernetes.**

No kube-apiserver can be installed on the project's machines, so this package speaks the subset of
the real wire protocol our Kubernetes backend uses, faithfully enough that unmodified clients
(lightkube, the official `kubernetes` client) work against it:

- discovery: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}/{version}`;
- Pods: create, get, list, watch (chunked JSON lines, resourceVersion resume, 410 on compacted
  versions, optional bookmarks), delete, `log`; `exec` over a websocket (`v5`/`v4.channel.k8s.io`);
- Services, Deployments, NetworkPolicies: create, get, list, delete (stored, not acted upon).

Its "kubelet" runs each of a Pod's containers as a local bubblewrap sandbox (host root read-only, image
ignored, no resource limits; the containers share the Pod's network namespace and emptyDir volumes, not
their PID namespaces) and writes phase, conditions and containerStatuses as a real
kubelet would. Faults a real cluster produces can be injected (`Faults`, `POST /__fault`): 410 watch
resets, dropped watches, 409 on create, 429/5xx on create, exec disconnects, stuck Pending
(ErrImagePull), Unschedulable, OOMKilled, Evicted.

What it does NOT do: authentication, admission, scheduling, networking (Services route nowhere),
resource limits, image pulls, the full validation of a real server (use kubernetes-validate), and
any kind not listed above. A passing test here says the client code is right about the protocol;
only `pytest -m k8s` against a real cluster says it works on Kubernetes.

Run standalone: `python -m openforgerl.testing.fake_kube --port 8001 [--kubeconfig PATH]`.
"""

from openforgerl.testing.fake_kube.faults import Faults
from openforgerl.testing.fake_kube.server import FakeKubeServer

__all__ = ["FakeKubeServer", "Faults"]
