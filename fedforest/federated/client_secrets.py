"""A secure client's secrets: the data secret, its binding to the fit, the data tag.

Under ``"secure"`` a client seeds its bootstrap with a secret derived from its own data
(:func:`data_secret`), so the server cannot recompute which rows a tree drew (the forest
stays reproducible: the secret is a function of the data), bound at the set-up to the
digest of the fit's settings (:func:`bind_secret`), so that fits with other settings draw
independent bootstraps; the settings digest covers the pooled :func:`data_tag`, so that a
change at any client redraws every client's bootstraps. Moved out of
``client_secure.py`` (the layout's 800 lines), which re-exports every name.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

import numpy as np
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from numpy.typing import NDArray

from .categorical import local_codes
from .protocol import DIGEST_BYTES, SETTINGS_DIGEST, TREE_DIGEST, Message, expect_array

if TYPE_CHECKING:
    from .client_secure import SecureParty

__all__ = [
    "DATA_TAG_WORDS",
    "bind_secret",
    "data_secret",
    "data_tag",
    "federation_secret",
    "settings_digest_of",
    "tree_secrets",
]


def data_secret(
    X: NDArray[np.float64],
    y: NDArray[Any],
    name: str,
    sample_weight: Any = None,
    categorical: dict[int, NDArray[Any]] | None = None,
) -> int:
    """A 128-bit secret from the client's own data (seeds its bootstrap under "secure").

    It covers the sample weights when they are not all equal: they are data as the rows
    are. Left out, a refit with one row's weight changed (0 to leave it out, or 2) drew the
    same bootstraps and grids, and the two models' roots differenced into that row's target
    (docs/privacy-findings.md, "Red team 6"). They enter as fractions of the largest, on a
    grid of ``2^-30``, so that weights scaled by a constant draw the same forest (as
    scikit-learn's, whose forest the scale does not change); equal weights, and none, give
    the secret of the rows alone. ``categorical``: the raw values of the categorical columns
    (by index), which ``X`` does not hold (0.0 there, or a former fit's codes): they enter
    as codes of the column's own sorted levels. Left out, a refit with one row's category
    changed drew the same bootstraps (its target from the two models' nodes), and a refit
    on the same ``Client`` another forest than its first fit.
    """
    X = np.array(X, dtype=np.float64)
    for j, raw in (categorical or {}).items():  # its own levels' codes, not the matrix's
        X[:, j] = local_codes(raw)
    h = hashlib.sha256()
    h.update(name.encode("utf-8"))
    h.update(np.ascontiguousarray(X).tobytes())
    h.update("\x00".join(map(str, np.asarray(y).tolist())).encode("utf-8"))
    w = np.zeros(0) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    top = float(w.max()) if w.size else 0.0
    if top > 0 and not np.all(w == top):
        h.update(b"\x00sample_weight\x00")
        h.update(np.rint(w / top * 2.0**30).astype(np.int64).tobytes())
    return int.from_bytes(h.digest()[:16], "little")


#: HKDF info of the bootstrap secret bound to the settings digest.
_BIND_INFO = b"fedforest bootstrap secret v1"


def bind_secret(secret: int, digest: bytes) -> int:
    """The bootstrap's 128-bit secret of a fit: HKDF-SHA256 of ``secret || digest``.

    ``digest`` is the server's SHA-256 of the fit's settings (``server/digest.py``): the
    same data and settings give the same secret (the same forest), other settings an
    independent one, which the server, not knowing ``secret``, cannot relate.
    """
    material = secret.to_bytes(16, "little") + bytes(digest)
    key = HKDF(algorithm=hashes.SHA256(), length=16, salt=None, info=_BIND_INFO).derive(material)
    return int.from_bytes(key, "little")


#: HKDF info of the row weights' secret (bound to the federation's clients).
_WEIGHTS_INFO = b"fedforest row weights v1"


def federation_secret(secret: int, names: list[str]) -> int:
    """The secret of a client's row weights in a fit: HKDF-SHA256 of ``secret`` and ``names``.

    ``names``: the clients of the round (its ``secagg`` header's peers, the client's own
    name among them). The row weights of the sums over every row
    (``client_weights``) were drawn from the data secret alone, so the other clients drew
    the same weights in a fit with one client more or less, and the difference of the two
    fits' pooled moments was that client's own weighted sums: a client of one row gave its
    every value and its target (docs/privacy-findings.md, "Red team 9"). Bound to the
    clients present, every client draws other weights when one joins or leaves (or drops
    in the round, which the server then sends again to the others); the same data and
    clients give the same weights (the same forest).
    """
    material = secret.to_bytes(16, "little") + "\x00".join(sorted(names)).encode("utf-8")
    key = HKDF(algorithm=hashes.SHA256(), length=16, salt=None, info=_WEIGHTS_INFO)
    return int.from_bytes(key.derive(material), "little")


#: HKDF info of the data tag (the pooled change detector the settings digest covers).
_TAG_INFO = b"fedforest data tag v1"
#: Its 64-bit words (256 bits).
DATA_TAG_WORDS = 4


def data_tag(secret: int) -> NDArray[np.uint64]:
    """Four words of HKDF-SHA256 of the data secret, summed (masked) in the first grid round.

    The server adds every client's tag and the settings digest covers the sum, so one value
    changed at any client redraws every client's bootstrap: before, a refit after a value
    corrected in place redrew only that client's, and nested nodes of the two models
    isolated other clients' rows (docs/privacy-findings.md, "Red team 6"). The masked sum
    tells the server only whether some client's data differ between two fits.
    """
    hkdf = HKDF(algorithm=hashes.SHA256(), length=8 * DATA_TAG_WORDS, salt=None, info=_TAG_INFO)
    return np.frombuffer(hkdf.derive(secret.to_bytes(16, "little")), dtype="<u8").astype(np.uint64)


def settings_digest_of(msg: Message, name: str) -> bytes:
    """The set-up's settings digest, checked: ``DIGEST_BYTES`` uint8 (refused without)."""
    if SETTINGS_DIGEST not in msg.arrays:
        raise ValueError(
            f"Client {name!r}: a secure set-up without the settings digest (its bootstrap "
            "would not be bound to the fit's settings); the server speaks another protocol."
        )
    digest = expect_array(msg, SETTINGS_DIGEST, "u", (DIGEST_BYTES,), "server")
    if digest.dtype != np.uint8:
        raise ValueError(
            f"Client {name!r}: the settings digest must be uint8 bytes, got {digest.dtype}."
        )
    return digest.tobytes()


def tree_secrets(party: SecureParty | None, msg: Message, n_trees: int, name: str) -> list[int]:
    """The out-of-bag request's per-tree bound secrets (``TREE_DIGEST``; none: [] ).

    After a drop the fit's batches were bound to several digests (``server/batch_setup.py``);
    the request then carries each tree's, checked (uint8, ``(n_trees, DIGEST_BYTES)``), and
    each tree's draws are recomputed with the party's secret bound to it.
    """
    if TREE_DIGEST not in msg.arrays:
        return []
    if party is None:
        raise ValueError(
            f"Client {name!r}: per-tree settings digests from the server outside a secure fit."
        )
    digests = expect_array(msg, TREE_DIGEST, "u", (n_trees, DIGEST_BYTES), "server")
    if digests.dtype != np.uint8:
        raise ValueError(f"Client {name!r}: the trees' digests must be uint8, got {digests.dtype}.")
    return [bind_secret(party.secret, row.tobytes()) for row in digests]
