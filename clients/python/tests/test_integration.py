"""Against a real ``recall up`` (RECALL_HTTP=http://127.0.0.1:18180): skipped without it.

The offline LLM provider (``recall up`` without a model key) answers
extraction, indexing, queries and long-term memory, so everything here runs
without a model.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import urllib.parse
import uuid

import pytest

import recall_client as rc
from recall_client import events as ev

pytestmark = pytest.mark.usefixtures("live")

FILLER = "The ledger writer batches invoice rows and flushes them every second. "


def new_session(prefix: str = "py") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def conversation(session: str, user: str, turns: int = 3) -> list[dict]:
    """A session.started with an owner, then turns of request, tool call, tool result, answer."""
    out = [ev.session_started(session, user_id=user, cwd="/src/billing", agent_id="coder", id=f"{session}-started")]
    for i in range(turns):
        out += [
            ev.message(session, "user", f"Request {i}: add retries with jitter to webhook sender {i}; keep the 5 s timeout. " + FILLER * 30, uuid=f"u{i}"),
            ev.message(session, "assistant", [ev.text(f"Reading sender {i}."), ev.tool_use(f"toolu_{i}", "Read", {"file_path": f"/src/webhook/s{i}.go"})],
                       uuid=f"a{i}", stop_reason="tool_use", message_id=f"msg_{i}"),
            ev.message(session, "user", [ev.tool_result(f"toolu_{i}", "package webhook\n" + "func send() error { return nil }\n" * 40)], uuid=f"r{i}", parent_uuid=f"a{i}"),
            ev.message(session, "assistant", f"Sender {i}: exponential backoff with full jitter, 5 attempts, 5 s timeout kept. " + FILLER * 20,
                       uuid=f"b{i}", parent_uuid=f"r{i}", stop_reason="end_turn"),
        ]
    return out


def indexed(live: rc.Client, session: str, within: float = 15.0):
    """The session's index entry, once the indexer stored it: the indexer follows the transcript on its own."""
    deadline = time.monotonic() + within
    while True:
        try:
            return live.get_session(session)
        except rc.NotFound:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def published(live: rc.Client, turns: int = 10) -> dict:
    """A new session, published and extracted."""
    s = new_session()
    user = f"user-{s}"
    evs = conversation(s, user, turns=turns)
    res = live.publish(evs)
    assert res.status == 202 and res.accepted == len(evs) and res.duplicates == 0
    ex = live.extract(s, timeout_ms=30000)
    assert ex.success and ex.memory_key.endswith("." + s) and ex.revision >= 1
    return {"id": s, "user": user, "events": evs, "extract": ex}


@pytest.fixture(scope="module")
def session(live: rc.Client) -> dict:
    """One published, extracted session shared by the read tests (none of them reports a compaction)."""
    return published(live)


def test_publish_one_event_and_duplicates(live):
    s = new_session()
    e = ev.message(s, "user", "hello from python")
    first = live.publish(e)
    assert first.status == 202 and first.accepted == 1 and first.results[0].seq > 0
    again = live.publish(e)  # same dict, same id: stored once
    assert again.results[0].duplicate and again.results[0].seq == first.results[0].seq and again.duplicates == 1


def test_memory(live, session):
    m = live.memory(session["id"])
    assert m.revision == session["extract"].revision
    assert m.key.endswith("." + session["id"])
    assert "jitter" in m.notes and m.record.covered_seq >= session["extract"].up_to_seq
    assert m.record.extractions >= 1 and m.record.usage.input_tokens > 0
    assert m.record.provider and m.raw["record"]["notes"] == m.notes


def test_compact_served(live):
    session = published(live)  # its own: reporting the compaction commits it and moves its context
    r = live.compact(session["id"], trigger="manual", min_tokens=500, min_text_messages=2, max_tokens=4000)
    assert r.served, r.reason
    assert r.outcome == "session_memory"
    assert r.kept_count == len(r.kept) and r.kept_count > 0
    kept_uuids = [k["data"]["uuid"] for k in r.kept]
    assert r.boundary is not None and r.boundary.subtype == "compact_boundary" and r.boundary.trigger == "manual"
    seg = r.boundary.preserved_segment
    assert seg.head_uuid == kept_uuids[0] and seg.tail_uuid == kept_uuids[-1] == "b9"
    assert "jitter" in r.summary_text and r.summary["role"] == "user"
    assert r.tokens_after < r.tokens_before
    # the platform reports what it did with it
    done = live.publish([ev.session_compacting(session["id"], trigger="manual"),
                         ev.session_compacted(session["id"], trigger="manual", pre_tokens=r.tokens_before, post_tokens=r.tokens_after,
                                              first_kept_uuid=seg.head_uuid, last_kept_uuid=seg.tail_uuid)])
    assert done.accepted == 2


def test_compact_not_served_without_memory(live):
    s = new_session()
    live.publish(conversation(s, "u-none", turns=1))
    r = live.compact(s)
    assert not r.served and r.outcome in ("no_session_memory", "no_reduction") and r.reason


def test_edit(live, session):
    r = live.edit(session["id"], context_management={"edits": [{"type": "clear_tool_uses_20250919",
                                                               "trigger": {"type": "input_tokens", "value": 100},
                                                               "keep": {"type": "tool_uses", "value": 1}}]})
    assert r.tokens_before > 0 and r.last_seq > 0
    assert r.clear and all(c.kind and c.action and c.seq > 0 for c in r.clear)
    assert r.tokens_after < r.tokens_before
    assert r.applied_edits and r.applied_edits[0].cleared_tool_uses > 0


