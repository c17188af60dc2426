import numpy as np
import pandas as pd
import pytest

from fedforest.datasets import (
    FED_HEART_CENTERS,
    PANEL_DATASETS,
    SETTINGS,
    SHIFT_BENCHMARKS,
    FederatedSplit,
    add_feature_outliers,
    fed_heart_disease_split,
    load_fed_heart_disease,
    load_fragmentation_dataset,
    load_panel_dataset,
    make_paper_synthetic,
    make_shift_benchmark,
    paper_f,
    partition_by_column,
    partition_dirichlet,
    partition_iid,
    partition_sorted,
    split_within_clients,
)


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


# ---------------------------------------------------------------- Appendix F variants


@pytest.mark.parametrize("kind", sorted(SHIFT_BENCHMARKS))
def test_shift_benchmark_uses_its_variance_and_the_shift(kind):
    data = make_shift_benchmark(kind, 2.0, n_clients=2, n_per_client=3000, random_state=0)
    alpha = SHIFT_BENCHMARKS[kind].alpha
    assert data.params == {"gamma": 2.0, "alpha": alpha, "delta": 0.0}
    X1 = data.X_train[data.h_train == 1]
    np.testing.assert_allclose(X1[:, 0].mean(), 2.0, atol=0.05)
    np.testing.assert_allclose(X1[:, 0].var(), alpha, rtol=0.08)
    np.testing.assert_allclose(X1[:, 1:].mean(axis=0), 0.0, atol=0.08)  # only x_1 shifted
    np.testing.assert_allclose(X1[:, 1:].var(axis=0).mean(), 1.0, rtol=0.05)


def test_n_shifted_none_keeps_the_section_5_draw():
    a = make_paper_synthetic("covariate-shift", n_clients=2, n_per_client=20, random_state=3)
    b = make_paper_synthetic(
        "covariate-shift", n_clients=2, n_per_client=20, random_state=3, n_shifted=None
    )
    np.testing.assert_array_equal(a.X_train, b.X_train)
    with pytest.raises(ValueError, match="n_shifted"):
        make_paper_synthetic(n_shifted=0)


def test_shift_benchmark_rejects_unknown_kind():
    with pytest.raises(ValueError, match="'kind'"):
        make_shift_benchmark("gap", 1.0)


def test_outliers_scale_a_fraction_of_training_rows_only():
    clean = make_paper_synthetic(n_clients=4, n_per_client=50, random_state=0)
    dirty = add_feature_outliers(clean, 0.1, random_state=1)
    scaled = np.all(np.isclose(dirty.X_train, clean.X_train * 1000.0), axis=1)
    same = np.all(dirty.X_train == clean.X_train, axis=1)
    assert scaled.sum() == round(0.1 * clean.X_train.shape[0]) and (scaled | same).all()
    np.testing.assert_array_equal(dirty.X_test, clean.X_test)
    np.testing.assert_array_equal(dirty.y_train, clean.y_train)
    assert add_feature_outliers(clean, 0.0).X_train is not clean.X_train
    with pytest.raises(ValueError, match="fraction"):
        add_feature_outliers(clean, 1.5)


# ---------------------------------------------------------------- FedHeart
def test_fed_heart_disease_has_flamby_counts_and_columns():
    frame = load_fed_heart_disease()
    assert frame.shape == (740, 15)
    counts = frame["center"].value_counts().to_dict()
    assert counts == {"Cleveland": 303, "Hungary": 261, "Switzerland": 46, "VA Long Beach": 130}
    assert list(pd.unique(frame["center"])) == list(FED_HEART_CENTERS)
    covariates = frame.drop(columns=["target", "center"])
    assert covariates.shape[1] == 13 and not covariates.isna().any().any()
    assert set(frame["target"]) == {0, 1}
    assert {"cp_2", "cp_3", "cp_4", "restecg_1", "restecg_2"} <= set(covariates.columns)
    # one-hot with the first level dropped: at most one dummy of a group is set
    assert covariates[["cp_2", "cp_3", "cp_4"]].sum(axis=1).max() == 1


