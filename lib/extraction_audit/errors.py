"""Errors the user can act on; the CLI prints them as one line instead of a traceback."""


class UserFacingError(RuntimeError):
    """A problem with the user's input, model, corpus or tables, stated plainly."""
