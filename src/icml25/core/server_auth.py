"""A bearer-token gate in front of MLflow's tracking server, for the pipeline's own loopback server.

The server a pipeline starts on 127.0.0.1 (:func:`icml25.core.workflow.start_local_server`) is reachable by every
user of a shared login node. It is started with ``mlflow server --app-name icml25-token`` (this module's ``app``,
registered in pyproject's ``mlflow.app`` entry points): every request but ``/health`` must carry
``Authorization: Bearer <token>``, the token a fresh random secret of that one pipeline run. The server holds only
the token's sha256 (``$ICML25_SERVER_TOKEN_SHA256``); the jobs get the token as ``MLFLOW_TRACKING_TOKEN``, which
MLflow's client and :mod:`icml25.core.mlflow_rest` both send as that header. Environments are readable only by
their owner (``/proc/<pid>/environ`` is mode 0400), so another user can neither read the token nor write to the
store. MLflow's own ``basic-auth`` app (``icml25 server --auth``) needs Flask-WTF, a users database and an admin
password; this gate needs nothing beyond MLflow.
"""
from __future__ import annotations

import hashlib
import hmac
import os
from typing import Any

ENV_DIGEST = "ICML25_SERVER_TOKEN_SHA256"
OPEN_PATHS = ("/health",)  #: answered without a token (the readiness probe; it reveals nothing)


def token_digest(token: str) -> str:
    """The sha256 hex digest the server compares a presented token against."""
    return hashlib.sha256(token.encode()).hexdigest()


def authorized(headers: list[tuple[bytes, bytes]], digest: str) -> bool:
    """Whether an ASGI header list carries ``Authorization: Bearer <token>`` whose sha256 is ``digest``."""
    for name, value in headers:
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token:
                return hmac.compare_digest(token_digest(token.strip()), digest)
    return False


class TokenApp:
    """ASGI app: MLflow's FastAPI server behind the bearer-token check (401 without a valid token). An object, not
    a function, so that ``mlflow server`` hands it to uvicorn as an app rather than as a factory."""

    def __init__(self) -> None:
        self._inner: Any = None

    def inner(self) -> Any:
        if self._inner is None:
            from mlflow.server.fastapi_app import app as mlflow_app

            self._inner = mlflow_app
        return self._inner

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket") and scope.get("path") not in OPEN_PATHS:
            digest = os.environ.get(ENV_DIGEST, "")
            if not digest or not authorized(scope.get("headers", []), digest):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                body = b'{"error_code": "UNAUTHENTICATED", "message": "a bearer token is required"}'
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"www-authenticate", b"Bearer"),
                                        (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.inner()(scope, receive, send)


app = TokenApp()
