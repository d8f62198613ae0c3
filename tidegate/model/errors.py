"""Errors that point at the manifest, object and field a user has to fix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Source:
    """Where an object came from: a file (or "-" for stdin) and the document's 0-based index in it."""

    file: str = "<memory>"
    index: int = 0

    def __str__(self) -> str:
        return f"{self.file}#{self.index}"


class FieldError(ValueError):
    """A bad value in one field; the loader adds the file, document and object around it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True, slots=True)
class ManifestError:
    """One problem found while loading or validating manifests."""

    source: Source
    kind: str
    name: str
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source.file}: document {self.source.index}"
        obj = f"{self.kind}/{self.name}" if self.name else self.kind or "<unknown>"
        field = f" field {self.field}" if self.field else ""
        return f"{where}: {obj}{field}: {self.message}"


class ManifestErrors(Exception):
    """Raised when manifests hold errors; carries every one of them."""

    def __init__(self, errors: list[ManifestError]) -> None:
        super().__init__("\n".join(str(e) for e in errors))
        self.errors = errors
