"""The client's half of ``privacy="secure"``: masked answers, never a data value.

Under ``"secure"`` a client answers every round the server adds up with integer arrays
(fixed point for real values) plus its pairwise masks (:mod:`.privacy.secagg`), so the
server sees only sums over clients. It never sends a data value: instead of quantile
sketches it sends counts on grids the server placed from pooled information, and its
regression targets are standardised with pooled constants before any sum leaves it.
Its bootstrap is seeded with a secret derived from its own data, so the server cannot
recompute which rows a tree drew (the forest stays reproducible: the secret is a
function of the data), bound at the set-up to the digest of the fit's settings
(``bind_secret``), so that fits with other settings draw independent bootstraps.
"""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from .._common import N_FINE_BINS, STAT_ROWS, STAT_TASK, STAT_WEIGHT, is_int_in, n_stats
from . import client_kernels as K
from .client_kept import KEPT_DONE, KeptBins, keep_bins, kept_words
from .client_packed import left_words
from .client_secrets import (
    DATA_TAG_WORDS,
    bind_secret,
    data_secret,
    data_tag,
    federation_secret,
    settings_digest_of,
    tree_secrets,
)
from .client_sketch import fine_codes
from .client_targets import check_secure_target_size, class_indices, label_counts
from .client_weights import moment_weights, oob_weights
from .domains import code_counts
from .grid_wire import decode_candidates, grid_inputs, half_of, half_words, lattice_grid
from .privacy.copies import ORDER_FRAC_BITS, order_categories, order_sums
from .privacy.dp import ASINH_CLIP, discrete_gaussian, log_bound
from .privacy.grids import libm_arcsinh, warn_unresolved
from .privacy.secagg import FRAC_BITS, MaskingKeys, to_fixed, to_fixed2, to_fixed_packed
from .privacy.weight_band import LOG_FRAC_BITS, weight_logs
from .protocol import (
    GRID,
    OOB,
    RECOVER,
    ROUND_A,
    ROUND_B,
    Message,
    expect_array,
)
from .scratch import scratch

if TYPE_CHECKING:
    from .client import Client, _Fit

__all__ = [
    "DATA_TAG_WORDS",
    "MOMENT_FRAC_BITS",
    "SecureParty",
    "bind_secret",
    "colluder_count",
    "data_secret",
    "data_tag",
    "moment_weights",
    "oob_weights",
    "settings_digest_of",
    "tree_secrets",
    "oob_frac_bits",
    "stat_frac_bits",
    "warn_unresolved",
]

#: Fractional bits of the grid moments of asinh(x) (a grid needs no more resolution).
MOMENT_FRAC_BITS = 16


def stat_frac_bits(n_classes: int, weighted: bool = False, n_outputs: int = 1) -> NDArray[np.int64]:
    """Fractional bits per column of the additive statistics (counts are exact integers).

    With sample weights (``weighted``) the weight and class columns are real sums too.
    Every regression task column has ``FRAC_BITS``: the pairs of standardised targets
    (one per output), and criterion="poisson"'s ``(sum w u, sum w u log u)`` of scaled
    targets ``u = y / y_scale >= 0``, where ``|u log u| <= max(u^2, 1/e)`` keeps the second
    column within the range of a squared target's.
    """
    s = n_stats("classification" if n_classes else "regression", n_classes, n_outputs)
    bits = np.zeros(s, dtype=np.int64)
    if not n_classes:
        bits[2:] = FRAC_BITS  # sum of w z and w z^2 (standardised targets)
    if weighted:
        bits[1:] = FRAC_BITS
    return bits


def oob_frac_bits(width: int, classification: bool) -> NDArray[np.int64]:
    """Fractional bits of the out-of-bag sums (a count, then real sums for regression)."""
    bits = np.zeros(width, dtype=np.int64)
    if not classification:
        bits[1:] = FRAC_BITS
    return bits


def _sum_terms(z: NDArray[np.float64], setup: dict[str, Any]) -> NDArray[np.float64]:
    """The largest term a row adds to the secure sums of its standardised target."""
    if setup.get("criterion") == "poisson":  # (sum w u, sum w u log u), u >= 0
        from scipy.special import xlogy  # on use: the other criteria need no SciPy

        return np.asarray(np.maximum(np.abs(z), np.abs(xlogy(z, z))))
    return np.asarray(z * z)


def fit_outputs(fit: _Fit) -> int:
    """The outputs of a fit's ``y`` (its targets, or class code columns, per row)."""
    return int(fit.y.shape[1]) if fit.y.ndim == 2 else 1


