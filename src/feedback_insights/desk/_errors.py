"""What a request can do wrong, each with its status: the app answers every one with a page
(``error.html.j2``), never a traceback."""

from __future__ import annotations


class DeskError(Exception):
    """A request the desk refuses; ``status`` is the HTTP status of the page that says why."""

    status = 400

    def __init__(self, message: str, back: str | None = None) -> None:
        super().__init__(message)
        #: Where the error page links back to.
        self.back = back


class BadInput(DeskError):
    """A form or query value that cannot be used; the message names the field."""

    def __init__(self, name: str, message: str, back: str | None = None) -> None:
        super().__init__(f"{name}: {message}", back)
        self.field = name


class Refused(DeskError):
    """An action the library refused (a draft in the wrong status, a merge across services)."""

    status = 409


class NotFound(DeskError):
    status = 404


class Forbidden(DeskError):
    status = 403


class TooLarge(DeskError):
    status = 413
