"""Where a command's manifests come from: positional paths, `-f`/`--filename` (as kubectl users type it), or
both; "-" reads standard input once."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from typing import TextIO

import typer

FILES_HELP = "Manifest files or folders (like kubectl apply -f); '-' reads standard input."


def manifest_paths(positional: list[str] | None, files: list[str] | None) -> list[str]:
    """The paths given either way, positional first. Raises BadParameter when there are none, or when "-"
    (standard input, which can be read once) is given twice."""
    paths = [*(positional or ()), *(files or ())]
    if not paths:
        raise typer.BadParameter("no manifests: give files or folders, as arguments or with -f (-f - reads stdin)")
    if paths.count("-") > 1:
        raise typer.BadParameter("'-' (standard input) is given more than once")
    return paths


def stdin_once(paths: list[str]) -> Callable[[], TextIO | None]:
    """For a command that loads its manifests more than once: standard input read whole now when a path is
    "-", and each call a fresh stream over that text (None when no path is "-")."""
    if "-" not in paths:
        return lambda: None
    text = sys.stdin.read()
    return lambda: io.StringIO(text)
