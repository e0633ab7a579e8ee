"""Parameterisations, tasks and the IDX reader: values against the paper's table and the IDX spec."""

import dataclasses
import gzip
import os
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynlab
from dynlab import ffmodels
from dynlab.errors import ConfigError, DataError
from dynlab.idx import parse_idx, read_idx, write_idx


def test_presets_are_table_2_and_eq_15():
    p = ffmodels.PRESETS
    assert (p["mf"].a1, p["mf"].b1, p["mf"].a, p["mf"].b, p["mf"].c, p["mf"].d) == (0, 0, 0.5, 0, 0, 0.5)
    assert (p["mup"].a1, p["mup"].b1, p["mup"].a, p["mup"].b, p["mup"].c, p["mup"].d) == (-0.5, 1, 0, 1, 1, 0.5)
    assert (p["sp"].a, p["sp"].b, p["sp"].d, p["ntk"].a, p["ntk"].b, p["ntk"].d) == (0, 1, 0, 0.5, 0, 0)
    assert p["mf"].is_feature_learning() and p["mup"].is_feature_learning()
    assert not p["sp"].is_feature_learning() and not p["ntk"].is_feature_learning()


@pytest.mark.parametrize("param", ["mf", "sp", "mup"])
def test_initial_variances_and_residual_stream_eq_102(param):
    """W ~ N(0, N^-b) (Eq. 12); the last residual activation has mean square (1 + L^-2α)^(L-2) (Eq. 102)
    at every width (Desideratum 1) — for sp (α = 0) that is 2^(L-2), the depth blow-up α ≥ 1/2 avoids."""
    L = 6
    x = jax.random.normal(jax.random.key(5), (64, 200))
    for n in (128, 1024):
        m = ffmodels.FeedForward(200, 3, width=n, depth=L, param=param, key=jax.random.key(n))
        p = m.param
        assert float(jnp.var(m.w_hidden)) == pytest.approx(n ** (-p.b), rel=0.05)
        assert float(jnp.var(m.w_in)) == pytest.approx(n ** (-p.b1), rel=0.1)
        ms = float(jnp.mean(m.activations(x)[-1] ** 2))
        assert ms == pytest.approx((1 + L ** (-2 * p.alpha)) ** (L - 2), rel=0.2)


def test_learning_rates_follow_eq_14_and_a6():
    n, L = 256, 16
    m = ffmodels.FeedForward(10, 2, width=n, depth=L, param="mf", gamma0=2.0, key=jax.random.key(0))
    gd = ffmodels.learning_rates(m, "gd", 0.025)
    assert gd.w_in == gd.w_hidden == gd.w_out == pytest.approx(0.025 * 4.0 * n)  # η0 γ0² N (c = 0, d = 1/2)
    adam = ffmodels.learning_rates(m, "adam", 1e-3)
    assert adam.w_hidden == pytest.approx(1e-3 / np.sqrt(n) * L ** (0.5 - 1))  # × N^-1/2 L^(α-1)
    assert adam.w_in == pytest.approx(1e-3) and adam.w_out == pytest.approx(1e-3)
    mlp = ffmodels.FeedForward(10, 2, width=n, depth=L, param="mf", residual=False, key=jax.random.key(0))
    assert ffmodels.learning_rates(mlp, "adam", 1e-3).w_hidden == pytest.approx(1e-3 / np.sqrt(n))
    sp = ffmodels.FeedForward(10, 2, width=n, depth=L, param="sp", key=jax.random.key(0))
    assert ffmodels.learning_rates(sp, "adam", 1e-3).w_hidden == pytest.approx(1e-3)


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(param="xyz"), "unknown parameterisation 'xyz'; valid: sp, ntk, mf, mup"),
        (dict(alpha=1.5), "alpha must be a number in [0, 1]"),
        (dict(alpha=-1), "alpha must be a number in [0, 1]"),
        (dict(width=0), "width must be a positive integer, got 0"),
        (dict(depth=-3), "depth must be a positive integer, got -3"),
        (dict(depth=1), "depth must be at least 2"),
        (dict(activation="gelu"), "model.activation must be one of 'linear', 'tanh', 'relu', got 'gelu'"),
        (dict(gamma0=0.0), "gamma0 must be a positive finite number"),
    ],
)
def test_bad_model_config_is_a_config_error(kwargs, fragment):
    with pytest.raises(ConfigError) as e:
        dynlab.build("model", "mlp", input_size=4, output_size=1, key=jax.random.key(0), **kwargs)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_bad_rule_and_comparison_config():
    from dynlab.analyses.pc_bp import compare_pc_bp

    with pytest.raises(ConfigError, match="rule.inference must be one of 'discrete', 'ode', 'closed-form'"):
        dynlab.build("rule", "pc", loss="mse", inference="newton")
    with pytest.raises(ConfigError, match="beta must be a positive finite number"):
        dynlab.build("rule", "pc", loss="mse", beta=-1.0)
    toy = dynlab.build("task", "pc-toy")
    with pytest.raises(ConfigError, match="widths must be an integer >= 1, got 0"):
        compare_pc_bp(toy, [0], [2], 1)
    with pytest.raises(ConfigError, match="depths must be at least 2"):
        compare_pc_bp(toy, [4], [1], 1)


