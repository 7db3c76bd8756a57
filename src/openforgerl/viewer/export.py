"""`view --export DIR`: the same pages as static files, openable from disk without a server.

Layout: `index.html`, `run<i>-p<n>.html` (table pages), `run<i>-r-<id>.html` (rollouts),
`compare-<task>.html` (first rollout of each side), `files/run<i>/<id>/<n>.<ext>` (kept files, copied
through the same containment check as the server). The table's filters work in the browser, on the
rows of the page shown.

Kept files are what the agent wrote, so none of them may be active content in the bundle: the live
server sends them with `Content-Security-Policy: sandbox`, but a bundle opened from disk (file://) or
served by any static server has no headers, and the browser picks a file's type from its name (and
sniffs a name without a known extension). Headless Chromium ran the agent's script from `.html`,
`.svg`, `.xhtml` and extensionless copies. So a kept file is stored under a name the exporter makes
up (its index in the list), with an extension chosen from its bytes by `site.inert_suffix`: `.txt`
(text/plain; Chromium sniffs text/plain only for "binary or not", never for markup), `.png` / `.jpg`
/ `.gif` (a raster image, decoded as an image or not at all), else `.bin` (a download). The agent's
name is shown, escaped, on the rollout page only.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from openforgerl.viewer.render import Renderer
from openforgerl.viewer.site import Links, Page, Site, slug

__all__ = ["export_site"]


def export_site(site: Site, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    renderer = Renderer(Links(static=True))
    written = 0

    def write(name: str, page: Page | None) -> None:
        nonlocal written
        if page is not None:
            (out / name).write_text(renderer.render(page))
            written += 1

    write("index.html", site.home_page())
    for i, ix in enumerate(site.indexes):
        pages = max(1, -(-len(ix) // site.page_size))
        for n in range(1, pages + 1):
            write(f"run{i}-p{n}.html", site.table_page(i, {}, n))
            rows, _ = ix.page({}, (n - 1) * site.page_size, site.page_size)
            for row in rows:
                write(f"run{i}-r-{row.rollout_id}.html", site.rollout_page(i, row.rollout_id))
                _copy_files(site, i, row.rollout_id, out / "files" / f"run{i}" / row.rollout_id)
    for task in site.shared_tasks():
        write(f"compare-{slug(task)}.html", site.compare_page(task))
    return written


def _copy_files(site: Site, i: int, rollout_id: str, dest: Path) -> None:
    for f in site.artifact_files(site.runs[i], rollout_id):
        src = site.file_path(i, rollout_id, f["rel"])
        if src is not None:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest / f["bundle_name"])
