"""The synchronous client of Recall's HTTP API (docs/api.md, "HTTP edge")."""

from __future__ import annotations

import json
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid as _uuid
from typing import Any, Iterable, Iterator, Mapping

from . import errors, events
from .types import (
    CommitReply,
    CompactReply,
    EditReply,
    ExtractResult,
    IndexReply,
    MemoryReply,
    PublishResult,
    QueryReply,
    ResolveReply,
    SessionIndex,
    SessionsPage,
    UserMemory,
)

STRUCTURED = "application/cloudevents+json"
BATCH = "application/cloudevents-batch+json"
JSON = "application/json"

__all__ = ["Client", "ensure_id"]


def ensure_id(ev: dict[str, Any]) -> dict[str, Any]:
    """Give an event without ``id`` one, in place, and return it.

    A message gets ``<subject>-<data.uuid>`` (the same for every retry or
    replay of that record); any other event a uuid4, written into the dict so
    that publishing the same dict again reuses it. ``specversion`` and
    ``source`` are filled in too when missing.
    """
    ev.setdefault("specversion", "1.0")
    ev.setdefault("source", events.DEFAULT_SOURCE)
    if not ev.get("id"):
        data = ev.get("data")
        record = data.get("uuid") if isinstance(data, dict) else None
        if ev.get("type") == events.MESSAGE and record and ev.get("subject"):
            ev["id"] = f"{ev['subject']}-{record}"
        else:
            ev["id"] = str(_uuid.uuid4())
    return ev


