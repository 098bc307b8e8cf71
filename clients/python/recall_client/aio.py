"""The asyncio twin of :class:`recall_client.Client`.

Each call runs the synchronous client in a worker thread
(``asyncio.to_thread``), so the standard library suffices and the event loop
is never blocked. Signatures, results and exceptions are the same.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Iterable, Mapping

from .client import Client
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

__all__ = ["AsyncClient"]


class AsyncClient:
    """``await``-able Recall API: ``async with AsyncClient(url, token) as c: await c.publish(ev)``."""

    def __init__(self, base_url: str = "http://127.0.0.1:8080", token: str | None = None, **options: Any) -> None:
        self.sync = Client(base_url, token, **options)

    def __repr__(self) -> str:
        return f"AsyncClient({self.sync.base_url!r})"

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        self.sync.close()

    async def ready(self) -> bool:
        return await asyncio.to_thread(self.sync.ready)

    async def publish(self, event_or_events: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> PublishResult:
        if not isinstance(event_or_events, Mapping):
            event_or_events = list(event_or_events)  # consume iterators on the caller's thread
        return await asyncio.to_thread(self.sync.publish, event_or_events)

    async def compact(self, session: str, request: Mapping[str, Any] | None = None, **fields: Any) -> CompactReply:
        return await asyncio.to_thread(self.sync.compact, session, request, **fields)

    async def edit(self, session: str, request: Mapping[str, Any] | None = None, **fields: Any) -> EditReply:
        return await asyncio.to_thread(self.sync.edit, session, request, **fields)

    async def extract(self, session: str, timeout_ms: int | None = None) -> ExtractResult:
        return await asyncio.to_thread(self.sync.extract, session, timeout_ms)

    async def memory(self, session: str) -> MemoryReply:
        return await asyncio.to_thread(self.sync.memory, session)

    async def list_sessions(
        self, q: str | None = None, tag: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> SessionsPage:
        return await asyncio.to_thread(self.sync.list_sessions, q, tag, limit, cursor)

    async def iter_sessions(self, q: str | None = None, tag: str | None = None, page_size: int | None = None) -> AsyncIterator[SessionIndex]:
        cursor = None
        while True:
            page = await self.list_sessions(q=q, tag=tag, limit=page_size, cursor=cursor)
            for s in page.sessions:
                yield s
            if not page.next or not page.sessions:
                return
            cursor = page.next

    async def get_session(self, session: str) -> IndexReply:
        return await asyncio.to_thread(self.sync.get_session, session)

    async def index(self, session: str) -> IndexReply:
        return await asyncio.to_thread(self.sync.index, session)

    async def resolve(self, ref: str | None = None, *, text: str | None = None, answer: bool = False) -> ResolveReply:
        return await asyncio.to_thread(self.sync.resolve, ref, text=text, answer=answer)

    async def query(self, session: str, question: str, budget_tokens: int | None = None) -> QueryReply:
        return await asyncio.to_thread(self.sync.query, session, question, budget_tokens)

    async def commit(self, session: str) -> CommitReply:
        return await asyncio.to_thread(self.sync.commit, session)

    async def user_memory(self, user: str, types: Iterable[str] | None = None) -> UserMemory:
        return await asyncio.to_thread(self.sync.user_memory, user, list(types) if types else None)

    async def get_config(self, tenant: str | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.get_config, tenant)

    async def set_config(self, config: Mapping[str, Any], *, merge: bool = False, tenant: str | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(lambda: self.sync.set_config(config, merge=merge, tenant=tenant))

    async def erase_session(self, session: str, tenant: str | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.erase_session, session, tenant)

    async def erase_user(self, user: str, sessions: bool = False, tenant: str | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.erase_user, user, sessions, tenant)

    async def export_session(self, session: str, tenant: str | None = None) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.sync.export_session, session, tenant)

    async def export_user(self, user: str, tenant: str | None = None) -> dict[str, Any]:
        return await asyncio.to_thread(self.sync.export_user, user, tenant)
