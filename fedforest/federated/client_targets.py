"""A client's targets and weights: validated on arrival, and multi-output statistics.

Everything here runs on the client, on its own rows. Multi-output classification (under
``privacy="none"``) codes output ``o``'s labels as ``offset_o + index`` where ``offset_o``
is the number of classes of the outputs before it: every output then counts into its own
block of the statistics' class columns.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from .._common import STAT_TASK, class_sizes
from .categorical import value_kinds
from .label_dtypes import label_dtype

__all__ = [
    "MAX_TARGET",
    "TARGET_SCALE_FLOOR",
    "as_scikit_learn_reads",
    "by_output",
    "check_label_kind",
    "check_labels",
    "check_poisson_targets",
    "check_regression_targets",
    "check_secure_target_size",
    "check_target_magnitude",
    "class_codes",
    "class_indices",
    "class_row_weights",
    "correct_rows",
    "feature_sketches",
    "label_counts",
    "label_header",
    "poisson_column",
    "proposal_target",
    "sample_weights",
    "target_names",
    "targets",
    "unnamed_label",
]


def targets(y: ArrayLike, n: int, name: str) -> NDArray[Any]:
    """The client's ``y``: shape (n,), or (n, n_outputs) for multi-output y.

    A single column ``(n, 1)`` is one output, as a 1-D array, with scikit-learn's
    ``DataConversionWarning`` (its estimators warn so for a column-vector y).
    """
    y = as_scikit_learn_reads(y)
    if y.ndim == 2 and y.shape[1] == 1:
        # scikit-learn only here: a ClientApp's client reads a 1-D target and never loads it.
        from sklearn.exceptions import DataConversionWarning

        warnings.warn(
            f"Client {name!r}: a column-vector y was passed when a 1d array was expected. "
            "Please change the shape of y to (n_samples,), for example using ravel().",
            DataConversionWarning,
            stacklevel=3,  # the caller of Client(...)
        )
        y = y[:, 0]  # one output, as a column
    if y.ndim not in (1, 2) or y.shape[0] != n:
        raise ValueError(
            f"Client {name!r}: y has shape {y.shape}; expected ({n},), one target per row of "
            f"X (or ({n}, n_outputs) for multi-output y)."
        )
    if y.ndim == 2 and y.shape[1] == 0:
        raise ValueError(f"Client {name!r}: y has no columns.")
    return y


def target_names(y: Any, y_raw: NDArray[Any]) -> list[str] | None:
    """A multi-output ``y``'s column names when it is a DataFrame with string names.

    The handshake carries them (names, as a DataFrame's feature names travel): every
    client's outputs are summed by position, so a client whose y DataFrame had the same
    columns in another order mixed the outputs, silently.
    """
    columns = getattr(y, "columns", None)
    if y_raw.ndim != 2 or columns is None or not all(isinstance(c, str) for c in columns):
        return None
    names = [str(c) for c in columns]
    return names if len(set(names)) == len(names) else None  # repeated: taken by position


def as_scikit_learn_reads(y: ArrayLike) -> NDArray[Any]:
    """``y`` as an array, pandas' nullable columns read as scikit-learn reads them.

    A Series or DataFrame holding an ``Int*``, ``UInt*``, ``boolean`` or ``Float*`` column
    is float64, ``pd.NA`` NaN (so ``classes_`` are floats under ``fit_federated`` as under
    ``fit`` and scikit-learn's forests). Duck-typed: no pandas import here.
    """
    dtypes = getattr(y, "dtypes", None)
    if dtypes is None or not hasattr(y, "to_numpy"):
        return np.asarray(y)
    columns = [dtypes] if getattr(y, "ndim", 1) == 1 else list(dtypes)
    nullable = any(
        not isinstance(d, np.dtype)
        and getattr(d, "kind", None) in ("i", "u", "b", "f")
        and type(d).__name__ != "SparseDtype"  # scikit-learn makes sparse columns dense later
        for d in columns
    )
    if not nullable:
        return np.asarray(y)
    return np.asarray(y.to_numpy(dtype=np.float64, na_value=np.nan))


#: The largest regression target (in absolute value): the splits come from sums of squared
#: targets (times weights, over rows and clients), which overflow float64 near 1e154.
MAX_TARGET = 1e100


def check_regression_targets(y_raw: NDArray[Any], name: str) -> None:
    """A regressor's targets at the client: numbers, finite, not too large (naming it).

    Complex targets are refused as scikit-learn refuses them (NumPy's cast dropped the
    imaginary part, with a warning only).
    """
    if y_raw.dtype.kind == "c":
        raise ValueError(f"Client {name!r}: Complex data not supported in y.")
    if y_raw.dtype.kind in "mM":
        # As a float, a date is a count of its dtype's units (ns, us, days: pandas' and
        # NumPy's defaults differ), which another client may count in others, silently.
        raise ValueError(
            f"Client {name!r}: regression targets must be numeric, got y of dtype "
            f"{y_raw.dtype}; give dates and durations as numbers in one unit on every client "
            "(e.g. (y - pd.Timestamp('2020-01-01')).dt.days)."
        )
    try:
        y = y_raw.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"Client {name!r}: regression targets must be numeric, got y of "
            f"dtype {y_raw.dtype}; class labels need a classifier "
            "(FedForestClassifier, or task='classification')."
        ) from exc
    if not np.all(np.isfinite(y)):
        raise ValueError(f"Client {name!r}: y contains NaN or infinity.")
    check_target_magnitude(y, name)


def check_target_magnitude(y: NDArray[np.float64], name: str) -> None:
    """Refuse regression targets whose sums of squares could overflow (naming the client)."""
    largest = float(np.max(np.abs(y))) if y.size else 0.0
    if largest > MAX_TARGET:  # the text reaches the server: no value of y in it
        raise ValueError(
            f"Client {name!r}: regression targets must be at most {MAX_TARGET:.0e} in "
            "absolute value, and y holds a larger one (the splits are "
            "chosen from sums of squared targets, which overflow float64). Rescale y, e.g. "
            "divide it by a power of ten."
        )


#: The smallest scale the server gives the standardised targets under "secure"
#: (server/target_scale.py): it takes it when the pooled targets vary by less.
TARGET_SCALE_FLOOR = 1e-12
#: Fixed-point units a client's summed ``|y|`` must reach at that floor (a 1/16 rounding of
#: its root sum at worst).
MIN_TARGET_UNITS = 16


def check_secure_target_size(
    y: NDArray[np.float64], scale: NDArray[np.float64], frac_bits: int, name: str
) -> None:
    """Refuse targets the secure sums cannot carry: all of them below a few fixed-point units.

    The server's moments round targets below about 1e-20 to 0 and give them the floor
    scale; divided by it they fall below the fixed point's unit (``2^-frac_bits``) and the
    client's sums, so the leaves, held about 0: a forest of 1e-22 targets predicted half
    their mean, of 1e-24 targets 0, silently (``"none"`` fits them as scikit-learn does).
    Refused when even the sum of all this client's ``|y|`` is below :data:`MIN_TARGET_UNITS`
    units; only at the floor scale, as beside larger targets elsewhere a tiny one is
    legitimately about 0.
    """
    y2 = y.reshape(y.shape[0], -1)
    for o, s in enumerate(np.broadcast_to(scale, (y2.shape[1],))):
        total = float(np.sum(np.abs(y2[:, o])))
        if s <= TARGET_SCALE_FLOOR and 0.0 < total < MIN_TARGET_UNITS * s * 2.0**-frac_bits:
            raise ValueError(  # the text reaches the server: no value of y in it
                f"Client {name!r}: regression targets too small for the fixed-point secure "
                f"sums: the pooled targets vary by less than {TARGET_SCALE_FLOOR:g} and this "
                f"client's add up to less than {MIN_TARGET_UNITS} units of the sums "
                f"({MIN_TARGET_UNITS * s * 2.0**-frac_bits:.1e}) in absolute value (the "
                "forest would predict about 0). Multiply y by a power of ten (and divide the "
                'predictions by it), or use privacy="none".'
            )


def sample_weights(weight: ArrayLike | None, n: int, name: str) -> NDArray[np.float64] | None:
    """The client's validated sample weights, or None (all ones)."""
    if weight is None:
        return None
    if np.asarray(weight).dtype.kind == "c":  # NumPy's cast drops the imaginary part, warning
        raise ValueError(f"Client {name!r}: sample_weight is complex: Complex data not supported.")
    try:
        w = np.asarray(weight, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"Client {name!r}: sample_weight is not numeric (it holds {value_kinds(weight)})."
        ) from exc
    if w.ndim != 1 or w.shape[0] != n:
        raise ValueError(
            f"Client {name!r}: sample_weight has shape {w.shape}; expected ({n},), one weight "
            "per row of X."
        )
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"Client {name!r}: sample_weight must be finite and non-negative.")
    return None if np.all(w == 1.0) else w


def check_labels(y: NDArray[Any], name: str) -> None:
    """A classifier's labels at the client: discrete values of one kind (scikit-learn's rules).

    As ``check_classification_targets`` in ``fit``, in NumPy alone (a Flower ClientApp
    imports no scikit-learn): NaN or infinity, non-integral floats ("continuous") and a mix
    of text and other values (None included) are refused, naming the client. So are
    labels of other dtypes (datetimes, durations, bytes; complex numbers, as scikit-learn
    refuses them): the handshake carries strings, numbers and bools (a datetime label
    reached the server, which refused the client's reply as invalid, blaming the client).
    """
    check_label_kind(y, name)
    columns = [y] if y.ndim == 1 else [y[:, o] for o in range(y.shape[1])]
    for column in columns:
        values = column
        if column.dtype == object:
            kinds = {type(v) for v in column.tolist()}
            text = {k for k in kinds if issubclass(k, str)}
            if text and kinds - text:
                found = ", ".join(sorted(k.__name__ for k in kinds))
                raise ValueError(
                    f"Client {name!r}: Mix of label input types (string and number) in y "
                    f"({found}); a class label is a string, a number or a bool, never missing."
                )
            if text:
                continue
            try:
                values = column.astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"Client {name!r}: y holds labels that are not values.") from exc
        if values.dtype.kind in "fc":
            if not np.all(np.isfinite(values)):
                raise ValueError(f"Client {name!r}: Input y contains NaN or infinity.")
            if np.any(values != np.round(values)):
                raise ValueError(
                    f"Client {name!r}: Unknown label type: continuous. Maybe you are trying to "
                    "fit a classifier, which expects discrete classes on a regression target "
                    "with continuous values."
                )


