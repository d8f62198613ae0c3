"""Debian's Chromium driven by Playwright for the dashboard's and the report's tests, with every request the page
makes routed through the test, which refuses (and records) any that would leave this machine.

`make test` installs Chromium (tools/install-chromium) and sets TIDEGATE_REQUIRE_BROWSER, so the tests fail
rather than skip without it. Playwright never downloads a browser of its own: it launches /usr/bin/chromium.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")
#: Where the screenshots go: docs/ when TIDEGATE_UPDATE_SCREENSHOTS is set (to refresh the documentation's),
#: else the test's own folder.
DOCS = Path(__file__).resolve().parents[1] / "docs"


def require_browser() -> None:
    """Skip without Chromium or Playwright, unless TIDEGATE_REQUIRE_BROWSER is set (then fail)."""
    missing = ""
    if not Path(CHROMIUM).exists():
        missing = f"{CHROMIUM} is missing (tools/install-chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            missing = "the playwright package is missing (pip install -e '.[dev]')"
    if missing:
        if os.environ.get("TIDEGATE_REQUIRE_BROWSER"):
            pytest.fail(missing)
        pytest.skip(missing)


def screenshot_folder(tmp_path: Path) -> Path:
    return DOCS if os.environ.get("TIDEGATE_UPDATE_SCREENSHOTS") else tmp_path


@dataclass
class Browser:
    """A Playwright browser context, and the requests it made and was refused."""

    context: object
    requests: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


@contextmanager
def chromium(profile: Path, width: int = 1280, height: int = 900) -> Iterator[Browser]:
    """A fresh Chromium (its own user-data-dir) whose every request is checked: one for another host is aborted
    and recorded in `refused` (the test then fails)."""
    from playwright.sync_api import Route, sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile),
            executable_path=CHROMIUM,
            headless=True,
            args=ARGS,
            viewport={"width": width, "height": height},
        )
        seen = Browser(context)

        def check(route: Route) -> None:
            url = route.request.url
            seen.requests.append(url)
            parts = urlsplit(url)
            if parts.scheme in ("file", "data", "blob", "about") or (parts.hostname or "") in LOCAL_HOSTS:
                route.continue_()
            else:
                seen.refused.append(url)
                route.abort()

        context.route("**/*", check)
        try:
            yield seen
        finally:
            context.close()
    assert not seen.refused, f"requests that would have left this machine: {seen.refused}"
