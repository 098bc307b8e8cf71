"""A session of the OpenAI Agents SDK (Python, ``openai-agents``) kept in Recall.

:class:`RecallSession` follows the SDK's documented ``Session`` protocol —
``session_id``, ``get_items(limit)``, ``add_items(items)``, ``pop_item()``,
``clear_session()``, all async — and its compaction-aware form
(``run_compaction``, which never calls a model and never waits). Pass it as
``Runner.run(agent, input, session=RecallSession(...))``.

* ``add_items`` publishes each item as one transcript record, in order; a
  tool call is an assistant ``tool_use`` block and its output a ``tool_result``
  answering the call's id, so Recall sees them paired. The item itself rides in
  the CloudEvents extension ``agentsitem`` as a skeleton (the item without
  the one field the blocks rebuild exactly), so it comes back equal. Each
  item (by identity) gets one record id: a publish the client resends, or an
  ``add_items`` repeated with the same items after an error, is stored once.
* ``get_items`` asks Recall for a preview compaction (no model, a KV read and a
  bounded transcript read): when served, Recall's summary as one user message
  followed by the records after it; otherwise, or when Recall does not answer
  within ``compact_timeout``, the whole history. An unanswered tool call, or
  an output whose call is not there, is never returned.
* ``pop_item`` removes the newest item and records a withdrawal (a user record
  with the extension ``agentsop: pop:<uuid>``); reads leave both out.
* ``clear_session`` erases the Recall session and continues under a fresh
  Recall session id (``recall_session_id``), because Recall refuses events of an
  erased session for a day.

The JavaScript package (clients/js, ``RecallSession`` in ``@recallhq/recall/agents``)
writes the same records and extensions.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import time
import uuid as _uuid
from typing import Any, Callable

from . import events as ev
from .client import Client
from .errors import NotFound, RecallError

__all__ = ["RecallSession", "pair_tool_items", "to_record", "skeleton_of", "from_record"]

ITEM_EXT = "agentsitem"
OP_EXT = "agentsop"
SKELETON_MAX = 48 * 1024
MARK = "$recall"
SOURCE = "recall-python/openai-agents"
_WITHDRAWN = "[Withdrawn: the agent removed "

Item = dict[str, Any]


def _call_id(item: Item) -> str | None:
    return item.get("call_id") or item.get("callId")


def is_call(item: Item) -> bool:
    t = item.get("type")
    return isinstance(t, str) and t.endswith("_call") and t != "hosted_tool_call" and bool(_call_id(item))


def is_output(item: Item) -> bool:
    t = item.get("type")
    return isinstance(t, str) and re.search(r"_(result|output)$", t) is not None and bool(_call_id(item))


def pair_tool_items(items: list[Item]) -> list[Item]:
    """``items`` without unanswered calls, outputs whose call is not before them, or second outputs."""
    first_output: dict[str, int] = {}
    for i, it in enumerate(items):
        cid = _call_id(it)
        if is_output(it) and cid and cid not in first_output:
            first_output[cid] = i
    calls: set[str] = set()
    answered: set[str] = set()
    out = []
    for i, it in enumerate(items):
        cid = _call_id(it) or ""
        if is_call(it):
            o = first_output.get(cid)
            if o is None or o < i or cid in calls:
                continue
            calls.add(cid)
        elif is_output(it):
            if cid not in calls or cid in answered:
                continue
            answered.add(cid)
        out.append(it)
    return out


def _non_empty(s: str) -> str:
    return s if s and s.strip() else "(empty)"


def _part_text(p: Any) -> str:
    if isinstance(p, dict):
        if isinstance(p.get("text"), str):
            return p["text"]
        if isinstance(p.get("refusal"), str):
            return p["refusal"]
        return f"[{p.get('type', 'part')}]"
    return str(p)


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, dict) and output.get("type") in ("text", "input_text", "output_text") and isinstance(output.get("text"), str):
        return output["text"]
    if isinstance(output, list) and all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in output):
        return "\n".join(p["text"] for p in output)
    return json.dumps(output, ensure_ascii=False)


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [ev.text(_non_empty(content))]
    blocks = [ev.text(_non_empty(_part_text(p))) for p in (content or [])]
    return blocks or [ev.text("(empty)")]


def to_record(item: Item) -> tuple[str, list[dict[str, Any]], str | None]:
    """The record of one item: (role, Recall blocks, stop_reason)."""
    kind = item.get("type", "message")
    role = item.get("role")
    if kind == "message" and role in ("user", "system", "developer"):
        blocks = _text_blocks(item.get("content"))
        if role != "user":
            blocks[0] = ev.text(f"[{role}] {blocks[0]['text']}")
        return "user", blocks, None
    if kind == "message":
        return "assistant", _text_blocks(item.get("content")), "end_turn"
    if is_call(item):
        inp: Any = item.get("action", item.get("input"))
        if isinstance(item.get("arguments"), str):
            try:
                inp = json.loads(item["arguments"])
            except ValueError:
                inp = {"arguments": item["arguments"]}
        if not isinstance(inp, dict):
            inp = {"value": inp}
        return "assistant", [ev.tool_use(_call_id(item) or "", item.get("name") or kind, inp)], "tool_use"
    if is_output(item):
        block = ev.tool_result(_call_id(item) or "", _non_empty(_output_text(item.get("output"))), item.get("status") == "incomplete")
        return "user", [block], None
    texts = "\n".join(_part_text(p) for p in [*(item.get("content") or []), *(item.get("summary") or [])])
    return "assistant", [ev.text(f"[{kind}]" + (f" {texts}" if texts else ""))], None


def _result_text(b: dict[str, Any]) -> str:
    c = b.get("content")
    if isinstance(c, str):
        return c
    return "\n".join(x.get("text", "") for x in (c or []) if isinstance(x, dict) and x.get("type") == "text")


_REBUILD: dict[str, Callable[[list[dict[str, Any]]], Any]] = {
    "string": lambda b: "".join(x.get("text", "") for x in b),
    "input_text": lambda b: [{"type": "input_text", "text": x.get("text", "")} for x in b],
    "output_text": lambda b: [{"type": "output_text", "text": x.get("text", "")} for x in b],
    "arguments": lambda b: json.dumps((b[0].get("input") if b else None) or {}, ensure_ascii=False, separators=(",", ":")),
    "output": lambda b: _result_text(b[0]) if b else "",
}


def _bulk(item: Item) -> tuple[str, str] | None:
    kind = item.get("type", "message")
    if kind == "message":
        if isinstance(item.get("content"), str):
            return "content", "string"
        return "content", "output_text" if item.get("role") == "assistant" else "input_text"
    if is_call(item) and isinstance(item.get("arguments"), str):
        return "arguments", "arguments"
    if is_output(item) and isinstance(item.get("output"), str):
        return "output", "output"
    return None


def _dumps(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def skeleton_of(item: Item, blocks: list[dict[str, Any]]) -> str | None:
    """The item's skeleton (JSON) for the extension; None when even the smallest is over SKELETON_MAX."""
    b = _bulk(item)
    if b:
        field, how = b
        skel = {k: v for k, v in item.items() if k != field}
        skel[MARK] = f"{field}:{how}"
        if from_record(blocks, skel) == item:
            s = _dumps(skel)
            return s if len(s) <= SKELETON_MAX else None
    s = _dumps(item)
    return s if len(s) <= SKELETON_MAX else None


