"""The dashboard: one page at `/` over the API, for a platform team.

The page (`tidegate/server/dashboard/`: index.html, dashboard.js, dashboard.css, shipped in the package) is
plain HTML, CSS and JavaScript with no build step and no library: its charts are SVG it draws itself, so
nothing is fetched from elsewhere (an air-gapped cluster shows it whole), and every answer says so with a
Content-Security-Policy that lets the page reach its own origin only. It shows the queue tree, jobs with
their events and reasons, nodes with their GPU cards, the cloud pools over time, spend against the budget
and the links, polling the API every few seconds.

The page and its files hold no data, so they are served without a token; every call the page makes is a call
of the API with the token the page asked for (kept in the tab's sessionStorage, never in a URL), and the
server's access rules (`tidegate.server.access`) decide what it may do: a view token reads, an admin's edits
a queue's weight, a submitter's deletes jobs; a refusal is shown as the server's Status says it.

`tidegate kube` serves the same page read-only on its metrics port (`tidegate.kube.metrics`).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, Response

from tidegate.live.jobs import NotFound

#: The page's files, by the name they are served under, and their media types.
ASSETS = {
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
ASSETS_PATH = "/dashboard"
#: Only the page's own origin: no script, style, image, font or call from anywhere else (nor inline script).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def dashboard_folder() -> Path:
    """Where the installed package keeps the page's files."""
    return Path(str(files("tidegate.server") / "dashboard"))


def page_html(read_only: bool = False) -> str:
    """The page, marked read-only for a server that takes no changes (`tidegate kube`)."""
    html = (dashboard_folder() / "index.html").read_text(encoding="utf-8")
    return html.replace('data-mode="live"', 'data-mode="read-only"') if read_only else html


def asset(name: str) -> tuple[bytes, str]:
    """One of the page's files and its media type; NotFound for any other name."""
    if name not in ASSETS:
        raise NotFound(f"no dashboard asset {name}", "Asset", name)
    return (dashboard_folder() / name).read_bytes(), ASSETS[name]


def static_page(path: str, read_only: bool = True) -> tuple[bytes, str, dict[str, str]] | None:
    """The page (`/`) or one of its files (`/dashboard/<name>`) with its media type and headers, None for any
    other path: what `tidegate kube` serves on its metrics port (read-only)."""
    if path == "/":
        return page_html(read_only).encode(), "text/html; charset=utf-8", HEADERS
    name = path.removeprefix(ASSETS_PATH + "/")
    if path.startswith(ASSETS_PATH + "/") and name in ASSETS:
        body, media = asset(name)
        return body, media, HEADERS
    return None


def is_dashboard_file(path: str) -> bool:
    """The page or one of its files: served without a token (they hold no data; the page asks for one)."""
    return path == "/" or (path.startswith(ASSETS_PATH + "/") and path[len(ASSETS_PATH) + 1 :] in ASSETS)


def add_dashboard(app: FastAPI) -> None:
    """Serve the page at `/` and its files under `/dashboard/`, without a token (they hold no data)."""
    folder = dashboard_folder()

    @app.get("/", include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(page_html(), headers=HEADERS)

    @app.get(ASSETS_PATH + "/{name}", include_in_schema=False)
    def dashboard_asset(name: str) -> Response:
        if name not in ASSETS:
            raise NotFound(f"no dashboard asset {name}", "Asset", name)
        return FileResponse(folder / name, media_type=ASSETS[name], headers=HEADERS)
