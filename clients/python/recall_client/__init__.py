"""Python client of Recall's HTTP API (docs/api.md): publish sessions, read memory, compact.

    from recall_client import Client, events
    c = Client("http://127.0.0.1:8080", token=None)
    c.publish(events.message("sess-42", "user", "Add a --by-month flag"))

Standard library only. :class:`AsyncClient` is the asyncio twin.
"""

from . import events
from .aio import AsyncClient
from .client import Client, ensure_id
from .errors import (
    BadRequest,
    Conflict,
    Forbidden,
    GatewayTimeout,
    NotFound,
    RecallError,
    RequestTimeout,
    ServerError,
    TooLarge,
    TooManyRequests,
    TransportError,
    Unauthorized,
    Unavailable,
    Unprocessable,
    UnsupportedMediaType,
)
from .types import (
    AppliedEdit,
    ClearedBlock,
    CommitReply,
    CompactBoundary,
    CompactReply,
    EditReply,
    EventResult,
    ExtractResult,
    IndexReply,
    MemoryDocument,
    MemoryRecord,
    MemoryReply,
    MemorySkip,
    MemoryWrite,
    PreservedSegment,
    PublishResult,
    QueryReply,
    QuerySource,
    Resolution,
    ResolveReply,
    SessionIndex,
    SessionIndexed,
    SessionsPage,
    TokenUsage,
    UserMemory,
)

__version__ = "0.1.0"

__all__ = [
    "Client",
    "AsyncClient",
    "events",
    "ensure_id",
    "RecallError",
    "TransportError",
    "BadRequest",
    "Unauthorized",
    "Forbidden",
    "NotFound",
    "RequestTimeout",
    "Conflict",
    "TooLarge",
    "UnsupportedMediaType",
    "Unprocessable",
    "TooManyRequests",
    "ServerError",
    "Unavailable",
    "GatewayTimeout",
    "AppliedEdit",
    "ClearedBlock",
    "CommitReply",
    "CompactBoundary",
    "CompactReply",
    "EditReply",
    "EventResult",
    "ExtractResult",
    "IndexReply",
    "MemoryDocument",
    "MemoryRecord",
    "MemoryReply",
    "MemorySkip",
    "MemoryWrite",
    "PreservedSegment",
    "PublishResult",
    "QueryReply",
    "QuerySource",
    "Resolution",
    "ResolveReply",
    "SessionIndex",
    "SessionIndexed",
    "SessionsPage",
    "TokenUsage",
    "UserMemory",
]