def check_label_kind(y: NDArray[Any], name: str) -> None:
    """Refuse a ``y`` whose dtype is not text, numbers or bools (``check_labels``)."""
    if y.dtype.kind == "c":
        raise ValueError(f"Client {name!r}: Complex data not supported in y.")
    if y.dtype.kind == "f" and y.dtype.itemsize > 8:  # the handshake blamed its reply
        raise ValueError(
            f"Client {name!r}: y has dtype {y.dtype} (long double), which the handshake does "
            "not carry; give its class labels as y.astype(np.float64) or integers."
        )
    if y.dtype.kind not in "biufUO":
        raise ValueError(
            f"Client {name!r}: y has dtype {y.dtype}; a class label under fit_federated is a "
            "string, a number or a bool (convert y, e.g. y.astype(str))."
        )


def label_header(y: NDArray[Any], counts: bool, min_rows: int = 1) -> dict[str, Any]:
    """The handshake's class labels present (and, with ``counts``, their row counts).

    One list for one output; one list per output (a list of lists) for multi-output y.
    ``min_rows``: only the labels held in at least that many rows (under ``"secure"``,
    ``min_aggregate_rows``: a label fewer rows hold would name their value; the list may
    then be empty). ``label_dtype``: the dtype of ``y`` (``label_dtypes``: never a label),
    so that ``classes_`` has scikit-learn's dtype.
    """
    columns = [y] if y.ndim == 1 else [y[:, o] for o in range(y.shape[1])]
    found = [np.unique(c, return_counts=True) for c in columns]
    found = [(u[n >= min_rows], n[n >= min_rows]) for u, n in found]
    labels = [u.tolist() for u, _ in found]
    header: dict[str, Any] = {"labels": labels[0] if y.ndim == 1 else labels}
    if (code := label_dtype(y)) is not None:
        header["label_dtype"] = code
    if counts:  # under "none", checked against n_samples
        tally = [c.tolist() for _, c in found]
        header["label_counts"] = tally[0] if y.ndim == 1 else tally
    return header


