"""The estimators' docstrings, from one text: the regressor and the classifier share it.

:func:`estimator_doc` fills in where the two differ (criterion, ``max_features``, the
out-of-bag score, the fitted attributes of a classifier), so their parameter lists
cannot drift apart; ``tests/test_frictions.py`` checks that every parameter of
``get_params()`` is documented.
"""

from __future__ import annotations

from string import Template

__all__ = ["estimator_doc"]

_TEXT = Template(
    """$title

Split decisions equal those of centralized CART on the pooled rows at the same
candidate thresholds; clients share only weighted quantile sketches and additive
$statistics

Parameters
----------
n_estimators : int, default=50
$criterion
max_depth : int or None, default=8
    Each level costs two rounds (one under ``binning="global"``); None grows until the
    leaves are pure or too small.
min_samples_split, min_samples_leaf : int or float, default=2, 5
    A float is a fraction of the pooled training rows, as in scikit-learn:
    ``ceil(f * n)`` (at least 2 for ``min_samples_split``).
    Counted in distinct in-bag rows, as in scikit-learn.
min_impurity_decrease : float, default=0.0
min_weight_fraction_leaf : float, default=0.0
    As scikit-learn: each child of a split weighs at least this fraction of its tree's
    root (bootstrap counts times sample and class weights). Not with ``split_rule="avgimp"``.
ccp_alpha : non-negative float, default=0.0
    Minimal cost-complexity pruning, as scikit-learn: each grown tree's weakest branches
    become leaves while their effective alpha is at most ``ccp_alpha``. The server prunes
    from the impurities and weights the tree already holds; no message is added.
monotonic_cst : array-like of int of shape (n_features,), default=None
    As scikit-learn: per feature, 1 monotonic increase, 0 no constraint, -1 monotonic
    decrease of the prediction (a binary classifier's: the positive class's
    probability). The server refuses a split on a constrained feature whose children's
    values are out of order or out of the node's bounds, bounds the children by their
    middle value and clips every node's value, from the pooled statistics it already
    holds: no message is added, at every privacy level. Not for multi-output ``y``,
    multiclass classification, categorical features or ``split_rule="avgimp"``.
$max_features
    Features sampled per node on the server.
n_bins : int or None, default=32
    Quantile candidates per feature (B - 1 thresholds). ``None`` is the verification
    mode: clients send every distinct node value so the candidates are all midpoints
    and a tree equals scikit-learn's; it reveals the clients' values, use it only to
    verify the engine.
local_candidates : bool or None, default=None
    Under ``privacy="none"`` only: each client also proposes, per node and sampled
    feature, the threshold that is best on its own rows (one value, of the same kind as
    a sketch point); the server adds these proposals (at most ``n_bins - 1`` per pair)
    to the quantile candidates. No extra round; the split stays the pooled best among
    the candidates, which now include the points where the clients see the signal
    change. False is the paper's protocol; None means True under ``"none"`` and False
    under ``"secure"`` (where True is refused: a proposal is a data value).
binning : {"quantile", "global"}, default="quantile"
    "quantile" (the paper's): each node's candidates are quantiles of its own pooled
    rows, from the clients' node sketches, so a level takes two rounds (sketches, then
    left statistics). "global" (``privacy="none"`` only): per feature, ``n_bins - 1``
    quantiles of all pooled rows, fixed at the handshake from the clients' per-feature
    sketches, serve every node, so the candidates travel with Round A and a level takes
    one round (the Federated-Histogram shape); fewer rounds for coarser deep nodes (take
    a larger ``n_bins``, e.g. 128; docs/benchmarks-history.md measures the cost).
bootstrap : bool, default=True
    Client-stratified bootstrap, seeded on each client from
    (random_state, tree index, client name).
oob_score : bool or callable, default=False
    $oob A callable ``metric(y_true, y_pred)`` scores the out-of-bag predictions as in
    scikit-learn (``fit`` only: under ``fit_federated`` they stay on the clients).
random_state : int, RandomState or None, default=None
n_jobs : int or None, default=None
    Threads for the in-process clients and for prediction.
split_on_client : bool, default=False
    Also split on the client index H (the paper's Section 3.2): at every node the server
    groups the active clients by their node mean or class-1 share (Fisher) and scans the
    cuts, from the per-client summaries it already holds (no extra message). H is exempt
    from feature subsampling (``max_features`` counts the X columns; H joins every
    node); its importance is ``client_importance_``. Predict with
    ``client_ids=`` to route rows by client; rows of unknown clients (or
    ``client_ids=None``) follow the marginal rule: both branches, weighted by the
    training weight of each side.
categorical_features : array-like of column names or indices, or boolean mask, optional
    Categorical columns besides pandas ``category`` ones (a mask: one bool per column,
    as scikit-learn's ``HistGradientBoosting*``). Clients share each column's
    category list at the handshake and exact per-category statistics; the server finds
    the best subset split (Fisher ordering; exhaustive for multiclass with at most 10
    present categories). Unseen categories follow the marginal rule. No one-hot encoding.
    Used by ``fit``; under ``fit_federated`` each ``Client`` declares its own, and a
    column named here that the clients give as numbers warns after the fit.
categories : dict, "from_dtype" or None, default=None
    The levels of categorical columns, declared (public, as ``OneHotEncoder``'s
    ``categories``): ``{column name or index: [levels...]}`` (its columns are then
    categorical), or ``"from_dtype"``: every client's pandas ``CategoricalDtype``
    categories (equal at every client). A declared column's list travels in place of the
    levels the clients hold; its domain is those levels plus the missing category, and
    a value outside them counts as missing (a warning at its client). None: the levels
    come from the rows. Under ``"none"`` each client names the levels it holds; under
    ``"secure"`` only those it holds in ``min_aggregate_rows`` rows or more (a level one
    row holds would name that row's value), the rows of a level no client names counting
    as missing values (a warning at the client; with only frequent levels the forest is
    the one it was); under ``"dp"`` an undeclared categorical column is refused by
    ``fit_federated`` (``fit``, holding every row, declares the levels of its rows:
    outside the guarantee; docs/privacy.md, "Category levels and class labels"). A
    pandas dtype is not taken as a declaration unless asked: ``astype("category")``
    infers its categories from the rows.
split_rule : {"exact", "avgimp", "auto"}, default="exact"
    "exact": pooled additive statistics (Theorem 3.5, equals centralized CART at the
    candidates). "avgimp": clients return their local gains at the candidates and the
    server averages them weighted by node counts (cheaper, for iid clients; 2 scalars per
    candidate). "auto": runs :func:`fedforest.diagnose` first and picks AvgImp + Top-L
    only when neither covariate shift nor outcome heterogeneity is detected (and turns
    on ``split_on_client`` when outcome heterogeneity is) and the other settings take
    them (not with class weights, ``min_weight_fraction_leaf``, ``monotonic_cst``, Poisson,
    ``binning="global"`` or ``n_bins=None``); the exact rule for a multi-output regression
    y, which the diagnostics do not test. See ``split_rule_`` and ``diagnostics_`` (None
    then).
top_l : int or None, default=None
    Top-L shortlisting: each client reports its L best sampled features per node (local
    gains at its own sketch points); the server evaluates only their union.
client_fraction : float in (0, 1], default=1.0
    Fraction of clients sampled per tree on the server (seeded); the others give that
    tree zero weight. Only under ``privacy="none"``: a tree's sums would run over the
    sampled clients alone (one client's own statistics when one is sampled).
warm_start : bool, default=False
    Fit again with a larger ``n_estimators`` to add trees to the fitted forest: the new
    trees get the seeds they would have had in one fit (so the forest equals one grown
    at once with the same ``random_state``, an int), from the same clients. Not under
    ``privacy="dp"`` (each fit has its own budget).
max_leaf_nodes : None, default=None
    Accepted for scikit-learn's signature; any number is refused with the reason
    (best-first growth needs a federated round per split).
max_samples : int, float or None, default=None
    Size of each tree's bootstrap sample, as in scikit-learn: None draws as many rows as
    there are, a float in (0, 1] that fraction of them, an int that many in all. The
    bootstrap is stratified by client: client k draws ``round(f * n_k)`` of its rows
    (``f = max_samples / n`` for an int), at least one. Under ``privacy="secure"`` a
    tree's draws must number at least ``min_aggregate_rows`` in all (fewer: a root
    summed over too few rows).
tree_batch_size : int or None, default=None
    Grow the trees in batches of this many, one batch after another: each client then
    holds per-row state for one batch only (16 bytes per in-bag row and tree, about
    ``10 * n_k * tree_batch_size`` bytes) at the price of ``2 * max_depth`` rounds per
    batch (``max_depth`` under ``binning="global"``; one more under
    ``class_weight="balanced_subsample"`` with multi-output y or sample weights). None
    grows all trees at once (fewest rounds). The forest is the same.
privacy : {"secure", "dp", "none"}, default="secure"
    What the server may learn (docs/privacy.md). ``"secure"``: every client answer the
    server adds up is masked (pairwise X25519 keys, AES-256-CTR masks that cancel in the
    sum), so the server sees only sums over clients; no client sends a data value
    (candidates come from pooled histograms on grids the server places from pooled
    information); and no released sum covers fewer than ``min_aggregate_rows`` rows
    (so every leaf holds at least that many). Splits on the client index, Top-L,
    AvgImp, ``split_rule="auto"``, ``client_fraction < 1``, the verification mode and
    local candidates need per-client values and are refused. ``"none"``: the paper's
    protocol; per-client sketches (data values) and statistics reach the server, which
    can rebuild rows from them: for the paper's experiments and the verification mode
    only. ``"dp"``: ``"secure"`` plus Gaussian noise added inside the secure sum (each
    client adds its share), calibrated so that the whole fit is
    ``(epsilon, delta)``-differentially private for the replacement of one row
    (docs/privacy.md); needs ``epsilon``, a ``max_depth``, declared ``categories`` for
    categorical columns and a classifier's ``classes``; the fit's guarantee
    (``epsilon_guarantee``) and what its releases spent are in ``privacy_report_``.
min_aggregate_rows : int or None, default=None
    Under ``"secure"`` and ``"dp"``: the fewest rows any released sum covers. None
    means ``max(10, 2 * min_samples_leaf)``; a value below 10 warns (``UserWarning``:
    sums over that few rows tell much about each row).
epsilon, delta : float or None, default=None
    Under ``"dp"``: the privacy budget of the whole fit (every tree, level and round).
    ``delta`` None means ``min(1e-5, 0.1 / n_rows)``.
dp_colluders : int, default=0
    Under ``"dp"``: the colluding clients ``t`` the noise holds against. Each of the
    ``K`` clients adds a noise share of variance ``sigma^2 / (K - t)``, so that the
    ``K - t`` honest clients' shares alone carry the planned noise against the server
    and ``t`` clients who know their own shares (``K / (K - t)`` times the noise in all;
    ``t = 0``: the server alone). At most ``K - 1``; refused outside ``"dp"``.
verbose : int, default=0
    > 0 shows a progress bar over tree levels.
on_client_failure : {"raise", "drop"}, default="raise"
    A client that dies, times out or raises (anything but ``ValueError``, which means
    invalid data) stops training with a ``ClientFailure`` naming it and the round, and
    the estimator stays unfitted; ``"drop"`` goes on with the other clients from that
    round on and records the dropped client in ``dropped_clients_`` (under
    ``privacy="secure"`` a drop in the second grid round stops the fit, and one in the
    out-of-bag round leaves ``oob_score_`` NaN: docs/privacy.md, "Drops").$extra_params

Attributes
----------
trees_ : list of Tree
estimators_ : list of $tree_class
    The trees as fitted scikit-learn objects (numeric splits only; see
    :meth:`to_sklearn`). ``len(model)``, ``model[i]`` and ``iter(model)`` use them, as
    for scikit-learn's forests.
communication_ : CommunicationLedger
feature_importances_ : ndarray of shape (n_features,)
    Impurity-based importances of the X features, normalised together with the client
    index H over every split feature (with ``split_on_client`` they sum to
    ``1 - client_importance_``).
client_importance_ : float
    The client index H's share of the importances (0.0 when ``split_on_client=False``).
$oob_attributes
dropped_clients_ : list of (str, int)
    Clients dropped under ``on_client_failure="drop"`` and the round each failed in.
dropped_reasons_ : dict of str to str
    Each dropped client's reason: the type of its failure and the protocol step, e.g.
    ``"TimeoutError in round_a"`` (never the exception's text, which can quote data).
n_features_in_, feature_names_in_
"""
)