class SecureParty:
    """A client's keys and masked answers for one fit under ``privacy="secure"``."""

    def __init__(self, client: Client, dp: bool = False, regression: bool = False) -> None:
        self.client = client
        self.keys = MaskingKeys(client.name)
        # A regressor's targets enter the secret as floats, as fit's clients hold them: the
        # text of int, bool or Decimal targets drew other bootstraps than fit on the same
        # rows (the same random_state gives the same forest through fit and fit_federated).
        # A classifier's labels: as class indices, once the moments round names the classes.
        y = client.y_raw.astype(np.float64) if regression else client.y_raw
        # Under "dp" the bootstrap secret must not depend on the data (one row would change
        # every draw): a random one, kept for the fit.
        self.secret = (
            secrets.randbits(128)
            if dp
            else data_secret(client.X, y, client.name, client.sample_weight, client._cat_raw)
        )
        #: The targets' standardisation (a float, or one per output for multi-output y).
        self.y_center: float | NDArray[np.float64] = 0.0
        self.y_scale: float | NDArray[np.float64] = 1.0
        #: The fit's bootstrap secret: ``secret`` bound to the set-up's settings digest.
        self.bound: int | None = None
        #: Under "dp": the noise (sigma per bound unit), target clip and weight cap.
        self.dp: dict[str, float] | None = None
        self._rng = np.random.default_rng(secrets.randbits(128))
        #: Round A's bins of the level, for its Round B (:mod:`.client_kept`; not in to_state).
        self.kept: KeptBins | None = None

    def bootstrap_secret(self) -> int:
        """The secret the bootstrap draws are seeded with (bound at the set-up)."""
        if self.bound is None:
            raise ValueError(f"Client {self.client.name!r}: bootstrap draws before the set-up.")
        return self.bound

    def weights_secret(self, msg: Message) -> int:
        """The secret of the rows' weights in a sum over every row (``client_weights``).

        The data secret bound to the clients the round is sent to (``federation_secret``;
        its header's ``secagg`` peers), so that every client draws other weights when one
        joins or leaves; the server sends the grid moments' round again, to the survivors,
        when one drops in it (``server/secure_sums.sums_sent_again``), and releases no
        out-of-bag sum after a drop there (``server/secure.oob_sums``, red team 18).
        """
        return federation_secret(self.secret, self._peers(msg))

    # ------------------------------------------------------------------ state
    def to_state(self) -> tuple[Any, ...]:
        """The party as plain values and byte arrays (kept by the client between messages)."""
        private, pair = self.keys.export()
        names = sorted(pair)
        return (
            np.frombuffer(private, dtype=np.uint8).copy(),
            "\x00".join(names),
            np.frombuffer(b"".join(pair[n] for n in names), dtype=np.uint8).copy(),
            str(self.secret),
            "" if self.bound is None else str(self.bound),
            self.y_center,
            self.y_scale,
            json.dumps(self.dp),
        )

    @classmethod
    def from_state(cls, client: Client, state: tuple[Any, ...]) -> SecureParty:
        """Inverse of :meth:`to_state`."""
        private, names, keys, secret, bound, center, scale, dp = state
        peers = [n for n in str(names).split("\x00") if n]
        raw = np.asarray(keys, dtype=np.uint8).tobytes()
        if len(raw) != 32 * len(peers) or np.asarray(private).size != 32:
            raise ValueError(f"Client {client.name!r}: corrupt secure state.")
        party = cls.__new__(cls)
        party.client = client
        pair = {n: raw[32 * i : 32 * (i + 1)] for i, n in enumerate(peers)}
        party.keys = MaskingKeys.restore(client.name, np.asarray(private).tobytes(), pair)
        party.secret = int(secret)
        party.bound = int(bound) if str(bound) else None
        party.y_center, party.y_scale = _standard(center), _standard(scale)
        party.dp = json.loads(str(dp))
        party._rng = np.random.default_rng(secrets.randbits(128))
        party.kept = None  # Round B bins anew
        return party

    # ------------------------------------------------------------------ masking
    def _peers(self, msg: Message) -> list[str]:
        sec = msg.header.get("secagg")
        return [str(p) for p in sec["peers"]] if isinstance(sec, dict) and "peers" in sec else []

    def noisy(
        self,
        msg: Message,
        values: NDArray[np.float64],
        bounds: Any,
        key: str = "sigma",
        frac_bits: Any = None,
    ) -> NDArray[np.float64]:
        """Under "dp": this client's share of the Gaussian noise, per entry's bound.

        With ``frac_bits`` (the fixed point the values travel in) the share is a discrete
        Gaussian on that grid (``privacy.dp.discrete_gaussian``), so the clients' shares
        add up to integers of the grid exactly; without (the two-word moments of the grid
        rounds, finer than a float holds) a continuous Gaussian.
        """
        if self.dp is None:
            return values
        # Any P - t honest shares of the P clients asked carry the plan's noise.
        peers, t = max(len(self._peers(msg)), 1), int(self.dp.get("colluders", 0))
        if peers <= t:
            raise ValueError(
                f"Client {self.client.name!r}: the server asks for noise that holds against "
                f"{t} colluding clients among the {peers} of this round; at most {peers - 1}."
            )
        share = float(self.dp[key]) / np.sqrt(peers - t)
        scale = share * np.broadcast_to(np.asarray(bounds, dtype=np.float64), values.shape)
        if frac_bits is None:
            return np.asarray(values + self._rng.normal(size=values.shape) * scale)
        unit = np.broadcast_to(np.exp2(np.asarray(frac_bits, dtype=np.float64)), values.shape)
        noise = discrete_gaussian(scale * unit, self._rng)
        return np.asarray(values + noise / unit)

    def bounds(self, fit: _Fit) -> NDArray[np.float64]:
        """Per column of the statistics: the most one row can add (rows, weight, sums).

        Each output's pair is bounded by ``(w c, w c^2)``; criterion="poisson"'s by
        ``(w c, w max(c log c, 1/e))`` (``0 <= u <= c``).
        """
        assert self.dp is not None
        w = float(self.dp["max_weight"]) * float(self.dp.get("class_factor", 1.0))
        c = float(self.dp["clip"])
        k = fit_outputs(fit)
        s = n_stats("classification" if fit.n_classes else "regression", fit.n_classes, k)
        out = np.full(s, w)
        out[STAT_ROWS] = 1.0
        if not fit.n_classes:
            second = log_bound(c) if fit.y_log is not None else c * c
            out[2:] = np.tile([w * c, w * second], k)
        return out

    def _masked(self, msg: Message, kind: str, arrays: dict[str, NDArray[np.uint64]]) -> Message:
        sec = msg.header.get("secagg")
        if not isinstance(sec, dict) or "tag" not in sec or "peers" not in sec:
            raise ValueError(
                f"Client {self.client.name!r}: a secure round without its secagg header."
            )
        peers = [str(p) for p in sec["peers"]]
        # The arrays are this answer's own encodings: masked where they are, no copy.
        masked = self.keys.mask(arrays, peers, int(sec["tag"]), in_place=True)
        return Message(kind, {"name": self.client.name}, masked)

    def recover(self, msg: Message) -> Message:
        """The masks this client added for the dropped peers in one round (per array)."""
        shapes = {str(k): tuple(int(v) for v in s) for k, s in msg.header["shapes"].items()}
        dropped = [str(d) for d in msg.header["dropped"]]
        peers = [str(p) for p in msg.header["peers"]]
        arrays = self.keys.correction(shapes, dropped, int(msg.header["tag"]), peers)
        return Message(RECOVER, {"name": self.client.name}, arrays)

    # ------------------------------------------------------------------ grid rounds
    def grid(self, msg: Message) -> Message:
        """Pooled-grid rounds: moments of asinh(x) (and of y), then counts on a grid."""
        c = self.client
        if "public_keys" in msg.header:
            publics = {str(k): bytes.fromhex(str(v)) for k, v in msg.header["public_keys"].items()}
            self.keys.agree(publics)
        if "dp" in msg.header:
            self.dp = _check_dp(msg.header["dp"], c.name, c.min_dp_colluders)
        feats = expect_array(msg, "features", "i", (None,), "server").astype(np.int64)
        if feats.size and (feats.min() < 0 or feats.max() >= c.X.shape[1]):
            raise ValueError(f"Client {c.name!r}: grid features out of range.")
        x = c.X[:, feats]  # Fortran order, as from a row-major X: the moments' sums alike
        if msg.header.get("stage") == "known":  # rows known per column (sparse_columns.py)
            known = np.isfinite(x).sum(axis=0).astype(np.float64)
            return self._masked(msg, GRID, {"known": to_fixed(known, 0)})
        if msg.header.get("stage") == "moments":
            warn_unresolved(x, feats, c.name, c.feature_names)
            if self.dp is None and "classes" in msg.header:  # "secure" classification: the
                # secret reads each label as its class's index, as fit's clients hold them
                # (the labels' text drew other bootstraps: text labels, say), before any use
                labels = class_indices(c.y_raw, msg.header["classes"], c.name)
                self.secret = data_secret(c.X, labels, c.name, c.sample_weight, c._cat_raw)
            clip = ASINH_CLIP if self.dp is not None else np.inf
            known = np.isfinite(x)  # a missing value (+inf) is in no moment
            a = np.where(known, np.clip(libm_arcsinh(np.where(known, x, 0.0)), -clip, clip), 0.0)
            # Under "secure" each row's terms weigh its secret weight (moment_weights).
            w = known if self.dp is not None else moment_weights(self.weights_secret(msg), known)
            moments = np.column_stack(
                [known.sum(axis=0).astype(np.float64), (w * a).sum(axis=0), (w * a * a).sum(axis=0)]
            )
            m_bounds = [1.0, ASINH_CLIP, ASINH_CLIP**2]
            moments = self.noisy(msg, moments, m_bounds, "grid_sigma")
            hi, lo = to_fixed2(moments, MOMENT_FRAC_BITS)
            arrays = {"moments": hi, "moments_lo": lo}
            if msg.header.get("target_hist"):
                # Under "dp": counts of asinh(y) on a fixed grid (one bin per row).
                ay = np.clip(libm_arcsinh(c.y_raw), -ASINH_CLIP, ASINH_CLIP)
                by_out = ay.reshape(ay.shape[0], -1).T  # one histogram per output
                counts = np.array([np.histogram(a, bins=target_grid())[0] for a in by_out])
                counts = counts.astype(np.float64)
                counts = self.noisy(msg, counts, 1.0, "target_sigma", 0)
                arrays["y_hist"] = to_fixed(counts, 0)
            elif msg.header.get("target_moments"):
                ay = np.clip(libm_arcsinh(c.y_raw), -clip, clip)
                n = float(c.n_samples)
                cols = ay[:, None].T if ay.ndim == 1 else np.ascontiguousarray(ay.T)
                every = np.ones((cols.shape[1], 1), dtype=bool)
                secret = self.weights_secret(msg)
                w = moment_weights(secret, every)[:, 0] if self.dp is None else every[:, 0]
                y_mom = np.array([[n, (w * a).sum(), (w * a * a).sum()] for a in cols])
                y_mom = self.noisy(msg, y_mom, m_bounds, "target_sigma")
                arrays["y_moments"], arrays["y_moments_lo"] = to_fixed2(y_mom, MOMENT_FRAC_BITS)
            if "class_counts" in msg.header:  # class_weight="balanced": rows per class
                mine = label_counts(c.y_raw, msg.header["class_counts"], c.name)  # per output
                mine = self.noisy(msg, mine, 1.0, "target_sigma", 0)  # under "dp": a row, 1
                arrays["class_counts"] = to_fixed(mine, 0)
            if msg.header.get("data_tag"):  # "secure": the digest covers the pooled tag
                arrays["data_tag"] = data_tag(self.secret)
            if msg.header.get("weight_logs"):  # "secure", weighted: the weights' band
                logs = weight_logs(c.sample_weight, c.n_samples)
                arrays["weight_logs"] = to_fixed(logs, np.array([0, LOG_FRAC_BITS]))
            if "code_counts" in msg.header:  # "secure": rows per category code (rare_codes.py)
                arrays["code_counts"] = to_fixed(
                    code_counts(c._cat_raw, msg.header["code_counts"], f"Client {c.name!r}"), 0
                )
            if "order_sums" in msg.header:  # "secure": columns ordering rows alike (copies.py)
                cats = order_categories(c._cat_raw, msg.header["order_sums"], f"Client {c.name!r}")
                arrays["order_sums"] = to_fixed(order_sums(x, c.n_samples, cats), ORDER_FRAC_BITS)
            return self._masked(msg, GRID, arrays)
        edges = expect_array(msg, "edges", "f", (feats.size, None), "server")
        cum = np.empty(edges.shape)
        for i in range(feats.size):
            xs = np.sort(x[:, i])
            cum[i] = np.searchsorted(xs, edges[i], side="right")
        if self.dp is not None:  # per-bin increments, each row in one bin
            cum = self.noisy(msg, np.diff(cum, axis=1, prepend=0.0), 1.0, "grid_sigma", 0)
        return self._masked(msg, GRID, {"hist": to_fixed(cum, 0)})

    # ------------------------------------------------------------------ set-up
    def set_up(self, msg: Message, y: NDArray[np.float64], n_classes: int) -> NDArray[np.float64]:
        """The party's part of the set-up: regression targets standardised (returned).

        The bootstrap secret is bound to the request's settings digest (refused without).

        Under "dp" with multi-output class weights (the set-up's ``class_weights``), a row
        weighs its bootstrap count times the product of its outputs' class weights: every
        weight and class column is then bounded by ``max_weight`` times the product of each
        output's largest class weight (``class_factor``), so that each released entry still
        moves by at most 1 in its bound's units when one row is replaced.
        """
        setup = msg.header["setup"]
        self.bound = bind_secret(self.secret, settings_digest_of(msg, self.client.name))
        if self.dp is not None:
            self.dp["class_factor"] = class_factor(setup.get("class_weights"), self.client.name)
        return y if n_classes else self.standardise(setup, y)

    def standardise(self, setup: dict[str, Any], y: NDArray[np.float64]) -> NDArray[np.float64]:
        """Regression targets as the sums carry them: ``z = (y - center) / scale``.

        Per output for multi-output ``y`` (a center and a scale each); under
        criterion="poisson" the center is 0 (``z = y / scale >= 0``).
        """
        self.y_center = _standard(setup.get("y_center", 0.0))
        self.y_scale = _standard(setup.get("y_scale", 1.0))
        center, scale = np.asarray(self.y_center), np.asarray(self.y_scale)
        k = y.shape[1] if y.ndim == 2 else 0
        if (
            center.shape != scale.shape
            or center.size != max(k, 1)
            or (k and center.ndim != 1)
            or not np.all(np.isfinite(center))
            or not np.all(scale > 0)
            or not np.all(np.isfinite(scale))
        ):
            raise ValueError(
                f"Client {self.client.name!r}: invalid target standardisation from the server "
                f"(center {self.y_center!r}, scale {self.y_scale!r}; y has {max(k, 1)} outputs)."
            )
        if self.dp is None:
            check_secure_target_size(y, scale, FRAC_BITS, self.client.name)
        z = np.asarray((y - self.y_center) / self.y_scale)
        if self.dp is not None:
            z = np.clip(z, -float(self.dp["clip"]), float(self.dp["clip"]))
        elif np.any(_sum_terms(z, setup) * max(z.shape[0], 1) >= 2.0 ** (62 - FRAC_BITS)):
            # A sum of w z^2 (Poisson: w u log u) over this client's rows would not fit the
            # fixed point. Says why without a value of the client's data (the message may
            # reach the server).
            raise ValueError(
                f"Client {self.client.name!r}: some targets lie too far from the pooled center, "
                "in units of the pooled scale, for the fixed-point secure sums (targets over "
                "many orders of magnitude, e.g. mostly zeros and a few huge values). Transform "
                'y (e.g. np.log1p) or, for counts, use criterion="poisson"; privacy="none" has '
                "no such limit."
            )
        return z

    def standardise_prediction(self, p: NDArray[np.float64]) -> NDArray[np.float64]:
        """Out-of-bag predictions in the targets' standardised units (clipped under "dp")."""
        p = np.asarray((p - self.y_center) / self.y_scale)
        if self.dp is not None:  # the errors' bound under "dp"
            p = np.clip(p, -self.dp["clip"], self.dp["clip"])
        return p

    # ------------------------------------------------------------------ rounds A and B
    def round_a(self, msg: Message, fit: _Fit, summary: NDArray[np.float64]) -> Message:
        """Masked node summaries and cumulative counts at every pair's grid edges."""
        assert fit.pair_off is not None and fit.pair_feat is not None
        n_pairs = int(fit.pair_off[-1])
        grid_off = expect_array(msg, "grid_off", "i", (n_pairs + 1,), "server").astype(np.int64)
        _check_offsets(grid_off, "grid_off", self.client.name)
        # The grids as the server counts on them, in this thread's scratch; Round B's
        # candidates index them: it decodes its candidates' edges from this request's
        # arrays, kept as checked here.
        wire = grid_inputs(msg, grid_off, self.client.name)
        grid = self._level_grid(wire, grid_off, fit.pair_feat)
        fit.level_grid_off, fit.level_wire = grid_off, wire
        bits = stat_frac_bits(fit.n_classes, fit.weighted, fit_outputs(fit))
        self.kept = None  # the last level's; this level's bins kept where Round B can use them
        keep = fit.y.ndim == 1 and fit.y_log is None
        hist = self._words_at(msg, fit, grid_off, grid, bits[:2], borrow=True, keep=keep)
        borrowed = hist is not None
        if hist is None:
            # Rows, not class-weighted rows, where the server asks (``weights.rows_hist``).
            rows_only = msg.header.get("hist_rows") is True and self.dp is None
            cum = self._counts_at(fit, grid_off, grid, np.ones_like(fit.w) if rows_only else None)
            if self.dp is not None:
                b = self.bounds(fit)
                summary = self.noisy(msg, summary, b, frac_bits=bits)
                cum = self.noisy(msg, increments(cum, grid_off), b[:2], frac_bits=bits[:2])
            hist = self._packed(msg, cum, bits[:2])
        half = half_of(msg, n_pairs, self.client.name)  # small nodes: two edges to a word
        if half is not None:  # from the scratch into a new array: the answer's own
            hist = half_words(hist, grid_off, half, self.client.name, in_place=not borrowed)
        elif borrowed:
            hist = hist.copy()
        arrays = {"summary": to_fixed(summary, bits), "hist": hist}
        return self._masked(msg, ROUND_A, arrays)

    def _level_grid(
        self,
        wire: tuple[NDArray[Any], ...],
        grid_off: NDArray[np.int64],
        pair_feat: NDArray[np.int32],
    ) -> NDArray[np.float64]:
        """A Round A request's grids, decoded into this thread's scratch (:mod:`.scratch`)."""
        room = scratch("grid", int(grid_off[-1]), np.float64)
        return lattice_grid(wire, grid_off, pair_feat, self.client.name, room)

    def kept_grid(self, fit: _Fit) -> NDArray[np.float64]:
        """The level's grids again, from Round A's checked wire arrays kept (empty before any)."""
        if fit.level_wire is None or fit.level_grid_off is None or fit.pair_feat is None:
            return np.zeros(0)
        return self._level_grid(fit.level_wire, fit.level_grid_off, fit.pair_feat)

    def _packed(
        self, msg: Message, values: NDArray[np.float64], bits: NDArray[np.int64]
    ) -> NDArray[np.uint64]:
        """``values`` in fixed point; rows and draws in one word if asked (``pack_counts``).

        Packed, the two whole counts are encoded and packed in one pass
        (:func:`~.privacy.secagg.to_fixed_packed`).
        """
        if msg.header.get("pack_counts") is not True:
            return to_fixed(values, bits)
        if self.dp is not None or np.any(bits[:2]):
            to_fixed(values, bits)  # its errors first, as before the counts are packed
            raise ValueError(
                f"Client {self.client.name!r}: packed counts asked for, but its rows' "
                'weights are not whole numbers (sample weights or "dp").'
            )
        return to_fixed_packed(values, bits, self.client.name)

    def _counts_at(
        self,
        fit: _Fit,
        off: NDArray[np.int64],
        edges: NDArray[np.float64],
        w: NDArray[np.float64] | None = None,
    ) -> NDArray[np.float64]:
        """Rows and weight left of every pair's grid edges.

        The left statistics' first two columns, computed alone: the kernel then adds two
        sums per row, not all of them. ``w``: the rows' weights if not ``fit.w``'s.
        """
        out = np.empty((edges.size, 2))
        # The kernel takes one target (only the counts are kept): multi-output, the first.
        y = fit.y if fit.y.ndim == 1 else np.ascontiguousarray(fit.y[:, 0])

        kernel: Any = K.left_stats

        def run(args: tuple[Any, ...], lo: int, hi: int) -> None:
            kernel(*args, out[lo:hi])

        self._blocks_of(fit, off, edges, y, run, w)
        return out

    def _words_at(
        self,
        msg: Message,
        fit: _Fit,
        off: NDArray[np.int64],
        edges: NDArray[np.float64] | None,
        bits: NDArray[np.int64],
        borrow: bool = False,
        keep: bool = False,
        kept: tuple[KeptBins, NDArray[np.int64]] | None = None,
    ) -> NDArray[np.uint64] | None:
        """``_packed`` of the left statistics (``bits``' columns) at every pair's ``edges``.

        Written by the kernel (:func:`~.client_packed.left_words`: the same words as
        ``to_fixed_packed`` of the float statistics, no float array of every edge; with
        ``borrow`` in this thread's scratch, :mod:`.scratch`, copied by the caller), when
        the answer packs its counts (whole weights, no noise) and the statistics are
        those of one target (the first two columns alone, or one output's and no
        criterion="poisson" second pass); None otherwise, or where a sum would not pack
        (the caller then takes the two steps, which raise their own errors). ``keep``:
        Round A's bins kept in ``self.kept`` if it succeeds; ``kept``: Round B from them
        and ``cand_at`` (:mod:`.client_kept`; ``edges`` None), None where they cannot serve.
        """
        if (
            self.dp is not None
            or msg.header.get("pack_counts") is not True
            or np.any(bits[:2])
            or (bits.size > 2 and (fit.y.ndim != 1 or fit.y_log is not None))
        ):
            return None
        y = fit.y if fit.y.ndim == 1 else np.ascontiguousarray(fit.y[:, 0])
        scale = np.exp2(bits.astype(np.float64))
        shape = (int(off[-1]), bits.size - 1)
        out = scratch("words", shape[0] * shape[1], np.uint64).reshape(shape) if borrow else None
        out = np.empty(shape, dtype=np.uint64) if out is None else out
        if kept is not None:
            done = kept_words(self.client, fit, kept[0], kept[1], off, scale, out) == KEPT_DONE
            return out if done else None
        assert edges is not None
        ok = []
        kernel: Any = left_words
        binned = keep_bins(fit, off) if keep else None

        def run(args: tuple[Any, ...], lo: int, hi: int) -> None:
            ok.append(kernel(*args, scale, out[lo:hi], None if binned is None else binned.arrays()))

        self._blocks_of(fit, off, edges, y, run)
        self.kept = binned if all(ok) else None
        return out if all(ok) else None

    def _blocks_of(
        self,
        fit: _Fit,
        off: NDArray[np.int64],
        edges: NDArray[np.float64],
        y: NDArray[np.float64],
        run: Any,
        w: NDArray[np.float64] | None = None,
    ) -> None:
        """``run(args, lo, hi)`` per block of trees (in threads, as ``_run_blocks``).

        ``args`` are a left-statistics kernel's arguments for the block (``left_stats``'
        up to ``slot_hi``), ``lo:hi`` its rows of the output; the rows weigh ``w`` if given.
        """
        assert fit.pair_off is not None and fit.pair_feat is not None and fit.slot_tree is not None
        c = self.client
        if c._codes is None:
            c._codes = fine_codes(c.X, N_FINE_BINS)
        codes, fine_min, fine_max = c._codes
        pair_off, pair_feat, slot_tree = fit.pair_off, fit.pair_feat, fit.slot_tree
        weights = fit.w if w is None else w

        def job(a: int, b: int) -> None:
            s_lo, s_hi = int(slot_tree[a]), int(slot_tree[b])
            r = slice(int(fit.tree_rows[a]), int(fit.tree_rows[b]))
            args: tuple[Any, ...] = (
                c.Xt, codes, fine_min, fine_max, fit.rows[r], weights[r], fit.slot[r], y,
                fit.n_classes, pair_off, pair_feat, off, edges, s_lo, s_hi,
            )  # fmt: skip
            run(args, off[pair_off[s_lo]], off[pair_off[s_hi]])

        c._run_blocks(fit, job)

    def round_b(self, msg: Message, fit: _Fit) -> Message:
        """Masked left statistics at every candidate and per-group category statistics."""
        assert fit.pair_off is not None and fit.pair_feat is not None
        c = self.client
        n_pairs = int(fit.pair_off[-1])
        cand_off = expect_array(msg, "cand_off", "i", (n_pairs + 1,), "server").astype(np.int64)
        _check_offsets(cand_off, "cand_off", c.name)
        bits = stat_frac_bits(fit.n_classes, fit.weighted, fit_outputs(fit))
        kept, self.kept, words = self.kept, None, None  # Round A's bins serve one Round B
        if kept is not None and "cand_at" in msg.arrays and kept.serves(fit):
            at = expect_array(msg, "cand_at", "u", (int(cand_off[-1]),), "server")
            words = self._words_at(msg, fit, cand_off, None, bits, kept=(kept, at.astype(np.int64)))
        del kept
        left = None
        if words is None:  # as sent: decoded and binned (the same words)
            grid_off = (
                fit.level_grid_off if fit.level_grid_off is not None else np.zeros(1, np.int64)
            )
            wire = fit.level_wire if fit.level_wire is not None else np.zeros(0)
            cand = decode_candidates(msg, cand_off, wire, grid_off, c.name, fit.pair_feat)
            words = self._words_at(msg, fit, cand_off, cand, bits)  # the words directly
            left = c._left_stats(fit, cand_off, cand) if words is None else None
        group_pair = expect_array(msg, "group_pair", "i", (None,), "server").astype(np.int64)
        group_off = expect_array(msg, "group_off", "i", (group_pair.size + 1,), "server")
        group_map = expect_array(msg, "group_map", "i", (int(group_off[-1]),), "server")
        n_groups = expect_array(msg, "n_groups", "i", (group_pair.size,), "server")
        if group_pair.size and (group_pair.min() < 0 or group_pair.max() >= n_pairs):
            raise ValueError(f"Client {c.name!r}: group pairs out of range.")
        stats = self._group_stats(fit, group_pair, group_off.astype(np.int64), group_map, n_groups)
        if self.dp is not None:
            assert left is not None
            b = self.bounds(fit)
            left = self.noisy(msg, increments(left, cand_off), b, frac_bits=bits)
            stats = self.noisy(msg, stats, b, frac_bits=bits)
        if left is not None:
            words = self._packed(msg, left, bits)
        assert words is not None
        arrays = {
            "left": words,
            "group_stats": self._packed(msg, stats, bits),
        }
        return self._masked(msg, ROUND_B, arrays)

    def _group_stats(
        self,
        fit: _Fit,
        group_pair: NDArray[np.int64],
        group_off: NDArray[np.int64],
        group_map: NDArray[Any],
        n_groups: NDArray[Any],
    ) -> NDArray[np.float64]:
        """Statistics of each category group of each categorical pair (its node's rows)."""
        assert fit.pair_off is not None and fit.pair_feat is not None
        task = "classification" if fit.n_classes else "regression"
        s = n_stats(task, fit.n_classes, fit_outputs(fit))
        g_off = np.zeros(group_pair.size + 1, dtype=np.int64)
        np.cumsum(n_groups, out=g_off[1:])
        out = np.zeros((int(g_off[-1]), s))
        if not group_pair.size:
            return out
        pair_node = np.repeat(np.arange(fit.pair_off.size - 1), np.diff(fit.pair_off))
        # Every group pair's in-bag entries (its node's, in their order), one after the other.
        active = np.flatnonzero(fit.slot >= 0)
        by_slot = active[np.argsort(fit.slot[active], kind="stable")]
        slots = fit.slot[by_slot]
        nodes = pair_node[group_pair]
        start = np.searchsorted(slots, nodes, side="left")
        count = np.searchsorted(slots, nodes, side="right") - start
        first = np.cumsum(count) - count
        which = np.repeat(np.arange(group_pair.size), count)
        entry = by_slot[np.arange(which.size) - np.repeat(first - start, count)]
        rows, w = fit.rows[entry], fit.w[entry]
        codes = self.client.Xt[fit.pair_feat[group_pair][which], rows].astype(np.int64)
        size = np.diff(group_off)[which]
        ok = (codes >= 0) & (codes < size)
        g = np.full(codes.size, -1, dtype=np.int64)
        g[ok] = group_map[group_off[:-1][which[ok]] + codes[ok]]
        keep = (g >= 0) & (g < np.asarray(n_groups)[which])
        # Each group's sums in the entries' order (as adding them one by one).
        cell, rows, w = g_off[which[keep]] + g[keep], rows[keep], w[keep]
        n = out.shape[0]
        out[:, STAT_ROWS] = np.bincount(cell, minlength=n)
        out[:, STAT_WEIGHT] = np.bincount(cell, weights=w, minlength=n)
        # Multi-output y: every output's columns (class codes already offset per output).
        y = fit.y[rows] if fit.y.ndim == 2 else fit.y[rows, None]
        y_log = fit.y_log
        if y_log is not None:
            y_log = y_log[rows] if y_log.ndim == 2 else y_log[rows, None]
        for o in range(y.shape[1]):
            if fit.n_classes:
                flat = cell * s + 2 + y[:, o].astype(np.int64)
                out += np.bincount(flat, weights=w, minlength=n * s).reshape(n, s)
                continue
            a = STAT_TASK + 2 * o
            out[:, a] = np.bincount(cell, weights=w * y[:, o], minlength=n)
            # criterion="poisson": the second column sums w u log u (the kernels' y_log).
            second = w * y[:, o] * y[:, o] if y_log is None else w * y_log[:, o]
            out[:, a + 1] = np.bincount(cell, weights=second, minlength=n)
        return out

    # ------------------------------------------------------------------ out of bag
    def oob_weights(self, n: int, msg: Message) -> NDArray[np.float64] | None:
        """The rows' weights in the out-of-bag sums of ``y``: secret under "secure"."""
        return None if self.dp is not None else oob_weights(self.weights_secret(msg), n)

    def oob(self, msg: Message, sums: NDArray[np.float64], n_classes: int) -> Message:
        """Masked out-of-bag sums (regression in standardised units: R^2 is unchanged)."""
        bits = oob_frac_bits(sums.size, classification=bool(n_classes))
        if self.dp is not None:
            c = float(self.dp["clip"])
            k = (sums.size - 1) // 3  # per output: squared error, sum z, sum z^2
            bounds = [1.0, 1.0] if n_classes else [1.0] + [4 * c * c, c, c * c] * k
            sums = self.noisy(msg, sums, bounds, frac_bits=bits)
        return self._masked(msg, OOB, {"oob_sums": to_fixed(sums, bits)})


