"""Encoding and error mapping against a fake HTTP edge (no Recall needed)."""

from __future__ import annotations

import asyncio
import time

import pytest

import recall_client as rc
from recall_client import events as ev

PROBLEM = "https://github.com/recallhq/recall/blob/main/docs/api.md#"


def problem(kind: str, status: int, detail: str, **extra: object) -> dict:
    return {"type": PROBLEM + kind, "title": "T", "status": status, "detail": detail, **extra}


def ok_reply(*ids: str) -> dict:
    return {
        "accepted": len(ids),
        "duplicates": 0,
        "rejected": 0,
        "results": [{"index": i, "id": x, "status": 202, "seq": i + 1} for i, x in enumerate(ids)],
    }


# --- encoding -------------------------------------------------------------------


def test_publish_one_event_is_structured(fake, client):
    e = ev.message("sess-1", "user", "hello", uuid="u-1")
    fake.reply(202, ok_reply("sess-1-u-1"))
    res = client.publish(e)
    req = fake.last
    assert req.method == "POST" and req.path == "/v1/events"
    assert req.headers["Content-Type"] == "application/cloudevents+json"
    assert req.headers["Authorization"] == "Bearer s3cret"
    body = req.json()
    assert body["specversion"] == "1.0" and body["type"] == "dev.recall.transcript.message"
    assert body["subject"] == "sess-1" and body["id"] == "sess-1-u-1"
    assert body["data"] == {"uuid": "u-1", "role": "user", "content": "hello"}
    assert res.status == 202 and res.accepted == 1 and not res.partial
    assert res.results[0].seq == 1 and res.results[0].ok


def test_publish_list_is_a_batch_and_ids_are_kept_for_retries(fake, client):
    evs = [ev.session_started("s", user_id="u-7"), ev.message("s", "assistant", [ev.text("hi")], uuid="a-1")]
    fake.reply(202, ok_reply("x", "y")).reply(202, ok_reply("x", "y"))
    client.publish(evs)
    first = fake.last
    assert first.headers["Content-Type"] == "application/cloudevents-batch+json"
    sent = first.json()
    assert [e["type"] for e in sent] == ["dev.recall.session.started", "dev.recall.transcript.message"]
    assert sent[0]["data"] == {"user_id": "u-7"}
    assert sent[1]["id"] == "s-a-1"
    client.publish(evs)  # a retry sends the same ids
    assert [e["id"] for e in fake.last.json()] == [e["id"] for e in sent]


def test_ids_filled_in_when_missing():
    msg = {"type": ev.MESSAGE, "subject": "s", "data": {"uuid": "r-9", "role": "user", "content": "x"}}
    assert rc.ensure_id(msg)["id"] == "s-r-9"
    assert msg["specversion"] == "1.0" and msg["source"]
    other = {"type": ev.SESSION_ENDED, "subject": "s", "data": {"reason": "done"}}
    first = rc.ensure_id(other)["id"]
    assert len(first) == 36 and rc.ensure_id(other)["id"] == first  # stable once set
    own = {"id": "mine", "type": ev.SESSION_ENDED, "subject": "s", "data": {}}
    assert rc.ensure_id(own)["id"] == "mine"


