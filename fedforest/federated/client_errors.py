"""The text a client sends the server for an exception: its own refusals, or a type name.

Every transport that carries a client's failure to a server (Flower's ClientApp and
``fedforest flower-worker``, the Dask actor) and the in-process ``LocalFederation`` ask
:func:`error_text` what to send. A refusal fedforest raises itself keeps its text: those
texts were reviewed and name clients, columns, shapes, dtypes and the server's fields,
never a data value (docs/privacy.md, "Error texts"). Anything else (a bug, NumPy, pandas,
pyarrow or numba raising inside a round or while a file is read, a ``KeyError``, a
``MemoryError``) sends only its type name and the step it failed in: a library's text
often quotes the value it choked on ("Unable to parse string 'HIV+ 7.31'",
``KeyError('patient 17')``). The full traceback is logged on the client's side (the
``fedforest.client`` logger, level ERROR) for the site's operator.

A refusal is an exception raised by a ``raise`` statement in fedforest's own code: the
innermost frame of its traceback is in the fedforest package and stopped at a
``RAISE_VARARGS`` instruction. The frame alone would not do: fedforest's code calling
``float(s)``, ``np.asarray(x, dtype=float)`` or ``mapping[key]`` gets the builtin's or the
C library's exception with its innermost Python frame in fedforest, stopped at the call
or the subscript; a caught library exception raised again (``raise``, ``raise exc``)
keeps its first traceback, so it stays a library's too.
"""

from __future__ import annotations

import dis
import logging
import os
from types import CodeType

__all__ = ["error_header", "error_text", "is_refusal", "sanitized", "with_client_type"]

logger = logging.getLogger("fedforest.client")

#: The fedforest package's directory (its code's file names start with it).
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def is_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` was raised by a ``raise`` statement in fedforest's own code.

    ``AssertionError`` is not a refusal (an ``assert`` is a bug check, its text unreviewed).
    """
    tb = exc.__traceback__
    if tb is None or isinstance(exc, AssertionError):
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    return _in_package(code) and _opname(code, tb.tb_lasti) == "RAISE_VARARGS"


def error_text(
    exc: BaseException, step: str, client: str | None = None, *, log: bool = True
) -> str:
    """What a client sends for ``exc``, raised while it did ``step``; logs it if not a refusal.

    Parameters
    ----------
    exc : BaseException
        The exception, raised (its traceback decides whether it is a refusal).
    step : str
        The protocol step it failed in: a message kind (``"round_b"``), or what the client
        was doing (``"loading its data"``).
    client : str, optional
        The client's name, for the log.
    log : bool
        Log the traceback of an exception that is not a refusal (``False`` where the
        caller logs it already).

    Returns
    -------
    str
        ``str(exc)`` for a refusal; else ``"<step> failed with <type>; ..."``, no part of
        the exception's own text.
    """
    if is_refusal(exc):
        return str(exc)
    if log:
        who = "" if client is None else f"client {client!r}: "
        logger.error("fedforest %s%s failed with %s", who, step, type(exc).__name__, exc_info=exc)
    return _generic(exc, step)


def error_header(exc: BaseException, step: str, client: str | None = None) -> dict[str, str]:
    """The header of a remote client's error message (Flower's and Dask's ``ERROR``).

    ``error``: :func:`error_text`'s text; ``type``: ``"ValueError"`` for
    any ``ValueError`` (invalid data: the server raises a ``ClientDataError``), else the
    exception's class name (``codec.error_from_header`` reads both).
    """
    kind = "ValueError" if isinstance(exc, ValueError) else type(exc).__name__
    return {"error": error_text(exc, step, client), "type": kind}


def sanitized(exc: BaseException, step: str) -> BaseException:
    """``exc`` if a refusal; else a stand-in of its kind with :func:`error_text`'s text.

    The stand-in is a ``ValueError`` when ``exc`` is one (invalid data: a
    ``ClientDataError`` for the server), else a ``RuntimeError``; ``exc`` is its
    ``__cause__`` (the in-process transport's user debugs with it, so nothing is logged;
    a remote transport sends the text only).
    """
    if is_refusal(exc):
        return exc
    kind = ValueError if isinstance(exc, ValueError) else RuntimeError
    stand_in = kind(_generic(exc, step, "this error's __cause__ is the exception"))
    stand_in.__cause__ = exc
    return with_client_type(stand_in, type(exc).__name__)


def with_client_type(exc: Exception, name: str) -> Exception:
    """``exc`` marked with the class name of the client's own exception it stands for.

    The server's record of a drop (``federation.drop_reason``) names that class, not the
    stand-in's (a ``KeyError`` at the client arrives as a ``RuntimeError``).
    """
    exc.client_type = name  # type: ignore[attr-defined]
    return exc


def _generic(
    exc: BaseException, step: str, details: str = "the client's log has the details"
) -> str:
    return (
        f"{step} failed with {type(exc).__name__}; its text stays with the client (it may "
        f"quote the client's data): {details}"
    )


def _in_package(code: CodeType) -> bool:
    return os.path.abspath(code.co_filename).startswith(_PACKAGE)


def _opname(code: CodeType, offset: int) -> str | None:
    for instruction in dis.get_instructions(code):
        if instruction.offset == offset:
            return instruction.opname
    return None
