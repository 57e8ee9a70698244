# SPDX-License-Identifier: GPL-2.0-or-later
"""berth — a Python client of berthd's control API.

    import berth
    with berth.Sandbox.create(template="minimal") as sb:
        print(sb.exec(["uname", "-a"]).text)

Standard library only. See README.md beside this package.
"""
from .admin import (Fleet, TemplateBuild, TemplateBuildFailed, Templates,
                    Tokens, tar_directory)
from .client import Client, Response, fetch
from .errors import (APIError, BadRequest, BerthError, Conflict,
                     ConnectionError, Forbidden, MethodNotAllowed, NotFound,
                     PayloadTooLarge, ProtocolError, ServiceUnavailable,
                     TooManyRequests, Unauthorized)
from .execs import ExecFailed, ExecResult, ExecStream, Process, Processes
from .files import Egress, Files, Ports, Watch
from .sandbox import Sandbox, SandboxError, default_client

__version__ = "0.1.0"

__all__ = [
    "APIError", "BadRequest", "BerthError", "Client", "Conflict",
    "ConnectionError", "Egress", "ExecFailed", "ExecResult", "ExecStream",
    "Files", "Fleet", "Forbidden", "MethodNotAllowed", "NotFound",
    "PayloadTooLarge", "Ports", "Process", "Processes", "ProtocolError",
    "Response", "Sandbox", "SandboxError", "ServiceUnavailable",
    "TemplateBuild", "TemplateBuildFailed", "Templates", "Tokens",
    "TooManyRequests", "Unauthorized", "Watch", "default_client", "fetch",
    "tar_directory",
]