_REGRESSION = {
    "title": "Federated random forest regressor (the FedForest method).",
    "statistics": (
        "statistics ``(rows, weight, sum w*y, sum w*y^2)`` (the last two per output for\n"
        'multi-output y; under ``privacy="secure"`` of targets standardised per output).'
    ),
    "criterion": (
        'criterion : {"squared_error", "friedman_mse", "poisson"}, default="squared_error"\n'
        '    "friedman_mse" is deprecated and maps to "squared_error" (as in scikit-learn 1.9).\n'
        '    "poisson" (half Poisson deviance; y >= 0) sends (sum y, sum y log y) per node\n'
        '    and output (under privacy="secure" and "dp" of y / scale, masked).'
    ),
    "max_features": 'max_features : int, float, {"sqrt", "log2"} or None, default=1/3',
    "oob": "Out-of-bag R^2 computed on the clients (one extra round).",
    "tree_class": "DecisionTreeRegressor",
    "extra_params": "",
    "oob_attributes": (
        "oob_score_, oob_prediction_ : float, ndarray (when ``oob_score=True``;\n"
        "    ``oob_prediction_`` only in simulation mode, where the rows are in this process)"
    ),
}

_CLASSIFICATION = {
    "title": "Federated random forest classifier (the FedForest method).",
    "statistics": (
        "statistics (per-class weighted counts; one block per output for multi-output y,\n"
        'masked at every block under ``privacy="secure"``). ``predict_proba`` averages\n'
        "the trees' leaf class proportions, as scikit-learn does (a list of one array per\n"
        "output for multi-output y, whose ``predict`` is (n_samples, n_outputs))."
    ),
    "criterion": (
        'criterion : {"gini", "entropy", "log_loss"}, default="gini"\n'
        '    Impurity of the pooled class counts; "log_loss" is "entropy" (as in scikit-learn).'
    ),
    "max_features": ('max_features : int, float, {"sqrt", "log2"} or None, default="sqrt"'),
    "oob": "Out-of-bag accuracy computed on the clients (one extra round).",
    "tree_class": "DecisionTreeClassifier",
    "extra_params": (
        '\nclass_weight : dict, list, "balanced", "balanced_subsample" or None, default=None\n'
        '    As scikit-learn: class c\'s rows weigh ``class_weight[c]``; "balanced" uses\n'
        '    ``n / (n_classes * n_c)`` from the pooled class counts, "balanced_subsample"\n'
        "    ``n / (n_present * n_c)`` per tree from its bootstrap's draws (the classes\n"
        "    drawn; sample weights left out). Applied by the server to the pooled\n"
        '    statistics (no client sends more). Not with ``split_rule="avgimp"``.\n'
        '    Multi-output y: a list of one dict per output, "balanced" or\n'
        '    "balanced_subsample"; a row weighs the product of its outputs\' weights (the\n'
        '    clients apply them, sent in the set-up; "balanced_subsample": per tree, after\n'
        "    one more round per batch of trees that pools each tree's bootstrap class counts).\n"
        '    "balanced_subsample" with sample weights takes that round too (one output).\n'
        "classes : array-like or None, default=None\n"
        "    The class labels, declared (a list per output for multi-output y), as\n"
        "    scikit-learn's ``partial_fit(classes=...)``: ``classes_`` is them (sorted), and\n"
        '    the clients check their labels are among them and (outside ``privacy="none"``)\n'
        "    send none. None: the union of the labels the clients hold, which each client\n"
        '    names at the handshake; under ``privacy="dp"`` refused by ``fit_federated`` (one\n'
        "    row could add a label; ``fit`` declares the labels of its y, outside the\n"
        "    guarantee). A label of y outside ``classes`` is an error."
    ),
    "oob_attributes": (
        "classes_ : ndarray of shape (n_classes,), or a list of one per output\n"
        "n_classes_ : int, or a list of one per output (multi-output y)\n"
        "oob_score_, oob_decision_function_ : float, ndarray (when ``oob_score=True``;\n"
        "    ``oob_decision_function_`` only in simulation mode, where the rows are in this\n"
        "    process). Multi-output y: scikit-learn's subset accuracy (the share of rows\n"
        "    right on every output) and shape (n_samples, max n_classes, n_outputs)"
    ),
}


def estimator_doc(task: str) -> str:
    """The docstring of the estimator for ``task`` ("regression" or "classification")."""
    fields = _REGRESSION if task == "regression" else _CLASSIFICATION
    return _TEXT.substitute(fields)
