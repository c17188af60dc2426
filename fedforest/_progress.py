"""Progress bars that read well in a terminal, a notebook, a log file and a pipe."""

from __future__ import annotations

import sys
from typing import Any

from tqdm import tqdm
from tqdm.auto import tqdm as auto_tqdm

__all__ = ["ProgressBar", "progress_bar"]


class ProgressBar(tqdm):
    r"""A tqdm bar that, on a stream that is not a terminal, writes one line: its last.

    In a terminal every redraw overwrites the previous one (``\r``). In a log file, a
    pipe or a captured stream each redraw stays a line of its own, and the final state
    came out twice: at the last step and again when the bar closes. There the bar writes
    nothing until it closes, then its final line once. Use it as ``tqdm`` (same
    arguments).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._quiet = not _is_terminal(kwargs.get("file") or sys.stderr)
        self._closing = False
        super().__init__(*args, **kwargs)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        """Draw the bar (not before it closes when the stream is not a terminal)."""
        if self._quiet and not self._closing:
            return True
        return bool(super().display(msg, pos))

    def clear(self, nolock: bool = False) -> None:
        """Erase the bar (nothing to erase before it closes off a terminal)."""
        if self._quiet and not self._closing:
            return
        super().clear(nolock)

    def close(self) -> None:
        """Draw the final state (once) and release the bar."""
        self._closing = True
        super().close()


def _is_terminal(stream: Any) -> bool:
    """Whether ``stream`` is an interactive terminal (redraws overwrite each other)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def progress_bar(*args: Any, **kwargs: Any) -> Any:
    """A tqdm bar: the notebook widget in Jupyter, else a :class:`ProgressBar`."""
    if any(c.__module__ == "tqdm.notebook" for c in auto_tqdm.__mro__):  # Jupyter's widget
        return auto_tqdm(*args, **kwargs)
    return ProgressBar(*args, **kwargs)