def target_grid() -> NDArray[np.float64]:
    """Fixed bin edges in asinh(y) of the targets' histogram under "dp" (160 bins)."""
    return np.linspace(-ASINH_CLIP, ASINH_CLIP, 161)


def increments(cum: NDArray[np.float64], off: NDArray[np.int64]) -> NDArray[np.float64]:
    """Cumulative statistics per segment (``off``) as per-entry increments."""
    out = np.array(cum, dtype=np.float64, copy=True)
    if out.shape[0] > 1:
        out[1:] -= cum[:-1]
    starts = off[:-1][np.diff(off) > 0]
    out[starts] = cum[starts]
    return out


def class_factor(class_weights: Any, client: str) -> float:
    """The most a row's multi-output class weight can be (1 without class weights).

    The product of each output's largest class weight.
    """
    if class_weights is None:
        return 1.0
    try:
        weights = [np.asarray(per_class, dtype=np.float64) for per_class in class_weights]
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"Client {client!r}: invalid class weights from the server: {class_weights!r}"
        ) from exc
    if any(w.ndim != 1 or not w.size or not np.all(np.isfinite(w) & (w >= 0)) for w in weights):
        raise ValueError(f"Client {client!r}: class weights must be finite and >= 0.")
    return float(np.prod([w.max() for w in weights]))


