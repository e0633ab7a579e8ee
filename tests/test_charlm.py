"""Character-level LM and stateful truncated BPTT: windows tile the text, the trainer carries the
state across steps, unbroken evaluation equals one run over the whole text, bpc, resume, bad input.

Truths used: the raw bytes of the corpus (read here with plain Python), one uninterrupted
``model(xs)`` over a whole stream (what a carried state must reproduce window by window), a
cross-entropy computed in float64 NumPy, and $\\log_2 V$ for a uniform predictor.
"""

import shutil

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from cli_runner import invoke
from dynlab import experiment, store
from dynlab.errors import ConfigError, DataError
from dynlab.train import _initial_carry, _run_chunk, train, train_seeds, stream_metrics

WINDOW, BATCH = 8, 2


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    text = "".join(rng.choice(list("abcde fgh\n"), 1200)).encode()
    (root / "tiny.txt").write_bytes(text)
    (root / "short.txt").write_bytes(b"too short for a window")
    return root, text


def config(root, steps=4, **task):
    return {"seed": 0, "model": {"unit": "gru", "hidden": 6},
            "task": {"name": "charlm", "corpus": "tiny.txt", "window": WINDOW, "data_dir": str(root), **task},
            "train": {"steps": steps, "batch_size": BATCH, "lr": 1e-2, "log_every": 2, "eval_every": 2,
                      "checkpoint_every": 2}}


@pytest.fixture(scope="module")
def exp(corpus):
    return experiment.build(config(corpus[0], reset_from=0.0, reset_to=0.0))


def ids(text: bytes) -> np.ndarray:
    vocab = sorted(set(text))
    return np.array([vocab.index(b) for b in text])


