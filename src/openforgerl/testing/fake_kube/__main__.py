"""`python -m openforgerl.testing.fake_kube`: run the fake API server until interrupted."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from openforgerl.testing.fake_kube.server import FakeKubeServer


async def serve(port: int, kubeconfig: Path | None) -> None:
    async with FakeKubeServer(port=port) as srv:
        if kubeconfig:
            srv.write_kubeconfig(kubeconfig)
        print(f"fake kube-apiserver (a simulation) at {srv.url}", flush=True)
        await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kubeconfig", type=Path)
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.kubeconfig))


if __name__ == "__main__":
    main()
