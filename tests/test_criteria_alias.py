"""scikit-learn's criterion aliases: "log_loss" is entropy, "friedman_mse" is squared_error."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.tree import DecisionTreeRegressor

import fedforest as ff
from tests._exact import EXACT_TREE


def test_friedman_mse_warns_as_scikit_learn_and_grows_squared_error_trees() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] - 2 * X[:, 1] + rng.normal(size=300)
    cid = np.repeat(np.arange(3), 100)
    base = ff.FedForestRegressor(**EXACT_TREE).fit(X, y, client_ids=cid)
    model = ff.FedForestRegressor(**EXACT_TREE, criterion="friedman_mse")
    with pytest.warns(FutureWarning, match='"friedman_mse"` for `criterion` is deprecated') as rec:
        model.fit(X, y, client_ids=cid)
    assert rec[0].filename == __file__  # points at the caller's line, as scikit-learn's
    np.testing.assert_array_equal(model.predict(X), base.predict(X))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        ref = DecisionTreeRegressor(
            criterion="friedman_mse", max_depth=8, min_samples_leaf=5, random_state=0
        ).fit(X, y)
    np.testing.assert_allclose(model.predict(X), ref.predict(X), rtol=1e-12, atol=1e-12)


# 20 rows under "secure": roots of about 13 distinct rows, which the rule does not split
# (the warning of fric27 says so; the constant X would not split either).
@pytest.mark.filterwarnings("ignore:every tree of this forest is a single leaf:UserWarning")
def test_poisson_passes_parameter_validation_at_the_default_privacy() -> None:
    # (Once refused under "secure"; tests/test_secure_targets.py tests it there.)
    X, y = np.ones((20, 2)), np.arange(20.0)
    model = ff.FedForestRegressor(criterion="poisson", n_estimators=2).fit(X, y)
    assert model.privacy == "secure"
    pred = model.predict(X)  # constant X: root leaves, bootstrap means of y (sd about 1)
    assert np.ptp(pred) == 0 and 5 < pred[0] < 14
    with pytest.raises(ValueError, match="criterion"):
        ff.FedForestRegressor(criterion="poissonn").fit(X, y)