def unnamed_label(name: str) -> ValueError:
    """A client holds rows of a label outside the federation's class list: refuse.

    Under ``"secure"`` a client names only the labels it holds in ``min_aggregate_rows``
    rows (:func:`label_header`); a label held in fewer rows that no client names is y,
    which cannot count as missing. The text names neither the label nor its rows (on
    Flower it reaches the server).
    """
    return ValueError(
        f"Client {name!r}: some rows of y hold a class label that is not in the federation's "
        'class list: under privacy="secure" a client names only the labels it holds in at '
        "least min_aggregate_rows rows, and no client holds this one that often. Declare "
        "every label on the estimator (classes=[...], a list per output for multi-output y)."
    )


def label_counts(y: NDArray[Any], classes: Any, name: str) -> NDArray[np.float64]:
    """The client's rows per class, in the federation's class order.

    ``classes``: the class list (one list per output for multi-output y, whose counts come
    one block per output, in output order). class_weight="balanced" under "secure": the
    client's part of the masked pooled class counts.
    """
    multi = isinstance(classes, list) and bool(classes) and isinstance(classes[0], list)
    per_output = classes if multi else [classes]
    columns = [y] if y.ndim == 1 else [y[:, o] for o in range(y.shape[1])]
    if not isinstance(classes, list) or len(columns) != len(per_output):
        raise ValueError(f"Client {name!r}: the class list is not one list per output of y.")
    out = []
    for column, labels in zip(columns, per_output, strict=True):
        index = {label: i for i, label in enumerate(labels)}
        mine = np.zeros(len(labels))
        uniq, n_per = np.unique(column, return_counts=True)
        for label, count in zip(uniq.tolist(), n_per.tolist(), strict=True):
            if label not in index:
                raise unnamed_label(name)
            mine[index[label]] = count
        out.append(mine)
    return np.concatenate(out)


