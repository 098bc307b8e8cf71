"""Typed replies of the HTTP API, mirroring docs/api.md and pkg/events.

Each dataclass is built from the JSON reply by ``from_dict``; fields the
client does not know (a newer server) stay readable in ``raw``, the decoded
JSON object as received. Times are kept as the RFC 3339 strings Recall sends.
Messages and events inside replies (a compaction's ``summary`` and ``kept``,
a resolution's ``context``) are plain dicts in the CloudEvents / Anthropic
Messages shape.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, TypeVar

T = TypeVar("T", bound="Model")


def _one(cls: type) -> Callable[[Any], Any]:
    return lambda v: cls.from_dict(v) if isinstance(v, dict) else None


def _many(cls: type) -> Callable[[Any], Any]:
    return lambda v: [cls.from_dict(x) for x in v or [] if isinstance(x, dict)]


def nested(conv: Callable[[Any], Any], default: Any = None, factory: Any = None) -> Any:
    """A field decoded by conv (a nested model or a list of them)."""
    if factory is not None:
        return field(default_factory=factory, metadata={"conv": conv})
    return field(default=default, metadata={"conv": conv})


@dataclass
class Model:
    """Base of every reply type: ``from_dict`` and the ``raw`` JSON object."""

    @classmethod
    def from_dict(cls: type[T], data: dict[str, Any] | None) -> T:
        data = data or {}
        kwargs: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name == "raw" or f.name not in data:
                continue
            value = data[f.name]
            conv = f.metadata.get("conv")
            if conv is not None:
                value = conv(value)
            if value is None and (f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING):
                continue  # JSON null: keep the default ([] rather than None for lists)
            kwargs[f.name] = value
        obj = cls(**kwargs)
        obj.raw = data
        return obj

    def __post_init__(self) -> None:
        if not hasattr(self, "raw"):
            self.raw = {}


# --- token usage -------------------------------------------------------------


@dataclass
class TokenUsage(Model):
    """LLM tokens spent (pkg/events.TokenUsage)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    raw: dict = field(default_factory=dict, repr=False, compare=False)


# --- events ------------------------------------------------------------------