def test_toy_task_is_the_papers():
    t = dynlab.build("task", "pc-toy")
    x, y = t.fixed_batch()
    assert x.shape == (20, 40) and y.shape == (20, 1)
    assert (np.asarray(y[:10]) == 1).all() and (np.asarray(y[10:]) == -1).all()
    xb, yb, mask = t.batch(jax.random.key(3), 20)
    np.testing.assert_array_equal(np.asarray(xb[:, 0]), np.asarray(x))  # one fixed batch, whatever the key


def test_idx_round_trip_and_corruption(tmp_path):
    a = (np.arange(2 * 3 * 4) % 256).astype(np.uint8).reshape(2, 3, 4)
    write_idx(tmp_path / "a-idx3-ubyte.gz", a)
    raw = gzip.decompress((tmp_path / "a-idx3-ubyte.gz").read_bytes())
    assert raw[:4] == bytes([0, 0, 8, 3]) and int.from_bytes(raw[4:8], "big") == 2
    np.testing.assert_array_equal(read_idx(tmp_path / "a-idx3-ubyte.gz", ndim=3), a)
    f = np.linspace(-1, 1, 5).astype(np.float32)
    write_idx(tmp_path / "f.idx", f)
    np.testing.assert_array_equal(read_idx(tmp_path / "f.idx"), f)
    for bad, msg in ((b"\x01\x00\x08\x01" + raw[4:], "not an IDX file"), (raw[:-1], "truncated"),
                     (raw + b"\x00", "trailing bytes"), (raw[:6], "truncated IDX header")):
        with pytest.raises(DataError, match=msg):
            parse_idx(bad, name="x")
    with pytest.raises(DataError, match="rank 3, expected 1"):
        parse_idx(raw, name="x", ndim=1)
    (tmp_path / "broken.gz").write_bytes(b"not gzip")
    with pytest.raises(DataError, match="cannot read"):
        read_idx(tmp_path / "broken.gz")


def test_mnist_task_reads_idx_files_and_falls_back(tmp_path, monkeypatch):
    (tmp_path / "mnist").mkdir()
    rng = np.random.default_rng(0)
    imgs = rng.integers(0, 256, (300, 28, 28)).astype(np.uint8)
    labels = rng.integers(0, 10, 300).astype(np.uint8)
    write_idx(tmp_path / "mnist/t10k-images-idx3-ubyte.gz", imgs)
    write_idx(tmp_path / "mnist/t10k-labels-idx1-ubyte.gz", labels)
    t = dynlab.build("task", "pc-mnist", data_dir=str(tmp_path), source="file")
    x, y = t.fixed_batch()
    assert x.shape == (64, 784) and y.shape == (64, 10) and "t10k" in t.source
    # every image is one of the file's, standardised; targets are the matching one-hot labels
    flat = (imgs.reshape(300, -1).astype(np.float32) / 255 - 0.1307) / 0.3081
    idx = [int(np.argmin(np.abs(flat - row).sum(1))) for row in np.asarray(x[:5])]
    np.testing.assert_allclose(flat[idx], np.asarray(x[:5]), atol=1e-5)
    np.testing.assert_array_equal(np.argmax(np.asarray(y[:5]), 1), labels[idx])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match="missing data file"):
        dynlab.build("task", "pc-mnist", data_dir=str(empty), source="file")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = dynlab.build("task", "pc-mnist", data_dir=str(empty))
    assert t.source == "synthetic digits" and any("synthetic" in str(w.message) for w in caught)