def _encode(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


class Client:
    """Recall's HTTP API.

    ``base_url`` is the HTTP edge (``http://127.0.0.1:8080`` for ``recall up``);
    ``token`` the tenant's bearer token (None in open mode). ``timeout`` bounds
    each request in seconds (the edge waits up to 120 s for a service).
    ``max_retries`` > 0 retries a 429 or 503 after its Retry-After (with
    jitter); that is safe for events, whose ids make a resend a duplicate.

    ``publish`` retries on its own: each attempt waits at most
    ``publish_timeout`` seconds (15; the ingest answers within its publish
    timeout, 10 s) for the reply, and a reply that does not come — lost
    with a node that died, a connection reset — or a 429/502/503/504 is
    answered by sending the same events (same ids: stored once) again,
    with a growing jittered pause, until ``retry_for`` seconds (120) have
    passed since the first attempt; then the last error is raised.
    ``retry_for=0`` sends once. ``publish_timeout`` must be shorter than
    ``retry_for`` (ValueError otherwise): an attempt that may wait the whole
    window leaves no time to resend a lost reply.

    Errors raise :class:`recall_client.RecallError` subclasses chosen by
    status (BadRequest, NotFound, TooLarge, TooManyRequests, Unavailable, …).
    """

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8080",
        token: str | None = None,
        *,
        timeout: float = 130.0,
        max_retries: int = 0,
        headers: Mapping[str, str] | None = None,
        publish_timeout: float = 15.0,
        retry_for: float = 120.0,
    ) -> None:
        if retry_for > 0 and publish_timeout >= retry_for:
            raise ValueError(
                f"publish_timeout ({publish_timeout} s) must be shorter than retry_for ({retry_for} s), "
                "so that a lost reply can be sent again"
            )
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.max_retries = max_retries
        self.publish_timeout = publish_timeout
        self.retry_for = retry_for
        self.headers = dict(headers or {})

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release (urllib opens a connection per request); for symmetry."""

    # --- transport -------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = JSON,
        query: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        retry_for: float = 0.0,
    ) -> tuple[int, dict[str, str], Any]:
        """One API call: returns (status, headers, decoded JSON, text or None); raises RecallError.

        ``body`` is encoded as JSON unless it is bytes already. ``timeout``
        bounds each attempt (default the client's). ``retry_for`` > 0 resends
        the request — only for requests safe to repeat — after a transport
        error (no reply in time included) or a 429/502/503/504 until that
        many seconds passed; otherwise ``max_retries`` applies.
        """
        url = self.base_url + path
        if query:
            q = {k: v for k, v in query.items() if v is not None and v != ""}
            if q:
                url += "?" + urllib.parse.urlencode(q)
        data = None if body is None else body if isinstance(body, (bytes, bytearray)) else _encode(body)
        hdrs = {"Accept": "application/json, application/problem+json", "User-Agent": "recall-client-python/0.1"}
        hdrs.update(self.headers)
        if data is not None:
            hdrs["Content-Type"] = content_type
        if self.token:
            hdrs["Authorization"] = f"Bearer {self.token}"
        if retry_for > 0:
            return self._retrying(method, url, data, hdrs, timeout or self.timeout, retry_for)
        attempt = 0
        while True:
            try:
                return self._once(method, url, data, hdrs, timeout)
            except (errors.TooManyRequests, errors.Unavailable) as err:
                if attempt >= self.max_retries:
                    raise
                attempt += 1
                wait = err.retry_after if err.retry_after is not None else 1.0
                time.sleep(wait * (1 + random.random() / 4))

    def _retrying(
        self, method: str, url: str, data: bytes | None, hdrs: dict[str, str], timeout: float, retry_for: float
    ) -> tuple[int, dict[str, str], Any]:
        """_once, resent unchanged while it fails retryably, for up to retry_for seconds."""
        deadline = time.monotonic() + retry_for
        pause = 0.25
        while True:
            left = deadline - time.monotonic()
            try:
                return self._once(method, url, data, hdrs, max(min(timeout, left), 0.05))
            except (errors.TransportError, errors.TooManyRequests, errors.ServerError) as err:
                if isinstance(err, errors.ServerError) and err.status not in (502, 503, 504):
                    raise
                wait = err.retry_after if getattr(err, "retry_after", None) is not None else pause
                wait *= 0.5 + random.random()
                if time.monotonic() + wait >= deadline:
                    raise
                time.sleep(wait)
                pause = min(pause * 2, 5.0)

    def _once(
        self, method: str, url: str, data: bytes | None, hdrs: dict[str, str], timeout: float | None = None
    ) -> tuple[int, dict[str, str], Any]:
        req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                status, headers, raw = resp.status, dict(resp.headers.items()), resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read() if e.fp is not None else b""
            raise errors.from_response(e.code, e.headers, raw) from None
        except (urllib.error.URLError, socket.timeout, ConnectionError, TimeoutError) as e:
            reason = getattr(e, "reason", e)
            raise errors.TransportError(f"{method} {url}: {reason}") from e
        ctype = headers.get("Content-Type", "json")
        if "json" not in ctype or "ndjson" in ctype:
            return status, headers, raw.decode("utf-8", "replace")  # /readyz, /healthz: text
        try:
            decoded = json.loads(raw) if raw.strip() else None
        except ValueError as e:
            raise errors.RecallError(f"{method} {url}: reply is not JSON", status=status, body=raw.decode("utf-8", "replace")) from e
        return status, headers, decoded

    def _json(self, method: str, path: str, body: Any = None, query: Mapping[str, Any] | None = None) -> dict[str, Any]:
        _, _, decoded = self.request(method, path, body, query=query)
        return decoded if isinstance(decoded, dict) else {}

    @staticmethod
    def _session_path(session: str, verb: str) -> str:
        return f"/v1/sessions/{urllib.parse.quote(session, safe='')}/{verb}"

    # --- operations ------------------------------------------------------------

    def ready(self) -> bool:
        """True when ``GET /readyz`` answers 200 (connected to NATS, transcript stream present)."""
        try:
            self.request("GET", "/readyz")
            return True
        except errors.RecallError:
            return False

    # --- events ----------------------------------------------------------------

    def publish(self, event_or_events: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> PublishResult:
        """Publish one event (structured mode) or a list of events (batch mode).

        Events are CloudEvents dicts (see :mod:`recall_client.events`); one
        without ``id`` gets one, written into it (see :func:`ensure_id`), so
        publishing the same dicts again is idempotent. Returns the result of
        every event; a 207 returns a result with ``partial`` set and
        ``errors`` listing the rejected events. When no event was stored the
        call raises (BadRequest, Forbidden, TooLarge, Unavailable, …) and the
        exception's ``errors``/``results`` say which event failed and why.
        """
        if isinstance(event_or_events, Mapping):
            body: Any = ensure_id(event_or_events)  # type: ignore[arg-type]
            ctype = STRUCTURED
        else:
            body = [ensure_id(e) for e in event_or_events]  # type: ignore[arg-type]
            if not body:
                raise ValueError("publish: an empty batch")
            ctype = BATCH
        status, _, decoded = self.request(
            "POST", "/v1/events", body, content_type=ctype, timeout=self.publish_timeout, retry_for=self.retry_for
        )
        result = PublishResult.from_dict(decoded if isinstance(decoded, dict) else {})
        result.status = status
        return result

    # --- session API -------------------------------------------------------------

    def compact(self, session: str, request: Mapping[str, Any] | None = None, **fields: Any) -> CompactReply:
        """``POST /v1/sessions/{session}/compact``: the compaction of the session's context.

        The request (docs/compaction.md) is ``request`` and/or keyword fields,
        e.g. ``compact(s, trigger="manual", context_tokens=150000)``.
        """
        body = {**(request or {}), **fields}
        return CompactReply.from_dict(self._json("POST", self._session_path(session, "compact"), body))

    def edit(self, session: str, request: Mapping[str, Any] | None = None, **fields: Any) -> EditReply:
        """``POST /v1/sessions/{session}/edit``: which tool results and thinking blocks to clear."""
        body = {**(request or {}), **fields}
        return EditReply.from_dict(self._json("POST", self._session_path(session, "edit"), body))

    def extract(self, session: str, timeout_ms: int | None = None) -> ExtractResult:
        """``POST /v1/sessions/{session}/extract``: a manual extraction, answered when committed.

        Raises Unprocessable (422) for a session without messages.
        """
        body = {"timeout_ms": timeout_ms} if timeout_ms else {}
        return ExtractResult.from_dict(self._json("POST", self._session_path(session, "extract"), body))

    def memory(self, session: str) -> MemoryReply:
        """``GET /v1/sessions/{session}/memory``: the session's notes; NotFound before the first extraction."""
        return MemoryReply.from_dict(self._json("GET", self._session_path(session, "memory")))

    def list_sessions(
        self, q: str | None = None, tag: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> SessionsPage:
        """``GET /v1/sessions``: one page of index entries; ``next`` is the cursor of the following page."""
        return SessionsPage.from_dict(self._json("GET", "/v1/sessions", query={"q": q, "tag": tag, "limit": limit, "cursor": cursor}))

    def iter_sessions(self, q: str | None = None, tag: str | None = None, page_size: int | None = None) -> Iterator[SessionIndex]:
        """Every matching session, following the cursors."""
        cursor = None
        while True:
            page = self.list_sessions(q=q, tag=tag, limit=page_size, cursor=cursor)
            yield from page.sessions
            if not page.next or not page.sessions:
                return
            cursor = page.next

    def get_session(self, session: str) -> IndexReply:
        """``GET /v1/sessions/{session}/index``: the session's index entry."""
        return IndexReply.from_dict(self._json("GET", self._session_path(session, "index")))

    def index(self, session: str) -> IndexReply:
        """``POST /v1/sessions/{session}/index``: index the session now; ``outcome`` says how it went."""
        return IndexReply.from_dict(self._json("POST", self._session_path(session, "index")))

    def resolve(self, ref: str | None = None, *, text: str | None = None, answer: bool = False) -> ResolveReply:
        """Resolve a session reference (``ref``: an id, a name, ``name~1``) or the
        ``@@name`` references in ``text``; with ``answer`` each reference's
        question is answered too. ``context`` is a message to add to a prompt.
        """
        if text is None and not answer:
            if not ref:
                raise ValueError("resolve: give ref or text")
            return ResolveReply.from_dict(self._json("GET", "/v1/resolve", query={"ref": ref}))
        body: dict[str, Any] = {}
        if ref:
            body["ref"] = ref
        if text is not None:
            body["text"] = text
        if answer:
            body["answer"] = True
        return ResolveReply.from_dict(self._json("POST", "/v1/resolve", body))

    def query(self, session: str, question: str, budget_tokens: int | None = None) -> QueryReply:
        """``POST /v1/sessions/{session}/query``: answer a question from the session (an id or a name)."""
        body: dict[str, Any] = {"question": question}
        if budget_tokens:
            body["budget_tokens"] = budget_tokens
        return QueryReply.from_dict(self._json("POST", self._session_path(session, "query"), body))

    def commit(self, session: str) -> CommitReply:
        """``POST /v1/sessions/{session}/commit``: write the session's long-term memory now."""
        return CommitReply.from_dict(self._json("POST", self._session_path(session, "commit")))

    def user_memory(self, user: str, types: Iterable[str] | None = None) -> UserMemory:
        """``GET /v1/users/{user}/memory``: the user's long-term memory documents and a prompt ``context``."""
        path = f"/v1/users/{urllib.parse.quote(user, safe='')}/memory"
        query = {"types": ",".join(types)} if types else None
        return UserMemory.from_dict(self._json("GET", path, query=query))

    # --- tenant configuration and data lifecycle (docs/api.md) ------------------

    def get_config(self, tenant: str | None = None) -> dict[str, Any]:
        """``GET /v1/config``: ``{"tenant", "revision", "config", "meta"}``."""
        return self._json("GET", "/v1/config", query={"tenant": tenant})

    def set_config(self, config: Mapping[str, Any], *, merge: bool = False, tenant: str | None = None) -> dict[str, Any]:
        """``PUT /v1/config`` (replace) or, with ``merge``, ``PATCH`` (a JSON merge patch); Unprocessable lists invalid fields."""
        _, _, decoded = self.request("PATCH" if merge else "PUT", "/v1/config", dict(config), query={"tenant": tenant})
        return decoded if isinstance(decoded, dict) else {}

    def erase_session(self, session: str, tenant: str | None = None) -> dict[str, Any]:
        """``DELETE /v1/sessions/{session}``: erase every trace of it (idempotent); returns the receipt.

        Its events are then refused (410) for the tombstone's time (24 h by default).
        """
        path = f"/v1/sessions/{urllib.parse.quote(session, safe='')}"
        return self._json("DELETE", path, query={"tenant": tenant})

    def erase_user(self, user: str, sessions: bool = False, tenant: str | None = None) -> dict[str, Any]:
        """``DELETE /v1/users/{user}``: erase the user's long-term memory (and their sessions with ``sessions``)."""
        path = f"/v1/users/{urllib.parse.quote(user, safe='')}"
        return self._json("DELETE", path, query={"sessions": "true" if sessions else None, "tenant": tenant})

    def export_session(self, session: str, tenant: str | None = None) -> list[dict[str, Any]]:
        """``GET /v1/sessions/{session}/export``: the session's records as Claude Code JSONL lines, parsed; NotFound when none."""
        _, _, text = self.request("GET", self._session_path(session, "export"), query={"tenant": tenant})
        return [json.loads(line) for line in str(text or "").splitlines() if line.strip()]

    def export_user(self, user: str, tenant: str | None = None) -> dict[str, Any]:
        """``GET /v1/users/{user}/export``: the user's long-term memory documents."""
        path = f"/v1/users/{urllib.parse.quote(user, safe='')}/export"
        return self._json("GET", path, query={"tenant": tenant})