def _standard(value: Any) -> float | NDArray[np.float64]:
    """A standardisation constant: a float, or one per output (a list or an array)."""
    if np.ndim(value) == 0:
        return float(value)
    return np.asarray(value, dtype=np.float64)


def _check_dp(dp: Any, client: str, minimum: int = 0) -> dict[str, float]:
    """The noise parameters from the server, validated."""
    try:
        keys = ("sigma", "grid_sigma", "target_sigma", "clip", "max_weight")
        out = {k: float(dp[k]) for k in keys}
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"Client {client!r}: invalid dp parameters from the server: {dp!r}"
        ) from exc
    if not all(np.isfinite(v) and v > 0 for v in out.values()):
        raise ValueError(f"Client {client!r}: dp parameters must be positive, got {out}.")
    t = colluder_count(dp.get("colluders", 0), f"Client {client!r}: the server's dp colluders")
    out["colluders"] = t
    if t < minimum:
        raise ValueError(
            f"Client {client!r}: the server asks for noise that holds against {t} "
            f"colluding clients; this client asks for at least {minimum} "
            "(its min_dp_colluders)."
        )
    return out


def colluder_count(value: Any, what: str) -> int:
    """A count of colluding clients (``dp_colluders``): an int >= 0, else refused."""
    if not is_int_in(value, numpy=True):
        raise ValueError(f"{what} must be an int >= 0, got {value!r}.")
    return int(value)


def _check_offsets(off: NDArray[np.int64], name: str, client: str) -> None:
    if off.size and (off[0] != 0 or np.any(np.diff(off) < 0)):
        raise ValueError(f"Client {client!r}: {name} from the server is not non-decreasing from 0.")
