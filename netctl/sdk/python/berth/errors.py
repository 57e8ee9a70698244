# SPDX-License-Identifier: GPL-2.0-or-later
"""berth.errors — what a call of the control API can raise.

berthd answers an error as ``{"error": {"code", "message", "field"}}``
with an HTTP status; :class:`APIError` carries all four, and its
subclasses let a caller catch one status (``except berth.NotFound``).
A berthd that cannot be reached (no socket, refused, TLS failed, the
connection dropped mid-answer) is :class:`ConnectionError`, which is
also Python's own ``ConnectionError``.
"""
from __future__ import annotations

import builtins
import json
from typing import Any, Dict, Optional, Type


class BerthError(Exception):
    """The base of everything this package raises."""


class ConnectionError(BerthError, builtins.ConnectionError):
    """berthd could not be reached, or the connection broke."""


class ProtocolError(BerthError):
    """berthd's answer was not what the API says (a bug, or not berthd)."""


class APIError(BerthError):
    """An error answer of the control API.

    ``status`` is the HTTP status, ``code`` berthd's machine-readable
    code (may be None), ``message`` its text, ``field`` the request
    field it is about (None when it is not about one).
    """

    def __init__(self, status: int, code: Optional[str], message: str,
                 field: Optional[str] = None,
                 retry_after: Optional[float] = None) -> None:
        super().__init__(status, code, message, field)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        #: seconds from a Retry-After header (429, 503), else None
        self.retry_after = retry_after

    def __str__(self) -> str:
        where = " (field %s)" % self.field if self.field else ""
        code = " %s" % self.code if self.code else ""
        return "%d%s: %s%s" % (self.status, code, self.message, where)


class BadRequest(APIError):
    """400: the request is malformed; ``field`` names what is wrong."""


class Unauthorized(APIError):
    """401: no token, or one berthd does not know."""


class Forbidden(APIError):
    """403: the token may not do this (another sandbox's, not admin)."""


class NotFound(APIError):
    """404: no such sandbox, port, process, file..."""


class MethodNotAllowed(APIError):
    """405: the path exists but not with this method."""


class Conflict(APIError):
    """409: the state does not allow it (exists, ended, not a VM...)."""


class PayloadTooLarge(APIError):
    """413: the body is over the API's limit."""


class TooManyRequests(APIError):
    """429: a cap was reached; ``retry_after`` says when to try again."""


class ServiceUnavailable(APIError):
    """503: berthd cannot do it now (capacity, a template being built)."""


_BY_STATUS: Dict[int, Type[APIError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound,
    405: MethodNotAllowed, 409: Conflict, 413: PayloadTooLarge,
    429: TooManyRequests, 503: ServiceUnavailable,
}


def api_error(status: int, body: bytes,
              retry_after: Optional[str] = None) -> APIError:
    """The exception for an error answer (status and its body)."""
    code: Optional[str] = None
    field: Optional[str] = None
    message = ""
    try:
        doc: Any = json.loads(body.decode("utf-8")) if body else None
    except (ValueError, UnicodeDecodeError):
        doc = None
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict):
        code = err.get("code") if isinstance(err.get("code"), str) else None
        field = err.get("field") if isinstance(err.get("field"), str) \
            else None
        message = str(err.get("message") or "")
    else:
        message = body.decode("utf-8", "replace").strip()[:500]
    if not message:
        message = "HTTP %d" % status
    after: Optional[float] = None
    if retry_after:
        try:
            after = float(retry_after)
        except ValueError:
            after = None
    cls = _BY_STATUS.get(status, APIError)
    return cls(status, code, message, field, after)
