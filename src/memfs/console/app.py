"""The console's ASGI app: sessions, CSRF, security headers and routing, then a page.

It is cookie-authenticated and read-only: GET (and HEAD) pages, and two POST forms
(sign in, sign out), each carrying a CSRF token. Every response, errors and redirects
included, sends a CSP that allows only the console's own files (no inline script or
style), ``X-Frame-Options: DENY`` and ``Referrer-Policy: no-referrer``. An error is an
HTML page with the same status the API would give, never a 500 for a client's input.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
from typing import Any
from urllib.parse import parse_qsl, unquote

import jinja2
from markdown_it import MarkdownIt
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.types import Receive, Scope, Send

from memfs.config import Settings
from memfs.console import render
from memfs.console.pages import PAGES
from memfs.console.view import Page, View
from memfs.core import faults
from memfs.core.auth import Principal
from memfs.core.keys import AdminKey, KeyRing
from memfs.core.sessions import TTL_S, Session, Sessions
from memfs.core.store import Store
from memfs.core.tokens import Signer
from memfs.errors import Forbidden, InvalidRequest, MemfsError, NotFound

log = logging.getLogger("memfs.console")

PREFIX = "/console"
SESSION_COOKIE = "memfs_console"
LOGIN_CSRF_COOKIE = "memfs_console_login"
FORM_BYTES = 8 * 1024
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
STATUS = {
    "invalid_request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "method_not_allowed": 405,
    "payload_too_large": 413,
    "unavailable": 503,
}


class Console:
    def __init__(
        self,
        store: Store,
        keys: KeyRing,
        admin_key: AdminKey,
        signer: Signer,
        settings: Settings,
    ) -> None:
        self.store = store
        self.signer = signer
        self.settings = settings
        self.sessions = Sessions(settings.data, keys, admin_key)
        self.templates: jinja2.Environment = render.environment()
        self.markdown: MarkdownIt = render.markdown()
        self.pages: list[Page] = PAGES

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            response = await self._handle(request, scope)
        except MemfsError as exc:
            response = self.error_page(exc)
        except Exception as exc:
            translated = faults.translate(exc)
            if translated is None:
                log.exception("unhandled error in the console")
                translated = MemfsError("internal error")
            response = self.error_page(translated)
        for name, value in SECURITY_HEADERS.items():
            # The stylesheet may be cached; pages and errors never are (Cache-Control).
            if name not in response.headers or name != "Cache-Control":
                response.headers[name] = value
        await response(scope, receive, send)

    # ---- routing --------------------------------------------------------------------

    async def _handle(self, request: Request, scope: Scope) -> Response:
        raw = scope.get("raw_path") or scope["path"].encode()
        raw_path = raw.decode("latin-1").split("?", 1)[0]
        rest = raw_path.removeprefix(PREFIX)
        if rest in ("", "/"):
            return RedirectResponse(f"{PREFIX}/agents", status_code=303)
        segments = [_decode(s) for s in rest.strip("/").split("/")]
        method = request.method
        if segments[0] == "static" and len(segments) == 2:
            return self._static(segments[1], method)
        if segments == ["login"]:
            if method == "POST":
                return await self._sign_in(request)
            _only(method, "GET", "POST")
            return self._login_form(request)
        if segments == ["logout"]:
            _only(method, "POST")
            return await self._sign_out(request)
        for page in self.pages:
            params = page.match(segments)
            if params is None:
                continue
            _only(method, "GET")
            resumed = self._resume(request)
            if resumed is None:
                return RedirectResponse(f"{PREFIX}/login", status_code=303)
            query = _query(request, page.queries)
            view = View(
                request,
                params,
                resumed[0],
                resumed[1],
                self.store,
                self.signer,
                self.markdown,
                self.settings.page_items,
                self.page,
                query,
            )
            return await page.handler(view)
        raise NotFound("there is no console page here", field="path")

    def _static(self, name: str, method: str) -> Response:
        _only(method, "GET")
        data = render.static_file(name)
        if data is None:
            raise NotFound("no such console file", field="path")
        headers = {"Cache-Control": "max-age=3600"}
        response = Response(data, media_type=render.STATIC_TYPES[name], headers=headers)
        return response

    # ---- sessions -------------------------------------------------------------------

    def _resume(self, request: Request) -> tuple[Session, Principal] | None:
        session_id = request.cookies.get(SESSION_COOKIE)
        if not session_id:
            return None
        return self.sessions.resume(session_id)

    def _login_form(
        self, request: Request, *, error: str | None = None, status: int = 200
    ) -> Response:
        token = request.cookies.get(LOGIN_CSRF_COOKIE)
        if not token or len(token) > 64:
            token = secrets.token_urlsafe(24)
        response = self.page("login.html", status, None, None, csrf=token, error=error)
        self._cookie(response, request, LOGIN_CSRF_COOKIE, token, max_age=3600)
        return response

    async def _sign_in(self, request: Request) -> Response:
        form = await _form(request)
        expected = request.cookies.get(LOGIN_CSRF_COOKIE, "")
        sent = form.get("csrf", "")
        if not expected or not hmac.compare_digest(expected.encode(), sent.encode()):
            raise Forbidden("the sign-in form expired; load it again", field="csrf")
        key = form.get("key", "").strip()
        signed = None
        if key and len(key) <= 512 and key.isascii() and key.isprintable():
            signed = await asyncio.to_thread(self.sessions.sign_in, key)
        if signed is None:
            return self._login_form(request, error="That key is unknown or revoked.", status=401)
        response = RedirectResponse(f"{PREFIX}/agents", status_code=303)
        self._cookie(response, request, SESSION_COOKIE, signed[0].session_id, max_age=TTL_S)
        response.delete_cookie(LOGIN_CSRF_COOKIE, path=PREFIX, httponly=True, samesite="strict")
        return response

    async def _sign_out(self, request: Request) -> Response:
        form = await _form(request)
        resumed = self._resume(request)
        if resumed is not None:
            session = resumed[0]
            if not hmac.compare_digest(session.csrf.encode(), form.get("csrf", "").encode()):
                raise Forbidden("the sign-out form expired; load the page again", field="csrf")
            self.sessions.end(session.session_id)
        response = RedirectResponse(f"{PREFIX}/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=PREFIX, httponly=True, samesite="strict")
        return response

    def _cookie(
        self, response: Response, request: Request, name: str, value: str, *, max_age: int
    ) -> None:
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path=PREFIX,
            secure=request.url.scheme == "https",
            httponly=True,
            samesite="strict",
        )

    # ---- rendering ------------------------------------------------------------------

    def page(
        self,
        template: str,
        http_status: int,
        session: Session | None,
        who: Principal | None,
        **values: Any,
    ) -> HTMLResponse:
        body = self.templates.get_template(template).render(
            session=session, who=_who(who), **values
        )
        return HTMLResponse(body, status_code=http_status)

    def error_page(self, exc: MemfsError) -> HTMLResponse:
        status = STATUS.get(exc.code, 500)
        message = exc.message if status != 500 else "internal error"
        return self.page("error.html", status, None, None, status=status, message=message)


def _who(who: Principal | None) -> str | None:
    if who is None:
        return None
    return "admin" if who.is_admin else f"key {who.key_id}"


def _only(method: str, *allowed: str) -> None:
    if method in allowed or (method == "HEAD" and "GET" in allowed):
        return
    raise MethodNotAllowed(f"{method} is not allowed here; the console is read-only")


class MethodNotAllowed(MemfsError):
    code = "method_not_allowed"


def _decode(segment: str) -> str:
    try:
        return unquote(segment, errors="strict")
    except UnicodeDecodeError:
        raise InvalidRequest("the URL path is not valid percent-encoded UTF-8") from None


def _query(request: Request, allowed: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if key not in allowed:
            raise InvalidRequest(f"unknown query parameter {key!r}", field=key)
        if key in out:
            raise InvalidRequest(f"query parameter {key!r} given twice", field=key)
        if len(value) > 4096:
            raise InvalidRequest(f"query parameter {key!r} is too long", field=key)
        out[key] = value
    return out


async def _form(request: Request) -> dict[str, str]:
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        raise InvalidRequest("send the form as application/x-www-form-urlencoded")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_BYTES:
            raise InvalidRequest("the form is too large")
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest("the form is not valid") from None
    return dict(pairs)