def test_event_builders():
    m = ev.message("s", "assistant", [ev.tool_use("t1", "Read", {"file_path": "/a"})], stop_reason="tool_use", usage={"input_tokens": 3, "output_tokens": 4})
    assert m["data"]["content"][0] == {"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "/a"}}
    assert m["data"]["usage"]["output_tokens"] == 4 and "parent_uuid" not in m["data"]
    assert m["time"].endswith("Z")
    r = ev.tool_result("t1", "boom", is_error=True)
    assert r == {"type": "tool_result", "tool_use_id": "t1", "content": "boom", "is_error": True}
    c = ev.session_compacted("s", pre_tokens=10, post_tokens=5, first_kept_uuid="h", last_kept_uuid="t")
    assert c["data"] == {"trigger": "auto", "pre_tokens": 10, "post_tokens": 5, "first_kept_uuid": "h", "last_kept_uuid": "t"}
    assert "time" not in ev.session_ended("s", time="")
    assert ev.event("s", ev.SESSION_COMPACTING, {"trigger": "auto"}, id="e-1", extensions={"traceparent": "00-x"})["traceparent"] == "00-x"
    with pytest.raises(ValueError):
        ev.message("s", "system", "no")


def test_empty_batch_is_refused_locally(client):
    with pytest.raises(ValueError):
        client.publish([])


def test_session_api_paths_and_bodies(fake, client):
    fake.reply(200, {"outcome": "session_memory", "served": True, "kept_count": 1, "kept": [{"id": "k"}],
                     "summary": {"role": "user", "content": [{"type": "text", "text": "sum"}]},
                     "boundary": {"type": "system", "subtype": "compact_boundary", "trigger": "manual", "pre_tokens": 9,
                                  "preserved_segment": {"head_uuid": "h", "anchor_uuid": "a", "tail_uuid": "t"}},
                     "tokens_before": 9, "tokens_after": 3, "new_field": 1})
    r = client.compact("a b/c", trigger="manual", context_tokens=9)
    assert fake.last.path == "/v1/sessions/a%20b%2Fc/compact"
    assert fake.last.json() == {"trigger": "manual", "context_tokens": 9}
    assert r.served and r.boundary.preserved_segment.tail_uuid == "t" and r.summary_text == "sum"
    assert r.raw["new_field"] == 1  # unknown fields stay readable

    fake.reply(200, {"applied_edits": [{"type": "clear_tool_uses_20250919", "cleared_input_tokens": 5}],
                     "clear": [{"uuid": "u", "seq": 3, "block": 1, "kind": "tool_result", "action": "clear", "tokens": 5}]})
    e = client.edit("s", {"context_management": {"edits": []}})
    assert e.clear[0].seq == 3 and e.applied_edits[0].cleared_input_tokens == 5

    fake.reply(200, {"success": True, "memory_key": "default.s", "up_to_seq": 5, "revision": 2})
    assert client.extract("s", timeout_ms=1000).revision == 2
    assert fake.last.json() == {"timeout_ms": 1000}

    fake.reply(200, {"key": "default.s", "revision": 2, "record": {"notes": "# n", "covered_seq": 5, "usage": {"input_tokens": 1}}})
    m = client.memory("s")
    assert fake.last.method == "GET" and fake.last.path == "/v1/sessions/s/memory"
    assert m.notes == "# n" and m.record.usage.input_tokens == 1

    fake.reply(200, {"sessions": [{"tenant": "t", "session": "s1", "tags": ["a"]}], "next": "c2"})
    fake.reply(200, {"sessions": [{"tenant": "t", "session": "s2"}]})
    assert [s.session for s in client.iter_sessions(q="x y", page_size=1)] == ["s1", "s2"]
    assert fake.requests[-2].path == "/v1/sessions?q=x+y&limit=1"
    assert fake.last.path == "/v1/sessions?q=x+y&limit=1&cursor=c2"

    fake.reply(200, {"index": {"session": "s", "name": "n"}, "revision": 4})
    assert client.get_session("s").index.name == "n" and fake.last.path == "/v1/sessions/s/index"
    fake.reply(200, {"index": {"session": "s"}, "revision": 5, "outcome": {"success": True, "reason": "forced"}})
    assert client.index("s").outcome.success and fake.last.method == "POST"

    fake.reply(200, {"resolved": [{"ref": "n", "by": "name", "session": {"session": "s"}}]})
    assert client.resolve("n").resolved[0].session.session == "s" and fake.last.path == "/v1/resolve?ref=n"
    fake.reply(200, {"resolved": [], "context": {"role": "user", "content": [{"type": "text", "text": "ctx"}]}})
    assert client.resolve(text="see @@n", answer=True).context_text == "ctx"
    assert fake.last.json() == {"text": "see @@n", "answer": True}

    fake.reply(200, {"session": "s", "answer": "42", "sources": [{"seq": 2, "excerpt": "x"}]})
    q = client.query("s", "why?", budget_tokens=100)
    assert q.sources[0].seq == 2 and fake.last.json() == {"question": "why?", "budget_tokens": 100}

    fake.reply(200, {"session": "s", "user": "u", "written": [{"target": "self", "type": "t", "lines": 1, "revision": 1}], "skipped": None, "success": True})
    cm = client.commit("s")
    assert cm.written[0].target == "self" and cm.skipped == [] and fake.last.path == "/v1/sessions/s/commit"

    fake.reply(200, {"user": "u", "documents": [{"target": "self", "type": "t", "content": "c"}], "context": "<ltm>"})
    um = client.user_memory("u-7", types=["a", "b"])
    assert um.documents[0].content == "c" and fake.last.path == "/v1/users/u-7/memory?types=a%2Cb"


# --- errors ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "status,cls,kind",
    [
        (400, rc.BadRequest, "invalid-event"),
        (401, rc.Unauthorized, "unauthenticated"),
        (403, rc.Forbidden, "tenant-mismatch"),
        (404, rc.NotFound, "not-found"),
        (409, rc.Conflict, "ambiguous-reference"),
        (413, rc.TooLarge, "too-large"),
        (415, rc.UnsupportedMediaType, "unsupported-media-type"),
        (422, rc.Unprocessable, "unprocessable"),
        (503, rc.Unavailable, "unavailable"),
        (504, rc.GatewayTimeout, "timeout"),
        (502, rc.ServerError, "upstream-error"),
        (418, rc.RecallError, "upstream-error"),
    ],
)
def test_problem_maps_to_exception(fake, client, status, cls, kind):
    fake.reply(status, problem(kind, status, "what went wrong", candidates=[{"session": "s1"}]))
    with pytest.raises(cls) as info:
        client.memory("s")
    err = info.value
    assert type(err) is cls
    assert err.status == status and err.kind == kind and err.detail == "what went wrong"
    assert str(status) in str(err) and "what went wrong" in str(err)
    if cls is rc.Conflict:
        assert err.candidates == [{"session": "s1"}]


