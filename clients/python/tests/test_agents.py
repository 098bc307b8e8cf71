"""recall_client.agents.RecallSession: the OpenAI Agents SDK's Session protocol
over Recall. The SDK (openai-agents) is not installable here (no PyPI), so the
SDK-specific test is skipped, saying so; the protocol is exercised by a runner
that does what the SDK's Runner does with a session, against a real recall up."""

from __future__ import annotations

import asyncio
import copy
import inspect
import uuid

import pytest

from recall_client import Client
from recall_client.agents import RecallSession, from_record, pair_tool_items, skeleton_of, to_record

ITEMS = [
    {"role": "user", "content": "Fix the flaky test"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and the lint"}, {"type": "input_image", "image_url": "https://x/y.png"}]},
    {"role": "system", "content": "Be brief."},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [{"type": "output_text", "text": "Looking.", "annotations": []}]},
    {"type": "function_call", "call_id": "call_1", "name": "read", "arguments": '{"path":"a.go"}', "id": "fc_1", "status": "completed"},
    {"type": "function_call", "call_id": "call_2", "name": "grep", "arguments": "not json"},
    {"type": "function_call_output", "call_id": "call_1", "output": "package a"},
    {"type": "function_call_output", "call_id": "call_2", "output": ""},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "think"}]},
    {"type": "compaction", "encrypted_content": "opaque"},
]


def test_every_item_comes_back_equal_from_its_record() -> None:
    for item in ITEMS:
        role, blocks, _ = to_record(item)
        assert role in ("user", "assistant")
        assert blocks and all(b["type"] != "text" or b["text"].strip() for b in blocks), item
        skel = skeleton_of(item, blocks)
        assert skel is not None
        assert from_record(blocks, skel) == item


def test_pair_tool_items_leaves_out_orphans() -> None:
    call = lambda i: {"type": "function_call", "call_id": i, "name": "t", "arguments": "{}"}  # noqa: E731
    out = lambda i: {"type": "function_call_output", "call_id": i, "output": "o"}  # noqa: E731
    user = {"role": "user", "content": "u"}
    assert pair_tool_items([out("a"), user, call("b"), out("b"), out("b"), call("c"), user]) == [user, call("b"), out("b"), user]


def test_the_protocol_methods_are_async() -> None:
    s = RecallSession("proto", "http://127.0.0.1:1")
    assert s.session_id == "proto"
    for name in ("get_items", "add_items", "pop_item", "clear_session", "run_compaction"):
        assert inspect.iscoroutinefunction(getattr(s, name)), name


def test_with_the_sdk_itself() -> None:
    sdk = pytest.importorskip("agents", reason="openai-agents is not installed (no PyPI on this machine): SDK-specific test skipped")
    s = RecallSession("proto", "http://127.0.0.1:1")
    assert isinstance(s, sdk.memory.session.SessionABC) or all(hasattr(s, m) for m in ("get_items", "add_items", "pop_item", "clear_session"))


def _tool_output(turn: int) -> str:
    return f"value-{turn}: " + f"line {turn} of the build log, nothing failed here\n" * 50


class ScriptedModel:
    """To "turn N: …" it calls lookup(N); to that call's output it answers "turn N done: value-N".
    It checks every input as the Responses API would: calls answered, no output without its call."""

    def __init__(self) -> None:
        self.inputs: list[list[dict]] = []

    def respond(self, items: list[dict]) -> dict:
        self.inputs.append(copy.deepcopy(items))
        calls = set()
        for it in items:
            if it.get("type") == "function_call":
                calls.add(it["call_id"])
            if it.get("type") == "function_call_output":
                assert it["call_id"] in calls, f"output {it['call_id']} has no call"
        answered = {it["call_id"] for it in items if it.get("type") == "function_call_output"}
        last = items[-1]
        if last.get("type") == "function_call_output":
            assert calls <= answered, "a call is unanswered"
            n = last["output"].split(":", 1)[0].removeprefix("value-")
            return {"type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": f"turn {n} done: value-{n}", "annotations": []}]}
        assert calls <= answered | set(), "a call is unanswered"
        n = int(last["content"].split(":", 1)[0].removeprefix("turn "))
        return {"type": "function_call", "call_id": f"call_{n}", "name": "lookup", "arguments": f'{{"turn":{n}}}', "status": "completed"}


async def _run_turn(session: RecallSession, model: ScriptedModel, text: str) -> str:
    """What the SDK's Runner does with a session: history + input to the model, run the tool, store the new items."""
    history = await session.get_items()
    user = {"role": "user", "content": text}
    new = [user]
    while True:
        out = model.respond(history + new)
        new.append(out)
        if out.get("type") == "function_call":
            new.append({"type": "function_call_output", "call_id": out["call_id"], "output": _tool_output(int(out["call_id"].split("_")[1]))})
            continue
        break
    await session.add_items(new)
    return out["content"][0]["text"]


def test_a_40_turn_agent_continues_on_recalls_compacted_history(live: Client, recall_http: str) -> None:
    async def main() -> None:
        sid = f"pyagents-{uuid.uuid4().hex[:8]}"
        session = RecallSession(sid, recall_http, started={"user_id": "u-py"})
        model = ScriptedModel()
        added: list[dict] = []
        compacted = 0
        for turn in range(1, 41):
            before = len(session.records)
            assert await _run_turn(session, model, f"turn {turn}: look up the value of turn {turn}") == f"turn {turn} done: value-{turn}"
            added.extend(it for _, it in session.records[before:])
            if session.last_compaction is not None:
                compacted += 1
                assert model.inputs[-1][0]["content"].startswith("Recall compacted")
            if turn % 10 == 0:
                await asyncio.to_thread(live.extract, session.recall_session_id, 40000)
        assert compacted >= 20, f"summary served on {compacted} of 40 turns"
        view = await session.get_items()
        start = added.index(view[1])
        assert view[1:] == added[start:], "kept items equal the added ones"
        lines = [ln for ln in live.export_session(sid) if ln.get("type") in ("user", "assistant")]
        assert len(lines) == len(added) == 160
        assert [ln["uuid"] for ln in lines] == [u for u, _ in session.records], "every record once, in order"

    asyncio.run(main())


def test_pop_and_clear_keep_recall_consistent(live: Client, recall_http: str) -> None:
    async def main() -> None:
        session = RecallSession(f"pypop-{uuid.uuid4().hex[:8]}", recall_http, compaction=False)
        items = [
            {"role": "user", "content": "first"},
            {"type": "function_call", "call_id": "c1", "name": "t", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "r1"},
        ]
        await session.add_items(items)
        del session.records[-3:]
        await session.add_items(items)  # repeated with the same items: stored once
        assert len(live.export_session(session.recall_session_id)) == 3
        assert await session.pop_item() == items[2]
        assert await session.get_items() == items[:1], "the call whose output was popped is left out"
        fresh = RecallSession(session.session_id, recall_http, compaction=False)
        assert await fresh.get_items() == [{"role": "user", "content": "first"}]
        await session.clear_session()
        assert await session.get_items() == []
        await session.add_items([{"role": "user", "content": "after clear"}])
        assert session.recall_session_id != session.session_id
        assert len(live.export_session(session.recall_session_id)) == 1

    asyncio.run(main())