def class_codes(y: NDArray[Any], classes: list[Any], name: str) -> tuple[NDArray[np.float64], int]:
    """The client's labels as class codes (float64), and the classes of all outputs.

    ``classes`` is the federation's class list (one list per output for multi-output y);
    output ``o``'s codes start after the classes of the outputs before it.
    """
    sizes = class_sizes(classes)
    multi = bool(classes) and np.ndim(classes[0]) == 1  # a list of lists: one per output
    per_output = list(classes) if multi else [classes]
    if (y.ndim == 2) != multi or (multi and y.shape[1] != len(sizes)):
        raise ValueError(
            f"Client {name!r}: y has shape {y.shape}, but the server sent classes for "
            f"{len(sizes)} output(s)."
        )
    columns = [y] if y.ndim == 1 else [y[:, o] for o in range(y.shape[1])]
    codes = np.empty((y.shape[0], len(columns)))
    offset = 0
    for o, (column, labels) in enumerate(zip(columns, per_output, strict=True)):
        index = {label: offset + i for i, label in enumerate(labels)}
        uniq, inv = np.unique(column, return_inverse=True)
        if any(u not in index for u in uniq.tolist()):
            raise unnamed_label(name)
        codes[:, o] = np.array([index[u] for u in uniq.tolist()], dtype=np.float64)[inv]
        offset += len(labels)
    return (codes[:, 0] if y.ndim == 1 else codes), offset


def class_indices(y: NDArray[Any], classes: Any, name: str) -> NDArray[np.int64]:
    """Each row's label as its index in its output's class list (int64, no block offsets).

    What ``fit`` hands its clients as labels (``classes`` then ``[0, ..., k - 1]`` per
    output): a client's bootstrap secret reads these under ``"secure"``, so that clients
    holding the labels themselves (text, say) draw ``fit``'s bootstraps.
    """
    if not isinstance(classes, list) or not classes:
        raise ValueError(f"Client {name!r}: the server's classes must be a non-empty list.")
    codes, _ = class_codes(y, classes, name)
    sizes = class_sizes(classes)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]) if codes.ndim == 2 else 0
    return np.asarray(codes - offsets).astype(np.int64)


def class_row_weights(
    weight: NDArray[np.float64] | None, y: NDArray[np.float64], class_weights: list[list[float]]
) -> NDArray[np.float64]:
    """Each row's weight times the product of its outputs' class weights (multi-output).

    ``class_weights[o]`` holds output ``o``'s weight per class (the set-up's, as
    scikit-learn's ``compute_sample_weight``); ``y`` the codes of :func:`class_codes`.
    """
    factor = np.ones(y.shape[0])
    offset = 0
    for o, per_class in enumerate(class_weights):
        factor *= np.asarray(per_class, dtype=np.float64)[y[:, o].astype(np.int64) - offset]
        offset += len(per_class)
    return factor if weight is None else weight * factor


def correct_rows(
    pred: NDArray[np.float64], y: NDArray[np.float64], sizes: tuple[int, ...]
) -> NDArray[np.bool_]:
    """Rows whose most probable class is right (on every output: subset accuracy).

    ``pred`` holds the class proportions, one block of ``sizes[o]`` columns per output;
    ``y`` the codes of :func:`class_codes`.
    """
    if y.ndim == 1:
        return np.asarray(np.argmax(pred, axis=1) == y)
    ok = np.ones(y.shape[0], dtype=bool)
    offset = 0
    for o, size in enumerate(sizes):
        ok &= offset + np.argmax(pred[:, offset : offset + size], axis=1) == y[:, o]
        offset += size
    return ok


