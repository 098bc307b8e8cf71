"""Builders of the CloudEvents a platform publishes (docs/api.md, "Event types").

Each builder returns a structured-mode CloudEvent as a plain dict, ready for
:meth:`recall_client.Client.publish`. Ids are fixed when the event is built, so
publishing the same dict again (a retry) is stored once:

* a message's ``id`` is ``<session>-<uuid>`` (its transcript record's uuid,
  a fresh uuid4 when you give none), so re-building it from your transcript
  gives the same id too;
* other events get a uuid4 unless you pass ``id=`` (pass a deterministic one,
  e.g. ``f"{session}-started"``, if you may re-build them after a crash).
"""

from __future__ import annotations

import uuid as _uuid
from datetime import datetime, timezone
from typing import Any, Iterable

MESSAGE = "dev.recall.transcript.message"
SESSION_STARTED = "dev.recall.session.started"
SESSION_ENDED = "dev.recall.session.ended"
SESSION_COMPACTING = "dev.recall.session.compacting"
SESSION_COMPACTED = "dev.recall.session.compacted"

DEFAULT_SOURCE = "recall-client-python"

__all__ = [
    "MESSAGE",
    "SESSION_STARTED",
    "SESSION_ENDED",
    "SESSION_COMPACTING",
    "SESSION_COMPACTED",
    "event",
    "message",
    "session_started",
    "session_ended",
    "session_compacting",
    "session_compacted",
    "text",
    "tool_use",
    "tool_result",
]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


def event(
    session: str,
    type: str,
    data: dict[str, Any],
    *,
    id: str | None = None,
    source: str = DEFAULT_SOURCE,
    time: str | None = None,
    extensions: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A structured CloudEvent of any of the five platform types.

    ``time`` defaults to now (RFC 3339, UTC); pass ``time=""`` to omit it.
    ``extensions`` adds attributes such as ``traceparent``.
    """
    ev: dict[str, Any] = {
        "specversion": "1.0",
        "id": id or str(_uuid.uuid4()),
        "source": source,
        "type": type,
        "subject": session,
    }
    t = _now() if time is None else time
    if t:
        ev["time"] = t
    ev["datacontenttype"] = "application/json"
    if extensions:
        ev.update(extensions)
    ev["data"] = data
    return ev


def message(
    session: str,
    role: str,
    content: str | Iterable[dict[str, Any]],
    *,
    uuid: str | None = None,
    id: str | None = None,
    source: str = DEFAULT_SOURCE,
    time: str | None = None,
    parent_uuid: str | None = None,
    message_id: str | None = None,
    model: str | None = None,
    stop_reason: str | None = None,
    usage: dict[str, int] | None = None,
    query_source: str | None = None,
    agent_id: str | None = None,
    peer_id: str | None = None,
    extensions: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``dev.recall.transcript.message``: one user or assistant record.

    ``content`` is a string or a list of Anthropic Messages blocks (see
    :func:`text`, :func:`tool_use`, :func:`tool_result`). The event id
    defaults to ``<session>-<uuid>``.
    """
    if role not in ("user", "assistant"):
        raise ValueError(f"role must be 'user' or 'assistant', not {role!r}")
    record_uuid = uuid or str(_uuid.uuid4())
    data = _drop_none(
        {
            "uuid": record_uuid,
            "parent_uuid": parent_uuid,
            "role": role,
            "content": content if isinstance(content, str) else list(content),
            "message_id": message_id,
            "model": model,
            "stop_reason": stop_reason,
            "usage": usage,
            "query_source": query_source,
            "agent_id": agent_id,
            "peer_id": peer_id,
        }
    )
    return event(session, MESSAGE, data, id=id or f"{session}-{record_uuid}", source=source, time=time, extensions=extensions)


def session_started(
    session: str,
    *,
    user_id: str | None = None,
    parent_session: str | None = None,
    cwd: str | None = None,
    ephemeral: bool | None = None,
    agent_id: str | None = None,
    model: str | None = None,
    memory_policy: dict[str, Any] | None = None,
    **attrs: Any,
) -> dict[str, Any]:
    """A ``dev.recall.session.started``: who owns the session and what memory it may write."""
    data = _drop_none(
        {
            "parent_session": parent_session,
            "cwd": cwd,
            "ephemeral": ephemeral,
            "user_id": user_id,
            "agent_id": agent_id,
            "model": model,
            "memory_policy": memory_policy,
        }
    )
    return event(session, SESSION_STARTED, data, **attrs)


def session_ended(session: str, reason: str = "user_exit", **attrs: Any) -> dict[str, Any]:
    """A ``dev.recall.session.ended``."""
    return event(session, SESSION_ENDED, {"reason": reason}, **attrs)


def session_compacting(session: str, trigger: str = "auto", **attrs: Any) -> dict[str, Any]:
    """A ``dev.recall.session.compacting``: the platform started compacting its context."""
    return event(session, SESSION_COMPACTING, {"trigger": trigger}, **attrs)


def session_compacted(
    session: str,
    *,
    trigger: str = "auto",
    pre_tokens: int | None = None,
    post_tokens: int | None = None,
    first_kept_uuid: str | None = None,
    last_kept_uuid: str | None = None,
    **attrs: Any,
) -> dict[str, Any]:
    """A ``dev.recall.session.compacted``: the platform replaced its context."""
    data = _drop_none(
        {
            "trigger": trigger,
            "pre_tokens": pre_tokens,
            "post_tokens": post_tokens,
            "first_kept_uuid": first_kept_uuid,
            "last_kept_uuid": last_kept_uuid,
        }
    )
    return event(session, SESSION_COMPACTED, data, **attrs)


# --- content blocks ------------------------------------------------------------


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(id: str, name: str, input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": id, "name": name, "input": input}


def tool_result(tool_use_id: str, content: str | list[dict[str, Any]], is_error: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}
    if is_error:
        block["is_error"] = True
    return block
