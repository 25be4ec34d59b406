"""The documents served: /openapi.yaml and its two siblings, /docs (Swagger UI, offline) and GET / (the
documents are built in openapi_docs.py)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from app.kit.templates import html_page, render
from app.openapi_docs import (
    auth_openapi_yaml_text,
    feeds_openapi_yaml_text,
    mail_openapi,
    mail_openapi_yaml_text,
)

# The three interfaces, as /docs offers them (the first is shown first) and GET / lists them.
DOCUMENT_LINKS = (
    ("Email API (SendFox-compatible)", "/openapi.yaml"),
    ("Feeds and watches, /v1 (openmagpie-compatible)", "/v1/openapi.yaml"),
    ("Account auth, /api/auth (better-auth-compatible)", "/api/auth/openapi.yaml"),
)
# Scripts and styles from this service only: /docs works offline, and nothing else runs on it.
DOCS_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}
HOME_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}


def _documents(request: Request) -> list[dict[str, str]]:
    # Behind a proxy that adds a prefix (uvicorn --root-path), links carry it, as FastAPI's own /docs did.
    root = request.scope.get("root_path", "").rstrip("/")
    return [{"name": name, "url": root + path, "path": path} for name, path in DOCUMENT_LINKS]


def install_openapi_routes(app: FastAPI) -> None:
    # /openapi.json shows the hand-completed document (bodies and filters included), not FastAPI's own,
    # which cannot see input the routes parse themselves.
    app.openapi = mail_openapi  # type: ignore[method-assign]

    @app.get("/openapi.yaml", include_in_schema=False)
    def mail_openapi_yaml() -> Response:
        return Response(mail_openapi_yaml_text(), media_type="application/yaml")

    @app.get("/v1/openapi.yaml", include_in_schema=False)
    def feeds_openapi_yaml() -> Response:
        return Response(feeds_openapi_yaml_text(), media_type="application/yaml")

    @app.get("/api/auth/openapi.yaml", include_in_schema=False)
    def auth_openapi_yaml() -> Response:
        return Response(auth_openapi_yaml_text(), media_type="application/yaml")


def install_docs_routes(app: FastAPI) -> None:
    """GET /docs (Swagger UI over the three documents, its files from the installed package under
    /docs/assets) and GET / (a page linking to them). The app is made with FastAPI's own /docs and /redoc
    off: they load their scripts from a public CDN."""
    app.mount("/docs/assets", StaticFiles(directory=str(swagger_ui_path)), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def docs(request: Request) -> Response:
        root = request.scope.get("root_path", "").rstrip("/")
        return html_page("docs/index.html", headers=DOCS_HEADERS, root=root, documents=_documents(request))

    @app.get("/docs/init.js", include_in_schema=False)
    def docs_init() -> Response:
        return Response(render("docs/init.js"), media_type="text/javascript", headers=DOCS_HEADERS)

    @app.get("/", include_in_schema=False)
    def home(request: Request) -> Response:
        root = request.scope.get("root_path", "").rstrip("/")
        return html_page("home.html", headers=HOME_HEADERS, root=root, documents=_documents(request))
