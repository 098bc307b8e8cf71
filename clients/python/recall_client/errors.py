"""Exceptions mapped from Recall's problem bodies (docs/api.md, "Problem types").

Every error reply of the HTTP edge is ``application/problem+json`` (RFC 9457)
with ``type``, ``title``, ``status`` and ``detail``; event errors add
``errors`` and ``results`` (one entry per event). :func:`from_response` turns
such a reply into the exception class of its status.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

__all__ = [
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
    "from_response",
]


class RecallError(Exception):
    """An error answered by Recall (or no answer at all, see TransportError).

    Attributes mirror the problem document: ``status``, ``type`` (a URI whose
    fragment names the problem, e.g. ``...docs/api.md#invalid-event``),
    ``title``, ``detail``; ``errors`` and ``results`` are the per-event entries
    of an events request (lists of dicts, possibly empty); ``problem`` is the
    whole decoded body; ``retry_after`` the Retry-After header in seconds.
    """

    status: int = 0

    def __init__(
        self,
        detail: str = "",
        *,
        status: int | None = None,
        type: str = "",
        title: str = "",
        problem: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
        body: str = "",
    ) -> None:
        if status is not None:
            self.status = status
        self.type = type
        self.title = title
        self.detail = detail
        self.problem: dict[str, Any] = dict(problem or {})
        self.retry_after = retry_after
        self.body = body
        super().__init__(self._message())

    @property
    def kind(self) -> str:
        """The problem type's name: the fragment of ``type`` (``invalid-event``, ``too-large``…)."""
        return self.type.rsplit("#", 1)[-1] if "#" in self.type else self.type

    @property
    def errors(self) -> list[dict[str, Any]]:
        return list(self.problem.get("errors") or [])

    @property
    def results(self) -> list[dict[str, Any]]:
        return list(self.problem.get("results") or [])

    def _message(self) -> str:
        head = f"{self.status} {self.title}".strip() if self.status else self.title
        text = self.detail or self.body.strip()[:200]
        return f"{head}: {text}" if head and text else head or text or type(self).__name__


class TransportError(RecallError):
    """Recall could not be reached (connection refused, reset, timed out)."""


class BadRequest(RecallError):
    status = 400


class Unauthorized(RecallError):
    status = 401


class Forbidden(RecallError):
    status = 403


class NotFound(RecallError):
    status = 404


class RequestTimeout(RecallError):
    status = 408


class Conflict(RecallError):
    """409; an ambiguous session reference lists ``candidates``."""

    status = 409

    @property
    def candidates(self) -> list[dict[str, Any]]:
        return list(self.problem.get("candidates") or [])


class TooLarge(RecallError):
    status = 413


class UnsupportedMediaType(RecallError):
    status = 415


class Unprocessable(RecallError):
    status = 422


class TooManyRequests(RecallError):
    """429: the tenant is over its share; retry after ``retry_after`` seconds."""

    status = 429


class ServerError(RecallError):
    status = 500


class Unavailable(ServerError):
    """503: JetStream did not acknowledge, no service answers, or the edge is full."""

    status = 503


class GatewayTimeout(ServerError):
    status = 504


_BY_STATUS: dict[int, type[RecallError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    408: RequestTimeout,
    409: Conflict,
    413: TooLarge,
    415: UnsupportedMediaType,
    422: Unprocessable,
    429: TooManyRequests,
    503: Unavailable,
    504: GatewayTimeout,
}


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime
    from datetime import datetime, timezone

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def from_response(status: int, headers: Mapping[str, str] | None, body: bytes | str) -> RecallError:
    """The exception for an error reply: its class chosen by status."""
    text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else (body or "")
    problem: dict[str, Any] = {}
    try:
        decoded = json.loads(text) if text.strip() else {}
        if isinstance(decoded, dict):
            problem = decoded
    except ValueError:
        pass
    retry_after = None
    if headers is not None:
        retry_after = parse_retry_after(headers.get("Retry-After") or headers.get("retry-after"))
    cls = _BY_STATUS.get(status)
    if cls is None:
        cls = ServerError if status >= 500 else RecallError
    return cls(
        str(problem.get("detail") or ""),
        status=status,
        type=str(problem.get("type") or ""),
        title=str(problem.get("title") or ""),
        problem=problem,
        retry_after=retry_after,
        body=text if not problem else "",
    )