def test_streamed_batches_are_batch_t_at_step_t():
    """``batches="stream"``: step t trains on rows tP .. tP + P - 1 of the pool (mod its size). Checked
    against Adam steps taken by hand on those batches: the BP loss recorded at steps 1 and 2 (step 2's
    batch wraps around the pool) and the cosine at step 0, which is the fixed-batch run's."""
    import equinox as eqx

    from dynlab.analyses.pc_bp import CompareConfig, make_model, run_cell
    from dynlab.rules.bp import bp_grads

    P, n = 4, 10
    x = jax.random.normal(jax.random.key(1), (n, 6))
    y = jax.random.normal(jax.random.key(2), (n, 2))
    cfg = CompareConfig(steps=3, batches="stream", batch_size=P, residual=False)
    model = make_model(cfg, 8, 3, 6, 2, seed=0)
    out = run_cell(model, x, y, cfg)
    fixed = run_cell(model, x[:P], y[:P], CompareConfig(steps=1, residual=False))
    np.testing.assert_allclose(out["cosine"][0], fixed["cosine"][0], rtol=1e-6)

    optimizer = ffmodels.optimizer(model, "adam", cfg.base_lr)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    state = optimizer.init(params)

    @jax.jit  # one compiled Adam step (op by op, every primitive compiled on its own)
    def step(params, state, rows):
        loss, grads = bp_grads(eqx.combine(params, static), x[rows], y[rows])
        updates, state = optimizer.update(eqx.filter(grads, eqx.is_inexact_array), state, params)
        return loss, eqx.apply_updates(params, updates), state

    for t, rows in enumerate(([0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1])):
        loss, params, state = step(params, state, jnp.array(rows))
        np.testing.assert_allclose(out["loss_bp"][t], loss, rtol=1e-5)
    assert len(set(np.asarray(out["loss_bp"]).round(6).tolist())) == 3  # three different batches

    with pytest.raises(ConfigError, match="batches 'stream' applies to feed-forward models"):
        CompareConfig(model="rnn", batches="stream")
    with pytest.raises(ConfigError, match="unknown batches 'epochs'"):
        CompareConfig(batches="epochs")


def test_vanishing_gradients_are_counted_and_their_cosine_is_zero():
    """A batch the initial network fits exactly (y = f(x)) has zero residual, so both gradients are 0
    (BP: J^T r; closed-form PC: F* = r^T S^-1 r): the cosine takes the public code's value 0, the
    norms are recorded, and the dataset counts those steps."""
    from dynlab.analyses.pc_bp import CompareConfig, compare_pc_bp, make_model

    x = jax.random.normal(jax.random.key(0), (6, 5))
    y = make_model(CompareConfig(), 8, 3, 5, 2, seed=0)(x)
    ds = compare_pc_bp((x, y), [8], [3], [0], steps=2)
    assert float(ds.grad_norm_bp[0, 0, 0, 0]) < 1e-6 and float(ds.grad_norm_pc[0, 0, 0, 0]) < 1e-6
    assert float(ds.cosine[0, 0, 0, 0]) == 0.0 and ds.attrs["n_vanishing_gradients"] >= 1
    ds = compare_pc_bp((x, y + 1.0), [8], [3], [0], steps=2)
    assert ds.attrs["n_vanishing_gradients"] == 0 and float(ds.grad_norm_bp.min()) > 1e-3


def test_mnist_pool_starts_with_the_fixed_batch():
    t = dynlab.build("task", "pc-mnist", source="synthetic", batch=8)
    pool_x, pool_y = t.stream_pool()
    x, y = t.fixed_batch()
    assert pool_x.shape[0] == 31 * 8  # 32 synthetic batches, less the test batch
    np.testing.assert_array_equal(np.asarray(pool_x[:8]), np.asarray(x))
    np.testing.assert_array_equal(np.asarray(pool_y[:8]), np.asarray(y))
    x_test, _ = t.fixed_batch("test")
    assert not (np.abs(np.asarray(pool_x)[:, None] - np.asarray(x_test)[None]).sum(-1) == 0).any()  # disjoint


@pytest.mark.skipif(not os.environ.get("DYNLAB_DATA"), reason="DYNLAB_DATA is not set (real MNIST files)")
def test_real_mnist_batch():
    t = dynlab.build("task", "pc-mnist", source="file")
    x, y = t.fixed_batch()
    assert x.shape == (64, 784) and float(jnp.abs(x.mean())) < 0.3 and 0.7 < float(x.std()) < 1.3
    assert set(np.argmax(np.asarray(y), 1).tolist()) == set(range(10))


def test_compare_takes_the_inference_as_a_value_or_its_spelling():
    """Item 5 of issue 18: the Python API passes inference values (as jpc/optax do); the CLI/TOML
    spelling becomes the same value in one place (CompareConfig.from_options), so both give the
    same dataset."""
    import optax

    from dynlab.analyses.pc_bp import CompareConfig, compare_pc_bp
    from dynlab.rules import pc_inference

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 5)).astype(np.float32), rng.normal(size=(8, 2)).astype(np.float32)
    value = pc_inference.Descent(optax.sgd(0.2), pc_inference.Criterion(max_steps=50, rtol=1e-3, ftol=None))
    a = compare_pc_bp((x, y), [4], [3], 1, steps=2, inference=value)
    b = compare_pc_bp((x, y), [4], [3], 1, steps=2, energy="inference", inference="discrete", beta=0.2,
                      inference_steps=50, rtol=1e-3)
    assert a.attrs["energy"] == b.attrs["energy"] == "inference"
    for name in ("cosine_unconverged", "energy", "inference_steps", "loss_pc", "loss_bp"):
        np.testing.assert_array_equal(a[name].values, b[name].values)
    assert CompareConfig.from_options().closed_form  # the default stays the closed form
    with pytest.raises(ConfigError, match="inference must be a value"):
        CompareConfig(inference="lbfgs")