def by_output(
    y: NDArray[np.float64],
    out: NDArray[np.float64],
    run: Any,
    y_log: NDArray[np.float64] | None = None,
    classes: bool = False,
) -> None:
    """``run(y, out)`` for one target; once per output (into scratch) for several.

    Regression: the statistics of output ``o`` are
    ``out[..., STAT_TASK + 2 o : STAT_TASK + 2 o + 2]`` (4-column scratch per output).
    Classification (``classes``): output ``o``'s codes of :func:`class_codes` count into
    its own block of class columns (full-width scratch per output, its class columns added).
    Rows and weight are the same for every output. ``out`` starts at zero (the kernels add
    into it or overwrite it). With ``y_log`` (criterion="poisson") the second task column
    is the weighted sum of ``y_log`` (the kernel's weighted sum, on a second pass).
    """
    if y.ndim == 2 and classes:
        scratch = np.zeros(out.shape)
        for o in range(y.shape[1]):
            scratch[...] = 0.0
            run(np.ascontiguousarray(y[:, o]), scratch)
            if o == 0:
                out[...] = scratch
            else:
                out[..., STAT_TASK:] += scratch[..., STAT_TASK:]  # zero outside o's block
        return
    if y.ndim == 1:
        run(y, out)
        if y_log is not None:
            scratch = np.zeros(out.shape)
            run(y_log, scratch)
            out[..., STAT_TASK + 1] = scratch[..., STAT_TASK]
        return
    scratch = np.zeros(out.shape[:-1] + (STAT_TASK + 2,))
    for o in range(y.shape[1]):
        scratch[...] = 0.0
        run(np.ascontiguousarray(y[:, o]), scratch)
        if o == 0:
            out[..., :STAT_TASK] = scratch[..., :STAT_TASK]
        out[..., STAT_TASK + 2 * o : STAT_TASK + 2 * o + 2] = scratch[..., STAT_TASK:]
        if y_log is not None:  # output o's sum of w y log y, as for one output
            scratch[...] = 0.0
            run(np.ascontiguousarray(y_log[:, o]), scratch)
            out[..., STAT_TASK + 2 * o + 1] = scratch[..., STAT_TASK]


def proposal_target(y: NDArray[np.float64], n_classes: int = 0) -> NDArray[np.float64]:
    """One target for a client's threshold proposals (``local_candidates``).

    ``y`` itself for one output. Multi-output regression: the sum of the outputs of ``y``,
    each standardised on the client's rows; multi-output classification (``n_classes``):
    the first output's classes. Proposals only add candidates; every split is still chosen
    on the pooled statistics of all outputs.
    """
    if y.ndim == 1:
        return y
    if n_classes:
        return np.ascontiguousarray(y[:, 0])
    spread = y.std(axis=0)
    z = (y - y.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
    return np.ascontiguousarray(z.sum(axis=1))


def poisson_column(y: NDArray[np.float64], name: str) -> NDArray[np.float64]:
    """``y log y`` of every row (0 where y = 0): criterion="poisson"'s second statistic.

    One column per output for multi-output ``y``. Raises scikit-learn's ``ValueError`` for
    a negative target (:func:`check_poisson_targets`).
    """
    check_poisson_targets(y, name)
    from scipy.special import xlogy  # on use: the other criteria need no SciPy

    return np.asarray(xlogy(y, y), dtype=np.float64)


def check_poisson_targets(y: NDArray[np.float64], name: str) -> None:
    """criterion="poisson"'s domain, ``y >= 0``: a negative target refused, naming the client.

    The handshake checks it (a request of ``criterion="poisson"``), before any round that
    spends a privacy budget or time; scikit-learn's words, then what the domain is. The
    text says neither how many targets nor which (it reaches the server).
    """
    if np.any(y < 0):
        raise ValueError(
            f"Client {name!r}: Some value(s) of y are negative which is not allowed for "
            'Poisson regression (criterion="poisson" takes targets >= 0, such as counts: '
            'correct or drop those rows, or use criterion="squared_error").'
        )


def feature_sketches(
    X: NDArray[np.float64], n_bins: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per column, the quantiles ``b / B`` (b = 1..B, the last the maximum) of the known values.

    ``binning="global"``'s handshake answer (under ``privacy="none"``, where values may
    travel), with the number of known values per column. Missing values (held as +inf)
    are left out; a column without known values has a row of zeros and a count of 0.
    """
    d = X.shape[1]
    out = np.zeros((d, n_bins))
    rows = np.zeros(d)
    levels = np.arange(1, n_bins + 1) / n_bins
    for j in range(d):
        v = np.sort(X[:, j][np.isfinite(X[:, j])])
        rows[j] = v.size
        if v.size:
            out[j] = v[np.clip(np.ceil(levels * v.size).astype(np.int64) - 1, 0, v.size - 1)]
    return out, rows
