"""The one error type for failures a user can fix.

Library code raises `MapnetError` with a one-line message; the CLI layer
(`mapnet_cli.cli`) prints it once, in red, and exits non-zero. Anything else
that escapes is a bug and keeps its traceback.
"""


class MapnetError(Exception):
    """A user-facing failure: bad input, bad settings, a corrupt file."""

    exit_code = 2

    def __init__(self, message: str):
        # Collapse to one line: the CLI promises one-line errors.
        super().__init__(" ".join(str(message).split()))