def test_rejected_event_carries_per_event_errors(fake, client):
    entry = {"index": 0, "id": "e-18", "status": 400, "field": "subject", "error": "session id: invalid id"}
    fake.reply(400, problem("invalid-event", 400, "subject: invalid", rejected=1, errors=[entry], results=[entry]))
    with pytest.raises(rc.BadRequest) as info:
        client.publish(ev.message("s.x", "user", "hi"))
    assert info.value.errors[0]["field"] == "subject" and info.value.results == [entry]


def test_partial_acceptance_is_a_result(fake, client):
    ok = {"index": 0, "id": "a", "status": 202, "seq": 7}
    bad = {"index": 1, "id": "b", "status": 400, "field": "data.role", "error": "role must be user or assistant"}
    fake.reply(207, problem("partially-accepted", 207, "1 of 2 events rejected", accepted=1, rejected=1, errors=[bad], results=[ok, bad]))
    res = client.publish([ev.message("s", "user", "a"), ev.message("s", "user", "b")])
    assert res.status == 207 and res.partial
    assert res.accepted == 1 and res.rejected == 1
    assert [r.status for r in res.results] == [202, 400]
    assert res.errors[0].field == "data.role" and res.errors[0].id == "b"


def test_too_many_requests_has_retry_after(fake, client):
    fake.reply(429, problem("too-many-requests", 429, "tenant over its share"), {"Retry-After": "3"})
    with pytest.raises(rc.TooManyRequests) as info:
        client.publish(ev.session_ended("s"))
    assert info.value.retry_after == 3.0


def test_retries_honour_retry_after(fake):
    c = rc.Client(fake.url, max_retries=2, timeout=5)
    fake.reply(429, problem("too-many-requests", 429, "busy"), {"Retry-After": "0"})
    fake.reply(503, problem("unavailable", 503, "full"), {"Retry-After": "0"})
    fake.reply(202, ok_reply("x"))
    e = ev.session_ended("s")
    assert c.publish(e).accepted == 1
    assert len(fake.requests) == 3 and len({r.json()["id"] for r in fake.requests}) == 1
    assert "Authorization" not in fake.last.headers  # open mode: no token, no header


def test_publish_resends_a_lost_reply(fake):
    # The edge stores the batch but its reply does not come within the
    # attempt timeout (lost with a node): the same events go out again and
    # the second answer — duplicates — is the result.
    c = rc.Client(fake.url, publish_timeout=0.3, retry_for=10)
    fake.reply(202, ok_reply("s-a-1", "s-a-2"), delay=1.5)
    dup = ok_reply("s-a-1", "s-a-2")
    dup["duplicates"], dup["accepted"] = 2, 0
    for r in dup["results"]:
        r["duplicate"] = True
    fake.reply(202, dup)
    evs = [ev.message("s", "user", "one", uuid="a-1"), ev.message("s", "user", "two", uuid="a-2")]
    res = c.publish(evs)
    assert res.duplicates == 2
    assert len(fake.requests) == 2
    assert fake.requests[0].body == fake.requests[1].body  # the same ids, byte for byte


