"""Build a tiny local image without any registry: `podman import` of a busybox-static rootfs.

Used by the podman tests and benchmarks (and handy for users with an air-gapped box). Needs
`/usr/bin/busybox` from Debian's `busybox-static` (a static binary, so the rootfs is one file plus
applet symlinks, ~1 MB).
"""

from __future__ import annotations

import asyncio
import shutil
import tarfile
import tempfile
from pathlib import Path

from openforgerl.sandbox.podman import PodmanBackend

__all__ = ["BUSYBOX", "TEST_IMAGE", "ensure_busybox_image"]

BUSYBOX = Path("/usr/bin/busybox")
TEST_IMAGE = "localhost/openforgerl-busybox:latest"


def _rootfs_tar(dest: Path) -> Path:
    """A tar of / with /bin/busybox and one symlink per applet."""
    import subprocess

    applets = subprocess.run([str(BUSYBOX), "--list"], capture_output=True, text=True, check=True).stdout
    root = dest / "rootfs"
    for d in ("bin", "tmp", "workdir", "etc", "proc", "sys", "dev"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUSYBOX, root / "bin" / "busybox")
    for name in applets.split():
        if name != "busybox":
            (root / "bin" / name).symlink_to("busybox")
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    tar = dest / "rootfs.tar"
    with tarfile.open(tar, "w") as tf:
        tf.add(root, arcname=".")
    return tar


async def ensure_busybox_image(backend: PodmanBackend, tag: str = TEST_IMAGE) -> str:
    """Import the busybox image once (a no-op when `tag` exists); returns the tag."""
    if await backend.image_exists(tag):
        return tag
    if not await asyncio.to_thread(BUSYBOX.exists):
        raise FileNotFoundError(f"{BUSYBOX} missing: apt-get install busybox-static")
    with tempfile.TemporaryDirectory() as tmp:
        tar = await asyncio.to_thread(_rootfs_tar, Path(tmp))
        rc, _, err = await backend.run(
            "import",
            "--change",
            "ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "--change",
            'CMD ["/bin/sh"]',
            str(tar),
            tag,
        )
    if rc != 0:
        raise RuntimeError(f"podman import failed: {err.decode(errors='replace')}")
    return tag
