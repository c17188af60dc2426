import numpy as np
import pytest

from fedforest.datasets import SETTINGS, FederatedSplit, make_paper_synthetic, paper_f


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_shapes_and_client_ids(setting):
    data = make_paper_synthetic(setting, n_clients=4, n_per_client=50, n_features=7, random_state=0)
    assert isinstance(data, FederatedSplit)
    assert data.X_train.shape == (4 * 35, 7)
    assert data.X_test.shape == (4 * 15, 7)
    assert data.y_train.shape == data.h_train.shape == (4 * 35,)
    assert data.y_test.shape == data.h_test.shape == (4 * 15,)
    assert data.X_train.dtype == np.float64 and data.h_train.dtype == np.int64
    assert data.setting == setting and data.n_clients == 4
    assert data.params == dict(SETTINGS[setting])


def test_test_set_is_stratified_by_client():
    data = make_paper_synthetic(n_clients=10, n_per_client=200, random_state=1)
    np.testing.assert_array_equal(np.bincount(data.h_test), np.full(10, 60))
    np.testing.assert_array_equal(np.bincount(data.h_train), np.full(10, 140))


def test_same_seed_same_data_other_seed_other_data():
    a = make_paper_synthetic("both-shifts", n_clients=3, n_per_client=30, random_state=7)
    b = make_paper_synthetic("both-shifts", n_clients=3, n_per_client=30, random_state=7)
    c = make_paper_synthetic("both-shifts", n_clients=3, n_per_client=30, random_state=8)
    for name in ("X_train", "y_train", "h_train", "X_test", "y_test", "h_test"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.X_train, c.X_train)


def test_covariate_shift_client_means_and_variance():
    data = make_paper_synthetic("covariate-shift", n_clients=4, n_per_client=2000, random_state=0)
    for h in range(4):
        X = data.X_train[data.h_train == h]
        sign = (-1) ** (h + 1)  # client id h is the paper's k = h + 1
        np.testing.assert_allclose(X.mean(axis=0), sign * 3.0, atol=0.1)
        np.testing.assert_allclose(X.var(axis=0), 0.5, atol=0.08)


def test_outcome_shift_offsets():
    data = make_paper_synthetic("outcome-shift", n_clients=4, n_per_client=4000, random_state=0)
    residual = data.y_train - paper_f(data.X_train)
    for h in range(4):
        r = residual[data.h_train == h]
        np.testing.assert_allclose(r.mean(), (-1) ** (h + 1) * 1.5, atol=0.06)
        np.testing.assert_allclose(r.var(), 0.5, atol=0.06)


def test_homogeneous_has_no_shift():
    data = make_paper_synthetic("homogeneous", n_clients=2, n_per_client=4000, random_state=0)
    residual = data.y_train - paper_f(data.X_train)
    for h in range(2):
        rows = data.h_train == h
        np.testing.assert_allclose(data.X_train[rows].mean(axis=0), 0.0, atol=0.08)
        np.testing.assert_allclose(residual[rows].mean(), 0.0, atol=0.06)


def test_explicit_parameters_override_the_setting():
    data = make_paper_synthetic(
        "homogeneous", n_clients=2, n_per_client=2000, gamma=5.0, delta=2.0, random_state=0
    )
    assert data.params == {"gamma": 5.0, "alpha": 1.0, "delta": 2.0}
    np.testing.assert_allclose(data.X_train[data.h_train == 1].mean(), 5.0, atol=0.1)


def test_f_splits_at_x1_equal_zero():
    X = np.zeros((2, 20))
    X[0, 0], X[1, 0] = 0.0, 1e-9  # x_1 <= 0 goes left, as in scikit-learn
    np.testing.assert_array_equal(paper_f(X), [-1.5, 0.0])


def test_f_documented_leaves():
    rows = [
        # x_1,  x_2,  x_3,  x_4,  f
        (-1.0, -1.0, -4.0, 0.0, -0.5),
        (-1.0, -1.0, 0.0, 0.0, -1.5),
        (-1.0, 1.0, -4.0, 0.0, 0.0),
        (1.0, 0.0, 0.0, -1.0, 0.0),
        (1.0, 0.0, 0.0, 1.0, 1.5),
        (1.0, 0.0, 4.0, 1.0, 0.5),
    ]
    table = np.array(rows)
    X = np.hstack([table[:, :4], np.full((len(rows), 3), 9.0)])  # noise coordinates ignored
    np.testing.assert_array_equal(paper_f(X), table[:, 4])


@pytest.mark.parametrize("setting", ["homogeneous", "covariate-shift"])
def test_f_has_signal_in_both_regimes(setting):
    data = make_paper_synthetic(setting, n_clients=10, n_per_client=1000, random_state=0)
    f = paper_f(data.X_train)
    assert 1.0 <= f.var() <= 2.0
    assert abs(f.mean()) < 0.1


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"setting": "iid"}, "setting"),
        ({"alpha": 0.0}, "alpha"),
        ({"gamma": float("nan")}, "gamma"),
        ({"n_features": 3}, "n_features"),
        ({"n_clients": 0}, "n_clients"),
        ({"test_size": 1.0}, "test_size"),
        ({"n_per_client": 1}, "n_per_client"),
    ],
)
def test_invalid_parameters_name_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_paper_synthetic(**kwargs)


def test_paper_f_rejects_too_few_features():
    with pytest.raises(ValueError, match="n_features >= 4"):
        paper_f(np.zeros((3, 2)))