@dataclass
class EventResult(Model):
    """One event's outcome in a POST /v1/events reply."""

    index: int = 0
    id: str = ""
    status: int = 0
    seq: int = 0
    duplicate: bool = False
    field: str = ""
    error: str = ""
    raw: dict = dataclasses.field(default_factory=dict, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status == 202


@dataclass
class PublishResult(Model):
    """The reply to a publish: 202 (all stored) or 207 (partially accepted).

    ``status`` is the HTTP status. On 207 ``errors`` lists the rejected events
    (resend only those, fixed); ``results`` has every event in order. A reply
    where nothing was stored raises instead (BadRequest, TooLarge, …).
    """

    status: int = 202
    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    results: list[EventResult] = nested(_many(EventResult), factory=list)
    errors: list[EventResult] = nested(_many(EventResult), factory=list)
    detail: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def partial(self) -> bool:
        """True for a 207: some events were stored and others rejected."""
        return self.status == 207 or self.rejected > 0


# --- extraction and memory ---------------------------------------------------


@dataclass
class ExtractResult(Model):
    success: bool = False
    memory_key: str = ""
    up_to_seq: int = 0
    revision: int = 0
    error: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class MemoryRecord(Model):
    """A session's memory (docs/api.md, "Memory records")."""

    notes: str = ""
    last_summarized_id: str = ""
    last_summarized_seq: int = 0
    covered_seq: int = 0
    context_seq: int = 0
    context_tokens: int = 0
    usage: TokenUsage = nested(_one(TokenUsage), factory=TokenUsage)
    extractions: int = 0
    updated_at: str = ""
    provider: str = ""
    model: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class MemoryReply(Model):
    key: str = ""
    revision: int = 0
    record: MemoryRecord = nested(_one(MemoryRecord), factory=MemoryRecord)
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def notes(self) -> str:
        return self.record.notes


# --- compaction and context editing -------------------------------------------


@dataclass
class PreservedSegment(Model):
    head_uuid: str = ""
    anchor_uuid: str = ""
    tail_uuid: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class CompactBoundary(Model):
    type: str = ""
    subtype: str = ""
    trigger: str = ""
    pre_tokens: int = 0
    preserved_segment: Optional[PreservedSegment] = nested(_one(PreservedSegment))
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class AppliedEdit(Model):
    type: str = ""
    cleared_tool_uses: int = 0
    cleared_thinking_turns: int = 0
    cleared_input_tokens: int = 0
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class CompactReply(Model):
    """A compaction's answer (pkg/events.CompactReply, docs/compaction.md).

    ``served`` says whether the platform should replace its context with
    ``boundary`` + ``summary`` (a message dict) + ``kept`` (the transcript
    events kept verbatim, CloudEvents dicts); ``outcome`` names what happened.
    """

    outcome: str = ""
    served: bool = False
    reason: str = ""
    fallback_from: str = ""
    boundary: Optional[CompactBoundary] = nested(_one(CompactBoundary))
    summary: Optional[dict] = None
    kept: list[dict] = field(default_factory=list)
    kept_count: int = 0
    last_summarized_id: str = ""
    last_summarized_seq: int = 0
    first_kept_seq: int = 0
    last_seq: int = 0
    floor_seq: int = 0
    memory_revision: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    threshold: int = 0
    truncated: bool = False
    applied_edits: list[AppliedEdit] = nested(_many(AppliedEdit), factory=list)
    cleared_tool_uses: int = 0
    cleared_tokens: int = 0
    repaired: list[dict] = field(default_factory=list)
    waited_ms: int = 0
    duration_us: int = 0
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def summary_text(self) -> str:
        """The text blocks of the summary message, joined."""
        return message_text(self.summary)


@dataclass
class ClearedBlock(Model):
    uuid: str = ""
    seq: int = 0
    block: int = 0
    kind: str = ""
    tool_use_id: str = ""
    tool_name: str = ""
    action: str = ""
    placeholder: str = ""
    tokens: int = 0
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class EditReply(Model):
    """A context edit's answer: the blocks to clear (docs/compaction.md#context-editing)."""

    applied_edits: list[AppliedEdit] = nested(_many(AppliedEdit), factory=list)
    clear: list[ClearedBlock] = nested(_many(ClearedBlock), factory=list)
    tokens_before: int = 0
    tokens_after: int = 0
    first_seq: int = 0
    last_seq: int = 0
    duration_us: int = 0
    raw: dict = field(default_factory=dict, repr=False, compare=False)


# --- sessions, index, resolve, query -------------------------------------------


@dataclass
class SessionIndex(Model):
    """A session's index entry (docs/sessions.md)."""

    tenant: str = ""
    session: str = ""
    name: str = ""
    description: str = ""
    summary: str = ""
    tags: list[str] = field(default_factory=list)
    parent_session: str = ""
    cwd: str = ""
    ephemeral: bool = False
    user_id: str = ""
    agent_id: str = ""
    model: str = ""
    created_at: str = ""
    updated_at: str = ""
    ended: bool = False
    last_indexed_id: str = ""
    last_indexed_seq: int = 0
    indexed_at: str = ""
    index_model: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class SessionsPage(Model):
    sessions: list[SessionIndex] = nested(_many(SessionIndex), factory=list)
    next: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class SessionIndexed(Model):
    """The outcome of an indexing run."""

    session: str = ""
    success: bool = False
    reason: str = ""
    model: str = ""
    attempts: int = 0
    usage: TokenUsage = nested(_one(TokenUsage), factory=TokenUsage)
    cost_usd: float = 0.0
    error: str = ""
    name: str = ""
    last_indexed_seq: int = 0
    duration_ms: int = 0
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class IndexReply(Model):
    index: SessionIndex = nested(_one(SessionIndex), factory=SessionIndex)
    revision: int = 0
    outcome: Optional[SessionIndexed] = nested(_one(SessionIndexed))
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class QuerySource(Model):
    seq: int = 0
    id: str = ""
    role: str = ""
    excerpt: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class QueryReply(Model):
    session: str = ""
    answer: str = ""
    sources: list[QuerySource] = nested(_many(QuerySource), factory=list)
    model: str = ""
    usage: TokenUsage = nested(_one(TokenUsage), factory=TokenUsage)
    cost_usd: float = 0.0
    input_tokens: int = 0
    records: int = 0
    truncated: int = 0
    overhead_ms: float = 0.0
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class Resolution(Model):
    ref: str = ""
    by: str = ""
    session: SessionIndex = nested(_one(SessionIndex), factory=SessionIndex)
    ancestors: list[SessionIndex] = nested(_many(SessionIndex), factory=list)
    question: str = ""
    answer: Optional[QueryReply] = nested(_one(QueryReply))
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class ResolveReply(Model):
    resolved: list[Resolution] = nested(_many(Resolution), factory=list)
    context: Optional[dict] = None
    raw: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def context_text(self) -> str:
        """The text of the context message to add to a prompt ("" when none)."""
        return message_text(self.context)


# --- long-term memory --------------------------------------------------------


@dataclass
class MemoryWrite(Model):
    target: str = ""
    type: str = ""
    lines: int = 0
    revision: int = 0
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class MemorySkip(Model):
    reason: str = ""
    type: str = ""
    count: int = 0
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class CommitReply(Model):
    """A long-term memory commit (pkg/events.MemoryCommitted, docs/long-term-memory.md)."""

    session: str = ""
    user: str = ""
    reason: str = ""
    from_seq: int = 0
    to_seq: int = 0
    messages: int = 0
    allowed_peers: list[str] = field(default_factory=list)
    policy: dict = field(default_factory=dict)
    phases: list[str] = field(default_factory=list)
    written: list[MemoryWrite] = nested(_many(MemoryWrite), factory=list)
    skipped: list[MemorySkip] = nested(_many(MemorySkip), factory=list)
    denied: list[str] = field(default_factory=list)
    model: str = ""
    usage: TokenUsage = nested(_one(TokenUsage), factory=TokenUsage)
    success: bool = False
    error: str = ""
    duration_ms: int = 0
    worker: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class MemoryDocument(Model):
    target: str = ""
    type: str = ""
    content: str = ""
    revision: int = 0
    updated_at: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)


@dataclass
class UserMemory(Model):
    """A user's long-term memory (pkg/events.LTMReply)."""

    user: str = ""
    documents: list[MemoryDocument] = nested(_many(MemoryDocument), factory=list)
    context: str = ""
    raw: dict = field(default_factory=dict, repr=False, compare=False)


def message_text(message: dict | None) -> str:
    """The text of a message dict: its string content or its text blocks joined."""
    if not message:
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")
