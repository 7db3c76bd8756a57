"""An OpenAI-compatible upstream (vLLM or SGLang) with their exact-token extensions turned on.

Per call we inject the knobs that make the engine return what it consumed and sampled:
* vLLM: `return_token_ids`, `logprobs`, `top_logprobs: 0`, and `include_reasoning: true` (forced:
  false would hide token ids). Non-stream: top-level `prompt_token_ids`, `choices[0].token_ids`;
  stream: `prompt_token_ids` on the first chunk, `token_ids` on every chunk.
* SGLang: non-stream `return_token_ids` + `return_meta_info`; stream via the headers
  `x-sglext-return-input-ids/-output-ids: 1` (ids arrive in a final `sglext` chunk).
The engine's bytes are forwarded as they came (extension fields included; clients ignore them).
Replicas: a rollout is pinned to one replica by a stable hash of its id (prefix-cache reuse, and
two gateway replicas agree on the pin); calls without a rollout go round-robin.
Connections: aiohttp pool whose keep-alive is shorter than the engine's, and a request that meets a
stale pooled connection (closed by the engine while idle) is retried once.
Reading the answers (per dialect, from the parsed bodies or straight from the bytes) is openai_answers.py.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
import yarl

from openforgerl.engines.base import EngineCall, EngineChunk, EngineError, EngineResult, PromptIds
from openforgerl.engines.openai_answers import (
    DONE,
    DONE_EVENT,
    ERROR_KEY,
    FINISHED,
    NO_CHOICES,
    Dialect,
    Extract,
    chunk_of_bodies,
    data_of,
    error_message,
    protocol_error,
    scan_events,
    split_prompt_ids,
)
from openforgerl.records import CallErrorKind

__all__ = ["Dialect", "OpenAICompatEngine", "Upstream", "chunk_of_bodies", "scan_events", "split_prompt_ids"]

_STALE = (aiohttp.ServerDisconnectedError, aiohttp.ClientConnectionResetError)


@dataclass(frozen=True)
class Upstream:
    """One engine replica: `root` is its server root, `api` the `/v1` base."""

    root: str
    engine_id: str

    @property
    def api(self) -> str:
        return self.root + "/v1"

    @functools.cached_property
    def chat_url(self) -> yarl.URL:
        """Parsed once: aiohttp would parse a string URL again on every call."""
        return yarl.URL(self.api + "/chat/completions")

    @classmethod
    def parse(cls, url: str) -> Upstream:
        root = url.rstrip("/")
        root = root[: -len("/v1")] if root.endswith("/v1") else root
        return cls(root, root.split("://", 1)[-1])


class OpenAICompatEngine:
    """The gateway's client for one or more OpenAI-compatible engine replicas."""

    # The body is serialised here, so the gateway may leave its lifted image data URLs out of it and
    # have them spliced into the bytes (`EngineCall.splice`, gateway/lifted.py).
    splices_payload = True

    def __init__(
        self,
        urls: list[str] | str,
        *,
        dialect: Dialect | str = Dialect.VLLM,
        model: str | None = None,
        api_key: str | None = None,
        keepalive_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        read_idle_s: float | None = None,
        max_tokens_cap: int | None = None,
        max_tokens_clamp: int | None = None,
    ) -> None:
        urls = [urls] if isinstance(urls, str) else urls
        if not urls:
            raise ValueError("at least one engine URL is required")
        self.upstreams = [Upstream.parse(u) for u in urls]
        self.dialect = Dialect(dialect)
        self.model = model
        self.max_tokens_cap = max_tokens_cap  # clamp client max_tokens (Claude Code asks for 32000)
        # clamp only, never added to a body without one: the budget-derived default (`Config.max_tokens_cap`),
        # which may exceed a small model's context, where vLLM refuses prompt + max_tokens > context
        self.max_tokens_clamp = max_tokens_clamp
        self._extract = Extract(self.dialect)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._keepalive_s = keepalive_s
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=connect_timeout_s, sock_read=read_idle_s
        )
        self._rr = itertools.count()
        self._processors: dict[str, dict[str, Any] | None] = {}
        self._no_detokenize: set[str] = set()  # replicas without `/detokenize` (verbatim history off there)
        self._session: aiohttp.ClientSession | None = None

    # -- plumbing ------------------------------------------------------------------------------
    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0, keepalive_timeout=self._keepalive_s, ttl_dns_cache=None)
            # No cookie jar: an engine's cookies are not the harness's business, and filtering
            # them on every call is measurable on the hot path.
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=self._timeout,
                cookie_jar=aiohttp.DummyCookieJar(),
                json_serialize=lambda o: orjson.dumps(o).decode(),
            )
        return self._session

    def pick(self, route_key: str) -> Upstream:
        """The replica for a rollout: a stable hash when there is a key, round-robin otherwise."""
        n = len(self.upstreams)
        if n == 1:
            return self.upstreams[0]
        slot = zlib.crc32(route_key.encode()) if route_key else next(self._rr)
        return self.upstreams[slot % n]

    async def _model(self, upstream: Upstream) -> str:
        if self.model is None:
            names = await self._list_models(upstream)
            if not names:
                raise protocol_error("engine serves no model")
            self.model = names[0]
        return self.model

    async def image_processor(self, route_key: str) -> dict[str, Any] | None:
        """The image processor settings of the replica serving `route_key`, from its `/v1/models` card
        (`openforgerl_processor`: our local engine reports them there; vLLM does not, so None). Read once
        per replica; the gateway records them on calls that carry images."""
        upstream = self.pick(route_key)
        key = upstream.api
        if key not in self._processors:
            card = (await self._get_json(upstream.api + "/models")).get("data") or [{}]
            found = card[0].get("openforgerl_processor") if isinstance(card[0], dict) else None
            self._processors[key] = found if isinstance(found, dict) else None
        return self._processors[key]

    async def healthy(self, route_key: str) -> bool:
        """The replica serving `route_key` answers `GET /health` with 200 (vLLM and SGLang both serve
        it, outside their request queue): the gateway's stall check asks it, never a rollout."""
        upstream = self.pick(route_key)
        try:
            async with self._client().get(upstream.root + "/health", headers=self._headers) as resp:
                await resp.read()
                return resp.status == 200
        except (aiohttp.ClientError, OSError):
            return False

    async def _list_models(self, upstream: Upstream) -> list[str]:
        body = await self._get_json(upstream.api + "/models")
        return [m["id"] for m in body.get("data") or []]

    async def _get_json(self, url: str) -> dict[str, Any]:
        try:
            async with self._client().get(url, headers=self._headers) as resp:
                data = await resp.read()
                if resp.status != 200:
                    raise EngineError(
                        CallErrorKind.ENGINE_HTTP, error_message(data, resp.status), status=resp.status
                    )
                found: dict[str, Any] = orjson.loads(data)
                return found
        except aiohttp.ClientError as exc:
            raise EngineError(CallErrorKind.ENGINE_CONNECTION, f"{url}: {exc!r}") from exc

    def _prepare(
        self, body: dict[str, Any], model: str, stream: bool, splice: Callable[[bytes], bytes] | None = None
    ) -> tuple[bytes, dict[str, str]]:
        out = dict(body)
        out["model"] = model
        out["stream"] = stream
        if not stream:
            out.pop("stream_options", None)
        if self.max_tokens_cap is not None:
            # Clamp what the client asked for, and cap what it did not ask for: zero and Codex send no
            # max_tokens, and vLLM then allows the whole remaining context.
            keys = [k for k in ("max_tokens", "max_completion_tokens") if isinstance(out.get(k), int)]
            for key in keys:
                out[key] = min(out[key], self.max_tokens_cap)
            if not keys:
                out["max_tokens"] = self.max_tokens_cap
        elif self.max_tokens_clamp is not None:
            for key in ("max_tokens", "max_completion_tokens"):
                if isinstance(out.get(key), int):
                    out[key] = min(out[key], self.max_tokens_clamp)
        headers = dict(self._headers)
        headers["Content-Type"] = "application/json"
        if self.dialect == Dialect.VLLM:
            out["return_token_ids"] = True
            out["include_reasoning"] = True
            if not out.get("logprobs"):
                out["logprobs"], out["top_logprobs"] = True, 0
        else:
            out.setdefault("logprobs", True)
            if stream:
                headers["x-sglext-return-input-ids"] = "1"
                headers["x-sglext-return-output-ids"] = "1"
            else:
                out["return_token_ids"] = True
                out["return_meta_info"] = True
        payload = orjson.dumps(out)
        return (payload if splice is None else splice(payload)), headers

    async def _post(
        self, upstream: Upstream, payload: bytes, headers: dict[str, str]
    ) -> aiohttp.ClientResponse:
        """POST the chat body; one retry when a pooled connection turns out to be stale."""
        url = upstream.chat_url
        for attempt in (0, 1):
            try:
                resp = await self._client().post(url, data=payload, headers=headers)
            except _STALE as exc:
                if attempt == 0:
                    continue
                raise EngineError(CallErrorKind.ENGINE_CONNECTION, f"{upstream.engine_id}: {exc!r}") from exc
            except aiohttp.ClientError as exc:
                raise EngineError(CallErrorKind.ENGINE_CONNECTION, f"{upstream.engine_id}: {exc!r}") from exc
            if resp.status == 200:
                return resp
            data = await resp.read()
            resp.release()
            raise EngineError(
                CallErrorKind.ENGINE_HTTP, error_message(data, resp.status), status=resp.status, body=data
            )
        raise AssertionError("unreachable")

    # -- Engine protocol -----------------------------------------------------------------------
    async def complete(self, call: EngineCall) -> EngineResult:
        upstream = self.pick(call.route_key)
        payload, headers = self._prepare(
            call.body, await self._model(upstream), stream=False, splice=call.splice
        )
        resp = await self._post(upstream, payload, headers)
        try:
            raw = await resp.read()
        except aiohttp.ClientError as exc:
            raise EngineError(CallErrorKind.ENGINE_CONNECTION, f"{upstream.engine_id}: {exc!r}") from exc
        finally:
            resp.release()
        split = split_prompt_ids(raw) if self.dialect == Dialect.VLLM else None
        try:
            body = orjson.loads(raw if split is None else split[0])
            if split is not None and "prompt_token_ids" in body:  # a second copy: read the whole body
                split, body = None, orjson.loads(raw)
            prompt, ids, lps, finish = self._extract.result(body, prompt_split=split is not None)
        except (orjson.JSONDecodeError, AttributeError, TypeError, KeyError) as exc:
            raise protocol_error(f"malformed engine answer: {exc!r}") from exc
        ids_of_prompt = PromptIds(json=split[1]) if split is not None else PromptIds(ids=prompt)
        return EngineResult(body, ids_of_prompt, ids, lps, finish, upstream.engine_id, raw)

    async def stream(self, call: EngineCall) -> AsyncIterator[EngineChunk]:
        """EngineChunks as network reads complete SSE events (one per read, or two when a read
        ends in final events), until `[DONE]`."""
        upstream = self.pick(call.route_key)
        payload, headers = self._prepare(
            call.body, await self._model(upstream), stream=True, splice=call.splice
        )
        resp = await self._post(upstream, payload, headers)
        engine_id = upstream.engine_id
        buf, finished = b"", False
        try:
            async for data in resp.content.iter_any():
                if not buf and data.endswith(b"\n\n"):  # the usual case: whole events, no copies
                    complete = data
                else:
                    buf += data
                    cut = buf.rfind(b"\n\n")
                    if cut < 0:
                        continue
                    complete, buf = buf[: cut + 2], buf[cut + 2 :]
                chunks, done = self._read(complete, engine_id, call.raw_only)
                for chunk in chunks:
                    finished = finished or chunk.final
                    yield chunk
                if done:
                    return
        except aiohttp.ClientError as exc:
            raise EngineError(CallErrorKind.ENGINE_CONNECTION, f"{engine_id}: stream broke: {exc!r}") from exc
        finally:
            resp.close()  # abandoning mid-stream closes the socket: the engine aborts the request
        if not finished:
            raise EngineError(
                CallErrorKind.ENGINE_CONNECTION, f"{engine_id}: stream ended before it finished"
            )

    def _read(self, complete: bytes, engine_id: str, raw_only: bool) -> tuple[list[EngineChunk], bool]:
        """The chunks of one read. For `raw_only` callers (they forward `raw`), vLLM's events are
        passed on unread, to be decoded once per call (`EngineChunk.decode`): with a real engine's
        pacing every token is its own read, and reading each one alone cost more than forwarding
        it. Only an error event is read at once. Other callers get every read parsed."""
        if raw_only and self.dialect == Dialect.VLLM:
            done = complete.endswith(DONE_EVENT)
            body = complete[: -len(DONE_EVENT)] if done else complete
            if not body:
                return [], done
            if ERROR_KEY not in body:  # the key cannot occur inside a string value
                return self._unread(body, engine_id), done
        chunk, done = self._parse_read(complete, engine_id)
        return ([] if chunk is None else [chunk]), done

    def _unread(self, body: bytes, engine_id: str) -> list[EngineChunk]:
        """Unread chunks for `body`, cut before its first final event (finish reason or usage-only),
        so that the events before it go out now instead of being held back with it."""
        hits = [at for at in (body.find(FINISHED), body.find(NO_CHOICES)) if at >= 0]
        if not hits:
            return [EngineChunk({}, engine_id=engine_id, raw=body, decode=self._decode_events)]
        before = body.rfind(b"\n\n", 0, min(hits))
        cut = before + 2 if before >= 0 else 0  # where that event starts
        tail = EngineChunk({}, engine_id=engine_id, raw=body[cut:], final=True, decode=self._decode_events)
        if cut == 0:
            return [tail]
        return [EngineChunk({}, engine_id=engine_id, raw=body[:cut], decode=self._decode_events), tail]

    def _decode_events(self, events: bytes) -> EngineChunk | None:
        """Ids, logprobs, text, finish reason and prompt ids of events forwarded unread: read
        from the bytes when they have the usual shape, else parsed as JSON."""
        chunk = scan_events(events)
        return chunk if chunk is not None else self._parse_read(events, "")[0]

    def _parse_read(self, complete: bytes, engine_id: str) -> tuple[EngineChunk | None, bool]:
        """Parse every event of one read with a single `orjson.loads` (a JSON array of payloads)."""
        payloads: list[bytes] = []
        done = False
        raw = complete
        for block in complete.split(b"\n\n")[:-1]:
            payload = data_of(block)
            if payload is None:
                continue
            if payload == DONE:
                done = True
                raw = complete[: complete.find(block)]
                break
            payloads.append(payload)
        if not payloads:
            return None, done
        try:
            bodies = orjson.loads(b"[" + b",".join(payloads) + b"]")
        except orjson.JSONDecodeError as exc:
            raise protocol_error(f"malformed engine chunk: {exc!r}") from exc
        for body in bodies:
            if not isinstance(body, dict):
                raise protocol_error("engine chunk is not a JSON object")
            if "error" in body and "choices" not in body:
                raise EngineError(
                    CallErrorKind.ENGINE_HTTP, error_message(orjson.dumps(body), 500), status=500
                )
        return self._extract.events(bodies, raw, engine_id), done

    async def models(self) -> list[str]:
        return [await self._model(self.upstreams[0])]

    async def count_tokens(self, body: dict[str, Any]) -> int:
        """Prompt length via the engine's `/tokenize` (vLLM and SGLang both serve it)."""
        upstream = self.upstreams[0]
        req = {
            "model": await self._model(upstream),
            "messages": body.get("messages") or [],
            "add_generation_prompt": True,
        }
        if body.get("tools"):
            req["tools"] = body["tools"]
        try:
            async with self._client().post(
                upstream.root + "/tokenize", json=req, headers=self._headers
            ) as resp:
                data = await resp.read()
        except aiohttp.ClientError as exc:
            raise EngineError(CallErrorKind.ENGINE_CONNECTION, repr(exc)) from exc
        if resp.status != 200:
            raise EngineError(CallErrorKind.ENGINE_HTTP, error_message(data, resp.status), status=resp.status)
        out = orjson.loads(data)
        return int(out.get("count") or len(out.get("tokens") or []))

    async def detokenize(self, ids: list[int], route_key: str) -> str | None:
        """The text of sampled ids via the replica's `/detokenize` (vLLM and our local engine; specials
        kept, as the model wrote them); None when the replica does not serve it (asked once)."""
        upstream = self.pick(route_key)
        if upstream.root in self._no_detokenize:
            return None
        req = {"model": await self._model(upstream), "tokens": ids}
        try:
            async with self._client().post(
                upstream.root + "/detokenize", json=req, headers=self._headers
            ) as resp:
                data = await resp.read()
        except aiohttp.ClientError:
            return None
        if resp.status in (404, 405, 501):
            self._no_detokenize.add(upstream.root)
        if resp.status != 200:
            return None
        text = orjson.loads(data).get("prompt")
        return text if isinstance(text, str) else None

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            await asyncio.sleep(0)
