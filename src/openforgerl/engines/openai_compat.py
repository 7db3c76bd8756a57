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
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import re
import zlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import aiohttp
import orjson
import yarl

from openforgerl.engines.base import EngineCall, EngineChunk, EngineError, EngineResult, PromptIds
from openforgerl.records import CallErrorKind

_ERROR_KEY = b'"error"'
_NO_CHOICES = b'"choices":[]'  # a usage-only event: the last before [DONE]
_STALE = (aiohttp.ServerDisconnectedError, aiohttp.ClientConnectionResetError)
_FINISHED = b'"finish_reason":"'  # a non-null finish reason (the key cannot occur inside a string)
_DONE = b"[DONE]"
_DONE_EVENT = b"data: [DONE]\n\n"


class Dialect(StrEnum):
    VLLM = "vllm"
    SGLANG = "sglang"


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


def _logprobs(choice: dict[str, Any]) -> list[float]:
    content = (choice.get("logprobs") or {}).get("content") or []
    return [entry["logprob"] for entry in content]


def _protocol_error(message: str) -> EngineError:
    return EngineError(CallErrorKind.ENGINE_PROTOCOL, message)


class _Extract:
    """Reads ids/logprobs out of a dialect's bodies (pure; one instance per dialect)."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect

    def result(self, body: dict[str, Any], prompt_split: bool = False
               ) -> tuple[list[int] | None, list[int], list[float], str | None]:
        """Prompt ids, sampled ids, logprobs, finish reason; `prompt_split`: the prompt ids were
        already cut out of the body (`split_prompt_ids`), so None stands for them here."""
        choices = body.get("choices") or []
        if not choices:
            raise _protocol_error("engine answer has no choices")
        choice = choices[0]
        if self.dialect == Dialect.VLLM:
            prompt, ids = body.get("prompt_token_ids"), choice.get("token_ids")
            lps = _logprobs(choice)
        else:
            prompt, ids, lps = self._sglang(body, choice)
        if (prompt is None and not prompt_split) or ids is None:
            raise _protocol_error("engine answer lacks token ids (is return_token_ids supported?)")
        return prompt, ids, lps, choice.get("finish_reason")

    @staticmethod
    def _sglang(body: dict[str, Any], choice: dict[str, Any]) -> tuple[Any, Any, list[float]]:
        ext = body.get("sglext") or {}
        meta = choice.get("meta_info") or body.get("meta_info") or {}
        prompt = choice.get("prompt_token_ids") or ext.get("input_ids")
        ids = choice.get("response_token_ids") or choice.get("token_ids") or ext.get("output_ids")
        lps = _logprobs(choice) or [t[0] for t in meta.get("output_token_logprobs") or []]
        return prompt, ids, lps

    @staticmethod
    def events(bodies: list[dict[str, Any]], raw: bytes | None, engine_id: str) -> EngineChunk:
        """One EngineChunk for the chunk dicts of one network read (a tight loop: hot path)."""
        ids: list[int] = []
        lps: list[float] = []
        text: list[str] = []
        prompt, finish = None, None
        for body in bodies:
            if "prompt_token_ids" in body:
                prompt = body["prompt_token_ids"]
            choices = body.get("choices")
            if choices:
                c0 = choices[0]
                if tids := c0.get("token_ids"):
                    ids += tids
                if (lp := c0.get("logprobs")) and (content := lp.get("content")):
                    lps += [e["logprob"] for e in content]
                if (delta := c0.get("delta")) and (piece := delta.get("content")):
                    text.append(piece)
                if c0.get("finish_reason") is not None:
                    finish = c0["finish_reason"]
            elif (ext := body.get("sglext")) is not None:  # SGLang's final ids chunk
                ids += ext.get("output_ids") or []
                prompt = ext.get("input_ids", prompt)
        final = finish is not None or not bodies[-1].get("choices")
        prompt_ids = None if prompt is None else PromptIds(ids=prompt)
        return EngineChunk(bodies[-1], ids, lps, prompt_ids, finish, engine_id, raw,
                           bodies if len(bodies) > 1 else None, "".join(text), final)


# One chunk's ids, logprobs, text and finish out of parsed chunk dicts: also how the local engine's
# in-process stream reads the chunk dicts it would have sent over the wire.
chunk_of_bodies = _Extract.events


class OpenAICompatEngine:
    """The gateway's client for one or more OpenAI-compatible engine replicas."""

    # The body is serialised here, so the gateway may leave its lifted image data URLs out of it and
    # have them spliced into the bytes (`EngineCall.splice`, gateway/lifted.py).
    splices_payload = True

    def __init__(self, urls: list[str] | str, *, dialect: Dialect | str = Dialect.VLLM, model: str | None = None,
                 api_key: str | None = None, keepalive_s: float = 30.0, connect_timeout_s: float = 10.0,
                 read_idle_s: float | None = None, max_tokens_cap: int | None = None,
                 max_tokens_clamp: int | None = None) -> None:
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
        self._extract = _Extract(self.dialect)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._keepalive_s = keepalive_s
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout_s, sock_read=read_idle_s)
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
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout,
                                                  cookie_jar=aiohttp.DummyCookieJar(),
                                                  json_serialize=lambda o: orjson.dumps(o).decode())
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
                raise _protocol_error("engine serves no model")
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
                    raise EngineError(CallErrorKind.ENGINE_HTTP, _message(data, resp.status), status=resp.status)
                found: dict[str, Any] = orjson.loads(data)
                return found
        except aiohttp.ClientError as exc:
            raise EngineError(CallErrorKind.ENGINE_CONNECTION, f"{url}: {exc!r}") from exc

    def _prepare(self, body: dict[str, Any], model: str, stream: bool,
                 splice: Callable[[bytes], bytes] | None = None) -> tuple[bytes, dict[str, str]]:
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

    async def _post(self, upstream: Upstream, payload: bytes, headers: dict[str, str]) -> aiohttp.ClientResponse:
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
            raise EngineError(CallErrorKind.ENGINE_HTTP, _message(data, resp.status), status=resp.status, body=data)
        raise AssertionError("unreachable")

    # -- Engine protocol -----------------------------------------------------------------------
    async def complete(self, call: EngineCall) -> EngineResult:
        upstream = self.pick(call.route_key)
        payload, headers = self._prepare(call.body, await self._model(upstream), stream=False, splice=call.splice)
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
            raise _protocol_error(f"malformed engine answer: {exc!r}") from exc
        ids_of_prompt = PromptIds(json=split[1]) if split is not None else PromptIds(ids=prompt)
        return EngineResult(body, ids_of_prompt, ids, lps, finish, upstream.engine_id, raw)

    async def stream(self, call: EngineCall) -> AsyncIterator[EngineChunk]:
        """EngineChunks as network reads complete SSE events (one per read, or two when a read
        ends in final events), until `[DONE]`."""
        upstream = self.pick(call.route_key)
        payload, headers = self._prepare(call.body, await self._model(upstream), stream=True, splice=call.splice)
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
            raise EngineError(CallErrorKind.ENGINE_CONNECTION, f"{engine_id}: stream ended before it finished")

    def _read(self, complete: bytes, engine_id: str, raw_only: bool) -> tuple[list[EngineChunk], bool]:
        """The chunks of one read. For `raw_only` callers (they forward `raw`), vLLM's events are
        passed on unread, to be decoded once per call (`EngineChunk.decode`): with a real engine's
        pacing every token is its own read, and reading each one alone cost more than forwarding
        it. Only an error event is read at once. Other callers get every read parsed."""
        if raw_only and self.dialect == Dialect.VLLM:
            done = complete.endswith(_DONE_EVENT)
            body = complete[: -len(_DONE_EVENT)] if done else complete
            if not body:
                return [], done
            if _ERROR_KEY not in body:  # the key cannot occur inside a string value
                return self._unread(body, engine_id), done
        chunk, done = self._parse_read(complete, engine_id)
        return ([] if chunk is None else [chunk]), done

    def _unread(self, body: bytes, engine_id: str) -> list[EngineChunk]:
        """Unread chunks for `body`, cut before its first final event (finish reason or usage-only),
        so that the events before it go out now instead of being held back with it."""
        hits = [at for at in (body.find(_FINISHED), body.find(_NO_CHOICES)) if at >= 0]
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
            payload = _data_of(block)
            if payload is None:
                continue
            if payload == _DONE:
                done = True
                raw = complete[: complete.find(block)]
                break
            payloads.append(payload)
        if not payloads:
            return None, done
        try:
            bodies = orjson.loads(b"[" + b",".join(payloads) + b"]")
        except orjson.JSONDecodeError as exc:
            raise _protocol_error(f"malformed engine chunk: {exc!r}") from exc
        for body in bodies:
            if not isinstance(body, dict):
                raise _protocol_error("engine chunk is not a JSON object")
            if "error" in body and "choices" not in body:
                raise EngineError(CallErrorKind.ENGINE_HTTP, _message(orjson.dumps(body), 500), status=500)
        return self._extract.events(bodies, raw, engine_id), done

    async def models(self) -> list[str]:
        return [await self._model(self.upstreams[0])]

    async def count_tokens(self, body: dict[str, Any]) -> int:
        """Prompt length via the engine's `/tokenize` (vLLM and SGLang both serve it)."""
        upstream = self.upstreams[0]
        req = {"model": await self._model(upstream), "messages": body.get("messages") or [],
               "add_generation_prompt": True}
        if body.get("tools"):
            req["tools"] = body["tools"]
        try:
            async with self._client().post(upstream.root + "/tokenize", json=req, headers=self._headers) as resp:
                data = await resp.read()
        except aiohttp.ClientError as exc:
            raise EngineError(CallErrorKind.ENGINE_CONNECTION, repr(exc)) from exc
        if resp.status != 200:
            raise EngineError(CallErrorKind.ENGINE_HTTP, _message(data, resp.status), status=resp.status)
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
            async with self._client().post(upstream.root + "/detokenize", json=req, headers=self._headers) as resp:
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


