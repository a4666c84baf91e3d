"""`GET /healthz` and `GET /metrics` on the app's own port, for load balancers and monitoring.

`/healthz` answers 200 with `{"status": "ready", ...}` when the engine answers, and 503 with the status
(`loading`, `restarting` after a fault, `unavailable` while none of the vLLM servers of `CHAT_ENGINE_URLS`
answers, `failed`, `stopping`) otherwise; with servers, `servers` lists each one's state. `/metrics` is `telemetry.prometheus`'s
registry in Prometheus' text format. Both answer requests from loopback, with
`Authorization: Bearer <CHAT_METRICS_TOKEN>`, or from a logged-in user; anyone else gets 403 (401 for a
bearer token that is not ASCII, which no token of this server is).
Importing Chainlit registers a catch-all route that answers any unknown path with the page (and its own
`/health` always says ok), so these routes are put in front of it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.service import EngineService
from telemetry import prometheus
from web.auth import Logins
from web.chainlit_patches import route_first
from web.gate import login_token


def add_health_routes(service: EngineService, metrics_token: str, logins: Logins | None) -> None:
    def access(request: Request) -> Response | bool:
        """Whether the caller holds the metrics token (True) or may only see health and metrics (False); else the
        answer that says why not."""
        token = login_token(request.headers)
        if token and not token.isascii():  # no token this server gives out looks like that
            return JSONResponse({"detail": "The bearer token is not one this server gives out."}, status_code=401)
        if token and metrics_token and secrets.compare_digest(token.encode(), metrics_token.encode()):
            return True
        try:
            if ipaddress.ip_address(request.client.host if request.client else "").is_loopback:
                return False
        except ValueError:
            pass
        if token and logins is not None and logins.session_user(token) is not None:
            return False
        return JSONResponse({"detail": "Only from this machine, with the CHAT_METRICS_TOKEN bearer token, or "
                                       "logged in."}, status_code=403)

    async def healthz(request: Request) -> Response:
        allowed = access(request)
        if isinstance(allowed, Response):
            return allowed
        status = service.status()
        report = {"status": status, "model": service.model.name, "engine_restarts": service.restarts}
        if allowed and (engine := service.current()) and (servers := engine.state().servers):
            report["servers"] = [{"url": server.url, "ready": server.ready, "problem": server.problem,
                                  "in_flight": server.in_flight} for server in servers]
        return JSONResponse(report, status_code=200 if status == "ready" else 503)

    async def metrics(request: Request) -> Response:
        if isinstance(allowed := access(request), Response):
            return allowed
        # Reading the app's memory may walk its page tables (tens of ms): not on the event loop.
        return Response(await asyncio.to_thread(generate_latest, prometheus.REGISTRY), media_type=CONTENT_TYPE_LATEST)

    route_first(Route("/healthz", healthz), Route("/metrics", metrics))
