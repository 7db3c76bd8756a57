"""The viewer as an aiohttp app bound to 127.0.0.1 only. Routes:

- `GET /`: runs, tasks shared by the runs
- `GET /run/{i}?task=&harness=&status=&kind=&version=&infra=&q=&page=`: the rollout table (paged in SQL)
- `GET /run/{i}/rollout/{id}`: one rollout: summary, behaviour, verifier, tool events, call timeline,
  token view, screens, audit, files
- `GET /run/{i}/file/{id}/{path}`: a kept file of that rollout (inside `rollouts/<id>/`, links refused)
- `GET /compare?task=&a=&b=`: two rollouts of one task side by side (run 0 vs run 1), tool calls aligned

Anything else, or any path that would leave the run directory, is 404. Page work runs in a thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from aiohttp import web

from openforgerl.viewer.render import Renderer
from openforgerl.viewer.site import Links, Page, Site

__all__ = ["make_app", "serve"]

HOST = "127.0.0.1"


def make_app(site: Site) -> web.Application:
    renderer = Renderer(Links(static=False))
    app = web.Application()

    async def page(build: Callable[[], Page | None]) -> web.Response:
        built = await asyncio.to_thread(lambda: _html(renderer, build()))
        if built is None:
            raise web.HTTPNotFound(text="not found")
        return web.Response(text=built, content_type="text/html")

    async def home(request: web.Request) -> web.Response:
        return await page(site.home_page)

    async def table(request: web.Request) -> web.Response:
        i = _int(request.match_info["i"])
        n = _int(request.query.get("page", "1")) or 1
        return await page(lambda: site.table_page(i, dict(request.query), n))

    async def rollout(request: web.Request) -> web.Response:
        i = _int(request.match_info["i"])
        return await page(lambda: site.rollout_page(i, request.match_info["rid"]))

    async def compare(request: web.Request) -> web.Response:
        q = request.query
        return await page(lambda: site.compare_page(q.get("task", ""), q.get("a"), q.get("b")))

    async def file(request: web.Request) -> web.StreamResponse:
        i = _int(request.match_info["i"])
        path = site.file_path(i, request.match_info["rid"], request.match_info["path"])
        if path is None:
            raise web.HTTPNotFound(text="not found")
        return web.FileResponse(
            path,
            headers={
                "Content-Disposition": "inline",
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "sandbox",
            },
        )

    app.router.add_get("/", home)
    app.router.add_get("/run/{i}", table)
    app.router.add_get("/run/{i}/rollout/{rid}", rollout)
    app.router.add_get("/run/{i}/file/{rid}/{path:.+}", file)
    app.router.add_get("/compare", compare)
    return app


def _html(renderer: Renderer, page: Page | None) -> str | None:
    return None if page is None else renderer.render(page)


def _int(text: str) -> int:
    return int(text) if text.isdigit() else -1


def serve(site: Site, port: int) -> None:
    web.run_app(make_app(site), host=HOST, port=port, print=None)