def from_record(blocks: list[dict[str, Any]], skeleton: Any, role: str = "user", names: dict[str, str] | None = None) -> Item:
    """The item of a record: its skeleton rebuilt with the blocks, or inferred from the blocks."""
    if skeleton is not None:
        skel = json.loads(skeleton) if isinstance(skeleton, str) else dict(skeleton)
        mark = skel.pop(MARK, None)
        if not isinstance(mark, str):
            return skel
        field, how = mark.split(":", 1)
        skel[field] = _REBUILD[how](blocks)
        return skel
    for b in blocks:
        if b.get("type") == "tool_use":
            return {"type": "function_call", "call_id": b.get("id"), "name": b.get("name"), "arguments": _dumps(b.get("input") or {})}
        if b.get("type") == "tool_result":
            return {"type": "function_call_output", "call_id": b.get("tool_use_id"), "output": _result_text(b)}
    text = "\n".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    if role == "assistant":
        return {"type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": text, "annotations": []}]}
    return {"role": "user", "content": text}


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [ev.text(content)]
    return list(content) if isinstance(content, list) else []


def _is_control(content: Any) -> bool:
    b = _blocks(content)
    return bool(b) and isinstance(b[0].get("text"), str) and b[0]["text"].startswith(_WITHDRAWN)