def test_publish_timeout_shorter_than_retry_for():
    # An attempt that may wait the whole retry window cannot be resent.
    with pytest.raises(ValueError, match="publish_timeout"):
        rc.Client(publish_timeout=15, retry_for=10)
    rc.Client(publish_timeout=15, retry_for=0)  # one attempt: nothing to resend


def test_publish_gives_up_after_retry_for(fake):
    c = rc.Client(fake.url, publish_timeout=0.2, retry_for=1.0)
    for _ in range(20):
        fake.reply(503, problem("unavailable", 503, "JetStream did not acknowledge"))
    start = time.monotonic()
    with pytest.raises(rc.Unavailable):
        c.publish(ev.session_ended("s"))
    assert time.monotonic() - start < 5 and len(fake.requests) >= 2


def test_non_json_error_body(fake, client):
    fake.reply(502, b"<html>bad gateway</html>", {"Content-Type": "text/html"})
    with pytest.raises(rc.ServerError) as info:
        client.memory("s")
    assert info.value.status == 502 and "bad gateway" in str(info.value)


def test_unreachable_is_transport_error():
    c = rc.Client("http://127.0.0.1:9", timeout=2)
    with pytest.raises(rc.TransportError):
        c.memory("s")
    assert c.ready() is False


def test_retry_after_http_date():
    from recall_client.errors import parse_retry_after

    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert parse_retry_after("1.5") == 1.5 and parse_retry_after(None) is None and parse_retry_after("soon") is None


def test_async_client(fake):
    async def main() -> None:
        async with rc.AsyncClient(fake.url, "tok", timeout=5) as c:
            fake.reply(202, ok_reply("x"))
            r = await c.publish(ev.session_ended("s"))
            assert r.accepted == 1 and fake.last.headers["Authorization"] == "Bearer tok"
            fake.reply(404, problem("not-found", 404, "no memory yet"))
            with pytest.raises(rc.NotFound):
                await c.memory("s")
            fake.reply(200, {"sessions": [{"session": "a"}], "next": "n"}).reply(200, {"sessions": []})
            assert [s.session async for s in c.iter_sessions()] == ["a"]
            fake.reply(200, {"session": "s", "answer": "a"}).reply(200, {"session": "s", "answer": "b"})
            answers = await asyncio.gather(c.query("s", "q1"), c.query("s", "q2"))
            assert sorted(a.answer for a in answers) == ["a", "b"]

    asyncio.run(main())


def test_ready_reads_plain_text(fake, client):
    fake.reply(200, b"ready", {"Content-Type": "text/plain; charset=utf-8"})
    assert client.ready() is True and fake.last.path == "/readyz"
    fake.reply(503, b"not ready", {"Content-Type": "text/plain; charset=utf-8"})
    assert client.ready() is False


def test_lifecycle_and_config_verbs(client, fake):
    fake.reply(200, {"tenant": "default", "revision": 2, "config": {}})
    assert client.get_config()["revision"] == 2
    assert fake.last.method == "GET" and fake.last.path == "/v1/config"
    fake.reply(200, {"revision": 3})
    client.set_config({"a": None}, merge=True)
    assert fake.last.method == "PATCH" and fake.last.json() == {"a": None}
    fake.reply(200, {"parts": [], "total": 0})
    assert client.erase_session("s 1")["total"] == 0
    assert fake.last.method == "DELETE" and fake.last.path == "/v1/sessions/s%201"
    fake.reply(200, {"parts": []})
    client.erase_user("u", sessions=True)
    assert fake.last.path == "/v1/users/u?sessions=true"
    fake.reply(200, b'{"type":"user","uuid":"a"}\n{"type":"assistant","uuid":"b"}\n', {"Content-Type": "application/x-ndjson"})
    assert [ln["uuid"] for ln in client.export_session("s")] == ["a", "b"]
    assert fake.last.path == "/v1/sessions/s/export"