def test_vocabulary_splits_and_windows_tile_each_stream(exp, corpus):
    _, text = corpus
    task, tokens = exp.task, ids(text)
    assert task.vocab == tuple(sorted(set(text))) and task.input_size == task.output_size == 10
    assert task.bounds == ((0, 1080), (1080, 60), (1140, 60))  # contiguous 90 / 5 / 5 %
    L = 1080 // BATCH
    W = task.windows(BATCH)
    assert W == -(-(L - 1) // WINDOW)
    xs, ys, ms = zip(*(task.window(k, BATCH) for k in range(W)))
    x, y, m = (np.concatenate([np.asarray(a) for a in arrs], axis=1) for arrs in (xs, ys, ms))
    np.testing.assert_array_equal(x.max(-1), 3.0)  # one-hot x input_scale
    for b in range(BATCH):
        stream = tokens[b * L:(b + 1) * L]
        np.testing.assert_array_equal(x[b, : L - 1].argmax(-1), stream[:-1])
        np.testing.assert_array_equal(y[b, m[b] > 0], stream[1:])  # every next byte scored exactly once
    assert m.sum() == BATCH * (L - 1)
    np.testing.assert_array_equal(np.asarray(task.window(W, BATCH)[0]), xs[0])  # step W starts a new pass


def test_bpc_metric_and_uniform_predictor(exp, corpus):
    _, text = corpus
    model = eqx.tree_at(lambda m: (m.readout.weight, m.readout.bias), exp.model,
                        replace_fn=lambda a: jnp.zeros_like(a))  # logits 0: uniform over the vocabulary
    res = stream_metrics(model, exp.rule, exp.task)
    assert float(res["bpc"]) == pytest.approx(np.log2(10), rel=1e-6)
    assert float(res["loss"]) == pytest.approx(np.log(10), rel=1e-6)
    p = np.bincount(ids(text)[:1080], minlength=10) / 1080
    assert exp.task.chance == pytest.approx(-(p[p > 0] * np.log2(p[p > 0])).sum())


def test_unbroken_evaluation_equals_one_run_over_the_whole_split(exp, corpus):
    _, text = corpus
    test = ids(text)[1140:]
    xs = jax.nn.one_hot(test[:-1], 10) * 3.0
    logits = np.asarray(exp.model(xs), np.float64)  # one uninterrupted run over 59 steps
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    bpc = -logp[np.arange(len(test) - 1), test[1:]].mean() / np.log(2)
    assert exp.task.windows(1, "test") == 8  # 7 full windows of 8 and a partial one: the state crosses 7 boundaries
    assert float(stream_metrics(exp.model, exp.rule, exp.task)["bpc"]) == pytest.approx(bpc, rel=1e-5)


def test_trainer_carries_each_streams_state_from_window_to_window(exp, corpus):
    _, text = corpus
    task, model = exp.task, exp.model
    params, static = eqx.partition(model, eqx.is_inexact_array)
    frozen = optax.set_to_zero()  # parameters stay exactly the same, so the truth is one run per stream
    state = (frozen.init(params), _initial_carry(model, task, BATCH))
    keys = jax.random.key(1), jax.random.key(2)
    n = 3
    _, (_, carried), metrics = _run_chunk(params, static, state, jnp.asarray(0), n, exp.rule, task, frozen, BATCH,
                                          *keys)
    L, tokens = 1080 // BATCH, ids(text)
    ce = []
    for b in range(BATCH):  # one unbroken run over each stream's first n windows
        stream = tokens[b * L: b * L + n * WINDOW + 1]
        ys, states = model.trajectory(jax.nn.one_hot(stream[:-1], 10) * 3.0)
        np.testing.assert_allclose(np.asarray(carried[0][b]), np.asarray(states[0][-1]), rtol=1e-5, atol=1e-6)
        ce.append(np.asarray(optax.softmax_cross_entropy_with_integer_labels(ys, stream[1:])))
    # each step's loss is that of its window within the unbroken runs
    np.testing.assert_allclose(np.asarray(metrics["loss"]), np.reshape(ce, (BATCH, n, WINDOW)).mean((0, 2)), rtol=1e-5)
    # step W begins a new pass: the streams restart from the initial state, whatever was carried in
    again = (state[0], carried)
    W = task.windows(BATCH)
    _, (_, carried_again), _ = _run_chunk(params, static, again, jnp.asarray(W), n, exp.rule, task, frozen, BATCH,
                                          *keys)
    np.testing.assert_array_equal(np.asarray(carried_again[0]), np.asarray(carried[0]))


def test_reset_schedule_decays_by_a_cosine_and_every_pass_starts_afresh(corpus):
    task = experiment.build(config(corpus[0], reset_steps=100)).task  # the paper's 1.0 -> 0.01, over 100 steps
    p = np.asarray(task.reset_probability(jnp.array([0, 25, 50, 100, 1000])))
    np.testing.assert_allclose(p, [1.0, 0.01 + 0.99 * (1 + np.cos(np.pi / 4)) / 2, 0.505, 0.01, 0.01], rtol=1e-6)
    W = task.windows(64)
    assert not np.asarray(task.resets(jax.random.key(0), 5 * W + 1, 64)).all()
    assert np.asarray(task.resets(jax.random.key(0), 5 * W, 64)).all()  # a new pass over the streams


def test_resume_is_bit_identical_and_vmapped_seeds_agree(corpus, tmp_path):
    root, _ = corpus
    whole_dir, part_dir = tmp_path / "whole", tmp_path / "part"
    whole_dir.mkdir()

    def copy_at_step_2(step, total, metrics):  # the run directory as a run killed after step 2 leaves it
        if step == 2:
            shutil.copytree(whole_dir, part_dir)

    whole = train(experiment.build(config(root)), whole_dir, progress=copy_at_step_2)
    train(experiment.build(config(root)), part_dir, resume=True)
    assert (tmp_path / "whole" / store.CHECKPOINT).read_bytes() == (tmp_path / "part" / store.CHECKPOINT).read_bytes()
    seeds = train_seeds([experiment.build({**config(root), "seed": s}) for s in (0, 1)])
    np.testing.assert_allclose(seeds[0].metrics.eval_bpc.values, whole.metrics.eval_bpc.values, rtol=1e-4)


def test_bad_corpus_and_rule_are_clear_errors(corpus, tmp_path):
    root, _ = corpus
    with pytest.raises(DataError, match="too short for windows of 8 steps"):
        experiment.build({**config(root), "task": {**config(root)["task"], "corpus": "short.txt"}})
    with pytest.raises(DataError, match="missing data file 'nope.txt'"):
        experiment.build({**config(root), "task": {**config(root)["task"], "corpus": "nope.txt"}})
    with pytest.raises(ConfigError, match="fewer than 9 bytes per stream"):
        exp = experiment.build(config(root))
        exp.task.window(0, 200)
    result = invoke(["train", "--task", "charlm", "--model", "gru", "--set", "task.corpus='short.txt'",
                     "--set", f"task.data_dir='{root}'"], tmp_path)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert [line for line in result.output.splitlines() if line.startswith("error:")][0].count("too short") == 1
