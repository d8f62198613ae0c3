"""The API's own documentation pages, `/docs` (Swagger UI) and `/redoc` (ReDoc), served without a CDN.

FastAPI's default pages load Swagger UI and ReDoc from cdn.jsdelivr.net (and a favicon from
fastapi.tiangolo.com): blank on an air-gapped cluster. Here the pages reference only the API's own
`/docs/assets/...`, served from the `fastapi-offline` package's copy of Swagger UI 5 and ReDoc 2, and
Swagger UI's online validator badge (validator.swagger.io) is off. The pages, their assets and
`/openapi.json` are routes of the API like any other, behind its token when it has one (the view right).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse

from tidegate.live.jobs import NotFound

#: The files the pages load, by the name they are served under: all the pages reference.
ASSETS = ("swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png")
ASSETS_PATH = "/docs/assets"


def assets_folder() -> Path:
    """Where the installed `fastapi-offline` package keeps Swagger UI's and ReDoc's files."""
    return Path(str(files("fastapi_offline") / "static"))


def add_docs(api: APIRouter, app: FastAPI) -> None:
    """Serve `/openapi.json`, `/docs`, `/redoc` and their assets on `api` (the router carrying the API's
    view right); `app` was made with FastAPI's own pages off (`docs_url=None`, ...)."""
    folder = assets_folder()

    @api.get("/openapi.json", include_in_schema=False)
    def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @api.get("/docs", include_in_schema=False)
    def swagger(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}/openapi.json",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            swagger_ui_parameters={"validatorUrl": None},  # no badge fetched from validator.swagger.io
        )

    @api.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}/openapi.json",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_PATH}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_PATH}/favicon.png",
            with_google_fonts=False,
        )

    @api.get(ASSETS_PATH + "/{name}", include_in_schema=False)
    def asset(name: str) -> Any:
        if name not in ASSETS:
            raise NotFound(f"no documentation asset {name}", "Asset", name)
        return FileResponse(folder / name)