def _records_of(recs: list[dict[str, Any]], mine: dict[str, Item]) -> list[tuple[str, Item]]:
    """(uuid, item) of stored records, control records and what they withdraw left out."""
    popped = set()
    for r in recs:
        op, d = r.get(OP_EXT), r.get("data") or {}
        if isinstance(op, str) and op.startswith("pop:"):
            popped.add(op[4:])
        elif _is_control(d.get("content")):
            popped.add(str(d.get("uuid", "")).removesuffix("-pop"))
    out: list[tuple[str, Item]] = []
    for r in recs:
        d = r.get("data") or {}
        if d.get("uuid") in popped or r.get(OP_EXT) or _is_control(d.get("content")):
            continue
        blocks = _blocks(d.get("content"))
        if r.get(ITEM_EXT) is not None:
            item = from_record(blocks, r[ITEM_EXT])
        else:
            item = mine.get(d.get("uuid")) or from_record(blocks, None, d.get("role", "user"))
        out.append((str(d.get("uuid")), item))
    return out


class RecallSession:
    """The OpenAI Agents SDK's Session protocol over Recall's HTTP API (see the module docstring).

    ``url``/``token`` name the edge and the tenant (or pass ``client``).
    ``threshold`` is the agent's auto-compact threshold in tokens; ``compaction``
    False always serves the whole history. ``started`` (``user_id``,
    ``agent_id``, …) is published once as the session's ``session.started``.
    Calls on one session run one after another.
    """

    session_settings = None

    def __init__(
        self,
        session_id: str,
        url: str = "http://127.0.0.1:8080",
        token: str | None = None,
        *,
        client: Client | None = None,
        recall_session_id: str | None = None,
        compaction: bool = True,
        threshold: int | None = None,
        compact_timeout: float = 3.0,
        started: dict[str, Any] | None = None,
    ) -> None:
        if not session_id:
            raise ValueError("RecallSession: session_id is required")
        self.session_id = session_id
        self.recall_session_id = recall_session_id or session_id
        self.client = client or Client(url, token=token)
        self.compaction = compaction
        self.threshold = threshold
        self.compact_timeout = compact_timeout
        self.started = started
        self.records: list[tuple[str, Item]] = []
        self.last_compaction: Any = None
        self._ids: dict[int, tuple[Item, str]] = {}
        self._loaded = False
        self._announced = False
        self._lock = asyncio.Lock()

    async def get_items(self, limit: int | None = None) -> list[Item]:
        """The history to continue with, oldest first; the newest ``limit`` items when given."""
        async with self._lock:
            await self._load()
            items = [it for _, it in self.records]
            self.last_compaction = None
            if self.compaction and self.records:
                served = await self._compacted()
                if served is not None:
                    items = served
            if limit is not None and limit >= 0:
                items = items[max(0, len(items) - limit):]
            return copy.deepcopy(pair_tool_items(items))

    async def _compacted(self) -> list[Item] | None:
        req: dict[str, Any] = {"preview": True, "trigger": "auto", "wait_timeout_ms": 0}
        if self.threshold:
            req["auto_compact_threshold"] = self.threshold
        try:
            r = await asyncio.wait_for(asyncio.to_thread(self.client.compact, self.recall_session_id, req), self.compact_timeout)
        except (RecallError, asyncio.TimeoutError):
            return None  # fail open: the whole history
        if not r.served or not r.summary:
            return None
        self.last_compaction = r
        summary = r.raw.get("summary") or {}
        text = "\n".join(b.get("text", "") for b in _blocks(summary.get("content")))
        mine = dict(self.records)
        return [{"role": "user", "content": text}, *(it for _, it in _records_of(list(r.raw.get("kept") or []), mine))]

    async def _load(self) -> None:
        if self._loaded:
            return
        try:
            lines = await asyncio.to_thread(self.client.export_session, self.recall_session_id)
        except NotFound:
            lines = []
        recs = [
            {"data": {"uuid": ln.get("uuid"), "role": ln["message"].get("role"), "content": ln["message"].get("content")}}
            for ln in lines
            if ln.get("type") in ("user", "assistant") and isinstance(ln.get("message"), dict)
        ]
        self.records = _records_of(recs, {})  # the export carries no extensions: inferred from the blocks
        self._loaded = True

    def _id_of(self, item: Item) -> str:
        known = self._ids.get(id(item))
        if known is not None and known[0] is item:
            return known[1]
        rid = str(_uuid.uuid4())
        self._ids[id(item)] = (item, rid)
        return rid

    async def add_items(self, items: list[Item]) -> None:
        """Publish items as transcript records, in order; returns once all are stored.

        Raises RecallError when Recall refused some; nothing is added to the
        history then, and repeating the call with the same items stores each once.
        """
        if not items:
            return
        async with self._lock:
            await self._load()
            added = [(self._id_of(it), copy.deepcopy(it)) for it in items]
            parent = self.records[-1][0] if self.records else None
            evs = []
            if self.started and not self._announced:
                evs.append(ev.session_started(self.recall_session_id, id=f"{self.recall_session_id}-started", source=SOURCE, **self.started))
            for rid, it in added:
                role, blocks, stop = to_record(it)
                skel = skeleton_of(it, blocks)
                evs.append(
                    ev.message(self.recall_session_id, role, blocks, uuid=rid, parent_uuid=parent, stop_reason=stop, source=SOURCE,
                               extensions={ITEM_EXT: skel} if skel is not None else None)
                )
                parent = rid
            await self._publish(evs)
            self._announced = True
            self.records.extend(added)

    async def _publish(self, evs: list[dict[str, Any]]) -> None:
        for i in range(0, len(evs), 500):
            r = await asyncio.to_thread(self.client.publish, evs[i:i + 500])
            if r.partial:
                first = r.errors[0] if r.errors else None
                raise RecallError(f"Recall refused {len(r.errors)} record(s) of this session, e.g. {first}", status=207)

    async def pop_item(self) -> Item | None:
        """Remove and return the newest item (None when there is none), recording the withdrawal."""
        async with self._lock:
            await self._load()
            if not self.records:
                return None
            rid, item = self.records[-1]
            what = f"the tool call {_call_id(item)}" if is_call(item) else f"record {rid}"
            marker = ev.message(self.recall_session_id, "user", [ev.text(f"{_WITHDRAWN}{what} from this conversation; it is not part of it.]")],
                                uuid=f"{rid}-pop", parent_uuid=rid, source=SOURCE, extensions={OP_EXT: f"pop:{rid}"})
            await self._publish([marker])
            self.records.pop()
            return copy.deepcopy(item)

    async def clear_session(self) -> None:
        """Erase the Recall session; later items go to a fresh ``recall_session_id``."""
        async with self._lock:
            await asyncio.to_thread(self.client.erase_session, self.recall_session_id)
            self.recall_session_id = f"{self.session_id[:100]}-c{int(time.time() * 1000):x}{_uuid.uuid4().hex[:4]}"
            self.records, self._ids, self._loaded, self._announced, self.last_compaction = [], {}, True, False, None

    async def run_compaction(self, args: Any = None) -> None:
        """The SDK's compaction hook: Recall compacts in the background, so this returns at once (no model call)."""
        return None