def test_vendored_table_fixes_the_first_hungarian_record():
    from importlib import resources

    with resources.files("fedforest.datasets.data").joinpath("heart_disease_uci.csv").open() as f:
        raw = pd.read_csv(f)
    assert len(raw) == 920
    assert raw.loc[raw["id"] == 304, "dataset"].item() == "Hungary"
    assert (raw["dataset"] == "Cleveland").sum() == 303


def test_fed_heart_split_is_flambys_66_34_per_center():
    frame = load_fed_heart_disease()
    is_test = fed_heart_disease_split(frame)
    assert (~is_test).sum() == 486  # FLamby's training size
    train = frame[~is_test]["center"].value_counts().to_dict()
    assert train == {"Cleveland": 199, "Hungary": 172, "Switzerland": 30, "VA Long Beach": 85}
    np.testing.assert_array_equal(is_test, fed_heart_disease_split(frame, random_state=43))
    assert not np.array_equal(is_test, fed_heart_disease_split(frame, random_state=44))


# ---------------------------------------------------------------- panel
def test_panel_has_at_least_ten_offline_datasets():
    assert len(PANEL_DATASETS) >= 10
    for name in PANEL_DATASETS:
        data = load_panel_dataset(name)
        assert data.X.dtype == np.float64 and np.isfinite(data.X).all(), name
        assert data.X.shape == (len(data.y), len(data.feature_names)), name
        assert data.task in ("regression", "classification") and data.source, name
        if data.task == "classification":
            assert data.n_classes >= 2 and data.y.dtype == np.int64, name


def test_fragmentation_stand_in_is_small_numeric_binary():
    data = load_fragmentation_dataset()
    assert data.X.shape == (1319, 8) and data.n_classes == 2
    with pytest.raises(ValueError, match="Unknown panel dataset"):
        load_panel_dataset("banknote")


# ---------------------------------------------------------------- partitioners
def test_partition_iid_sizes_and_seed():
    ids = partition_iid(103, 10, random_state=0)
    assert ids.dtype == np.int64 and sorted(np.unique(ids)) == list(range(10))
    assert set(np.bincount(ids)) == {10, 11}
    np.testing.assert_array_equal(ids, partition_iid(103, 10, random_state=0))
    with pytest.raises(ValueError, match="n_clients"):
        partition_iid(5, 6)


def test_partition_by_column_and_sorted():
    np.testing.assert_array_equal(partition_by_column(["b", "a", "b", "c"]), [1, 0, 1, 2])
    for site in ([1.0, np.nan, 2.0], ["a", None, "b"], pd.Series(["a", pd.NA], dtype="string")):
        with pytest.raises(ValueError, match="missing label at row 1"):  # NaN: a client
            partition_by_column(site)
    with pytest.raises(ValueError, match="one sortable type"):
        partition_by_column(np.array(["a", 1], dtype=object))
    x = np.array([5.0, 1.0, 4.0, 2.0, 3.0, 0.0])
    ids = partition_sorted(x, 3)
    np.testing.assert_array_equal(ids, [2, 0, 2, 1, 1, 0])
    for k in range(2):  # blocks are contiguous in x
        assert x[ids == k].max() < x[ids == k + 1].min()


def test_partition_dirichlet_skews_labels_and_covers_every_client():
    y = np.repeat([0, 1, 2], 300)
    ids = partition_dirichlet(y, 6, alpha=0.1, random_state=0)
    assert sorted(np.unique(ids)) == list(range(6))
    shares = np.array([np.bincount(y[ids == k], minlength=3) / (ids == k).sum() for k in range(6)])
    assert shares.max(axis=1).mean() > 0.7  # most clients dominated by one class
    with pytest.raises(ValueError, match="alpha"):
        partition_dirichlet(y, 3, alpha=0.0)


def test_split_within_clients_holds_out_every_client():
    ids = np.repeat(np.arange(4), 10)
    y = np.tile([0, 1], 20)
    is_test = split_within_clients(ids, 0.3, stratify=y, random_state=0)
    np.testing.assert_array_equal(np.bincount(ids[is_test]), [3, 3, 3, 3])
    single = split_within_clients(np.array([0, 1, 1]), 0.3, random_state=0)
    assert not single[0]  # a one-row client keeps its row for training