_PROMPT_IDS_KEY = b'"prompt_token_ids":['
_ID_CHARS = b"0123456789,"
_TOKEN_IDS = re.compile(rb'"token_ids":\[([0-9][0-9,]*)\]')
_LOGPROB = re.compile(rb'"logprob":(-?[0-9][0-9.eE+-]*)[,}]')
# The delta shapes the scan knows: content (maybe after the role; group 1 is its JSON string),
# reasoning (not part of the response text), empty. Any other (tool calls, ...) goes to the parser.
_DELTA = re.compile(rb'"delta":\{(?:(?:"role":"assistant",)?"content":("(?:[^"\\]|\\.)*")|\}|"reasoning(?:_content)?":")')


def _array_bytes(raw: bytes, key: bytes, start_at: int = 0) -> bytes | None:
    """The compact array of non-negative ints after `key` (which ends in `[`), as bytes."""
    at = raw.find(key, start_at)
    if at < 0:
        return None
    start = at + len(key) - 1
    end = raw.find(b"]", start) + 1
    ids = raw[start:end]
    if end == 0 or ids.translate(None, _ID_CHARS) != b"[]" or b",," in ids or ids[1:2] == b"," or ids[-2:-1] == b",":
        return None
    return ids


def scan_events(raw: bytes) -> EngineChunk | None:
    """A run of vLLM chat.completion.chunk events read from their bytes, without parsing them:
    sampled ids and their logprobs (counts must agree), the content text, the finish reason, and
    the prompt ids kept as the engine's own JSON array. None when the run holds anything the scan
    is not certain of (top-k logprobs, tool calls, another delta shape, an error), so the caller
    parses it. Sound because these keys cannot occur inside a string value (quotes are escaped).
    On a 128-token stream it costs about half of parsing every event."""
    if _ERROR_KEY in raw or b'"top_logprobs":[{' in raw:
        return None
    # Framing: every event is one `data: {...}` line (what is inside is taken on trust, with the
    # counts below cross-checked; a malformed event sends the run to the parser, which says so).
    if not (raw.startswith(b"data: {") and raw.endswith(b"}\n\n")
            and raw.count(b"}\n\ndata: {") == raw.count(b"\n\n") - 1 == raw.count(b"\n") // 2 - 1):
        return None
    deltas = _DELTA.findall(raw)
    if len(deltas) != raw.count(b'"delta":'):
        return None
    texts = [t for t in deltas if t]
    try:
        ids = [int(x) for m in _TOKEN_IDS.findall(raw) for x in m.split(b",")]
        lps = [float(x) for x in _LOGPROB.findall(raw)]
        text = "".join(orjson.loads(b"[" + b",".join(texts) + b"]")) if texts else ""
    except (ValueError, orjson.JSONDecodeError):
        return None
    if len(ids) != len(lps):
        return None
    prompt = None
    if _PROMPT_IDS_KEY in raw:
        prompt = _array_bytes(raw, _PROMPT_IDS_KEY)
        if prompt is None:
            return None
    at = raw.rfind(_FINISHED)
    finish = raw[at + len(_FINISHED) : raw.index(b'"', at + len(_FINISHED))].decode() if at >= 0 else None
    return EngineChunk({}, ids, lps, None if prompt is None else PromptIds(json=prompt), finish, "", raw, None,
                       text, finish is not None)


def split_prompt_ids(raw: bytes) -> tuple[bytes, bytes] | None:
    """A vLLM answer's top-level `prompt_token_ids` cut out of its compact JSON: (the body without
    them, the ids as their JSON array bytes). None when the bytes are not laid out that way, and
    the caller parses the whole body.

    Why: the gateway stores prompt ids but never reads them, and parsing a 20k-token prompt's ids
    costs more than everything else the gateway does per call. The key cannot occur inside a string
    value (its quotes would be escaped), and the array is checked to hold only digits and commas,
    so the bytes spliced into the record are a valid JSON array of ints.
    """
    at = raw.rfind(_PROMPT_IDS_KEY)
    if at < 0:
        return None
    ids = _array_bytes(raw, _PROMPT_IDS_KEY, at)
    if ids is None:
        return None
    end = at + len(_PROMPT_IDS_KEY) - 1 + len(ids)
    if raw[at - 1 : at] == b",":
        return raw[: at - 1] + raw[end:], ids
    if raw[end : end + 1] == b",":
        return raw[:at] + raw[end + 1 :], ids
    return None


def _data_of(block: bytes) -> bytes | None:
    """The `data:` payload of one SSE event block (None for comments / named non-data events)."""
    if block[:6] == b"data: " and b"\n" not in block:
        return block[6:]
    block = block.strip(b"\r\n")
    lines = [ln[5:].lstrip(b" ") for ln in block.replace(b"\r\n", b"\n").split(b"\n") if ln.startswith(b"data:")]
    return b"\n".join(lines) if lines else None


def _message(data: bytes, status: int) -> str:
    """A readable error message from an engine's error body (OpenAI or FastAPI shape)."""
    try:
        body = orjson.loads(data)
    except orjson.JSONDecodeError:
        return f"engine answered {status}: {data[:500].decode('utf-8', 'replace')}"
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        return f"engine answered {status}: {err}"
    return f"engine answered {status}: {body}"