def test_the_inference_settings_are_one_value_however_spelled():
    """Issue 34 (D1): the comparison's inference settings are one value, InferenceSettings, whose
    defaults live in it alone; its keys as keywords of their own (the spelling before it, in
    Python and on the command line), as a table, as key=value text, a method's name beside
    them, and the value itself give the same settings, and the same config of both comparisons."""
    from dynlab.analyses.pc_bp import CompareConfig, InferenceSettings, compare_pc_bp, compare_pc_bptt
    from dynlab.cli.analyze import signature_options
    from dynlab.rules import pc_inference

    keys = dict(energy="inference", inference="lbfgs", patience=10, inference_steps=40, smoothing=[1e-2, 1e-3])
    value = InferenceSettings(**keys)
    text = {"energy": "inference", "inference": "lbfgs", "patience": "10", "inference_steps": "40", "smoothing": "1e-2,1e-3"}
    spellings = [dict(inference=value), keys, dict(inference=keys),
                 dict(inference="lbfgs", **{k: v for k, v in keys.items() if k != "inference"})]
    for fn in (compare_pc_bp, compare_pc_bptt):
        options = signature_options(fn.__name__, fn, exclude=("task", "progress"))
        assert options.parse(text)["inference"] == value  # --energy inference --inference lbfgs ...
        assert options.parse({"inference": ",".join(f"{k}={v}" for k, v in text.items() if k != "smoothing")}
                             )["inference"] == dataclasses.replace(value, smoothing=None)
        assert {"energy", "patience", "smoothing", "smoothing_x64", "inference_steps", "activity_optimizer", "beta",
                "rtol", "atol", "ftol"} <= set(options.options)  # each key an option of its own
    described = {CompareConfig.from_options(**s).describe()["inference"] for s in spellings}
    assert len(described) == 1 and "LBFGS" in described.pop()
    assert InferenceSettings.parse("lbfgs") == InferenceSettings(inference="lbfgs")  # a method alone: closed form still
    assert CompareConfig.from_options(inference="lbfgs").closed_form
    assert CompareConfig.from_options(inference=pc_inference.ClosedForm()).closed_form
    assert InferenceSettings.parse(pc_inference.lbfgs(pc_inference.Criterion())).energy == "inference"  # a value says it all
    assert InferenceSettings.parse({"beta": 0.1}, default=InferenceSettings(beta=0.5, rtol=1e-3)) == \
        InferenceSettings(beta=0.1, rtol=1e-3)  # a table keeps the default's other keys


def _lbfgs():
    from dynlab.rules import pc_inference

    return pc_inference.lbfgs(pc_inference.Criterion())


def _settings(**keys):
    from dynlab.analyses.pc_bp import InferenceSettings

    return InferenceSettings(**keys)


@pytest.mark.parametrize(
    "options, fragments",
    [
        (lambda: dict(inference={"inference_steps": 5}, inference_steps=5), ["inference_steps is also given in", "give it once"]),
        (lambda: dict(inference=_settings(), beta=0.1), ["beta is also given in"]),
        (lambda: dict(inference={"steps": 5}), ["unknown inference setting(s) steps", "valid: energy, inference, patience"]),
        (lambda: dict(energy="closed-form", inference=_lbfgs()), ["energy 'closed-form' contradicts the inference value",
                                                                   "(energy 'inference'); leave energy out"]),
        (lambda: dict(energy="inference", inference="newton"), ["unknown inference 'newton'; valid: discrete, ode"]),
        (lambda: dict(inference_steps=0), ["inference_steps must be a positive integer"]),
    ],
)
def test_bad_inference_settings_are_one_line(options, fragments):
    """Each spelling of the inference settings is checked where it becomes their value: one line
    naming the comparison, what is wrong and what is valid, before any work."""
    from dynlab.analyses.pc_bp import compare_pc_bp

    with pytest.raises(ConfigError) as e:
        compare_pc_bp("toy", [4], [2], 1, steps=1, **options())
    message = str(e.value)
    assert message.startswith("compare_pc_bp.") and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