def test_sessions_index_resolve_query(live, session):
    s = session["id"]
    got = indexed(live, s)
    assert got.index.session == s and got.index.user_id == session["user"] and got.index.cwd == "/src/billing"
    idx = live.index(s)
    assert idx.outcome is not None and idx.outcome.success, idx.outcome
    assert idx.index.name and idx.index.summary and idx.revision >= got.revision
    page = live.list_sessions(limit=500)
    assert s in [x.session for x in page.sessions]
    assert any(x.session == s for x in live.iter_sessions(q=idx.index.name, page_size=5))

    res = live.resolve(idx.index.name)
    assert res.resolved and res.resolved[0].session.session == s
    res = live.resolve(text=f"what did we do in @@{idx.index.name} about the timeout?", answer=True)
    assert res.resolved[0].session.session == s and res.context_text

    q = live.query(s, "Which timeout was kept?")
    assert q.session == s and q.answer and q.sources and q.model
    assert live.query(idx.index.name, "Which timeout was kept?").session == s  # by name


def test_commit_and_user_memory(live, session):
    c = live.commit(session["id"])
    assert c.success, c.error
    assert c.user == session["user"] and c.session == session["id"]
    assert c.written and c.written[0].target == "self" and c.written[0].revision >= 1
    um = live.user_memory(session["user"])
    assert um.user == session["user"] and um.documents and um.context
    assert {d.type for d in um.documents} >= {w.type for w in c.written}
    only = live.user_memory(session["user"], types=[c.written[0].type])
    assert {d.type for d in only.documents} == {c.written[0].type}


def test_errors_bad_request_and_partial(live):
    s = new_session()
    bad = ev.message("bad.session", "user", "dots are not allowed")
    with pytest.raises(rc.BadRequest) as info:
        live.publish(bad)
    assert info.value.kind == "invalid-event" and info.value.errors[0]["field"] == "subject"
    mixed = live.publish([ev.message(s, "user", "fine"), ev.message("bad.session", "user", "not fine")])
    assert mixed.status == 207 and mixed.partial and mixed.accepted == 1
    assert mixed.errors[0].index == 1 and mixed.errors[0].field == "subject"
    with pytest.raises(rc.BadRequest) as info:
        live.compact(s, no_such_field=1)
    assert info.value.kind == "invalid-body"


def test_errors_not_found_and_unprocessable(live):
    with pytest.raises(rc.NotFound):
        live.memory(new_session("nobody"))
    with pytest.raises(rc.Unprocessable) as info:  # a session without transcript events
        live.extract(new_session("nobody"), timeout_ms=5000)
    assert "no messages to summarize" in info.value.detail


def test_error_too_large(live):
    s = new_session()
    batch = [ev.message(s, "user", f"m{i}", uuid=f"m{i}") for i in range(1001)]
    with pytest.raises(rc.TooLarge) as info:
        live.publish(batch)
    assert info.value.kind == "too-large"


def _hold_body_slot(base: str) -> socket.socket:
    """Open a POST /v1/events whose body never comes: it holds one of the tenant's body slots."""
    u = urllib.parse.urlsplit(base)
    sock = socket.create_connection((u.hostname, u.port or 80), timeout=5)
    token = os.environ.get("RECALL_TOKEN")
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    sock.sendall((f"POST /v1/events HTTP/1.1\r\nHost: {u.netloc}\r\n{auth}"
                  "Content-Type: application/cloudevents+json\r\nContent-Length: 1000\r\n\r\n{").encode())
    return sock


def test_error_too_many_requests(live, recall_http):
    # docs/api.md, Limits: 8 small bodies at once per tenant (RECALL_INGEST_TENANT_BODIES), then 429 with Retry-After.
    # A client that sends once: the default one rides out a 429 by resending for retry_for seconds.
    once = rc.Client(recall_http, token=live.token, timeout=60, retry_for=0)
    held = []
    try:
        err = None
        for _ in range(40):
            held.append(_hold_body_slot(recall_http))
            time.sleep(0.02)
            try:
                once.publish(ev.message(new_session(), "user", "one too many"))
            except rc.TooManyRequests as e:
                err = e
                break
        assert err is not None, "no 429 with every body slot held"
        assert err.status == 429 and err.kind == "too-many-requests" and err.retry_after is not None and err.retry_after >= 1
    finally:
        for sock in held:
            sock.close()
    # slots come back when the connections close
    deadline = time.time() + 10
    while True:
        try:
            assert live.publish(ev.message(new_session(), "user", "room again")).accepted == 1
            break
        except rc.TooManyRequests:
            if time.time() > deadline:
                raise
            time.sleep(0.2)


def test_async_client(recall_http):
    async def main() -> None:
        async with rc.AsyncClient(recall_http, os.environ.get("RECALL_TOKEN") or None, timeout=60) as c:
            assert await c.ready()
            s = new_session("pyasync")
            evs = conversation(s, "u-async", turns=2)
            results = await asyncio.gather(*(c.publish(e) for e in evs[:1]))
            assert results[0].accepted == 1
            assert (await c.publish(evs[1:])).accepted == len(evs) - 1
            assert (await c.extract(s, timeout_ms=30000)).success
            await asyncio.to_thread(indexed, c.sync, s)
            m, idx = await asyncio.gather(c.memory(s), c.get_session(s))
            assert "jitter" in m.notes and idx.index.user_id == "u-async"
            with pytest.raises(rc.NotFound):
                await c.memory(new_session("nobody"))

    asyncio.run(main())
