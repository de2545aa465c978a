"""ScreenedStream: bad rows raise a BadInputError naming batch and row, or are skipped and counted.

The boosters here learn through the screen directly (the Lightning path is in
tests/lightning/test_bad_input.py).
"""

from __future__ import annotations

import copy
import math
import pickle
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import Tensor

from torchboost import SGB, Booster, TwoLayerNet
from torchboost.data import (
    REASONS,
    BadInputError,
    DataStream,
    ResumableScreenedStream,
    ScreenedStream,
)
from torchboost.losses import SquaredLoss

D = 3  # features per row
B = 8  # rows per batch
K = 3  # classes of the softmax problems
NAN, INF = math.nan, math.inf


def make_booster(loss: str) -> Booster:
    torch.manual_seed(0)
    n_outputs = K if loss == "softmax" else 1
    return SGB(partial(TwoLayerNet, D, 4, n_outputs), loss, n_learners=2, n_outputs=n_outputs,
               optimizer_kwargs={"lr": 0.05})


def clean_batch(loss: str, seed: int) -> tuple[Tensor, Tensor]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(B, D, generator=generator)
    if loss == "softmax":
        return x, torch.randint(0, K, (B,), generator=generator)
    if loss == "logistic":
        return x, torch.randint(0, 2, (B,), generator=generator).float()
    return x, torch.randn(B, generator=generator)


def with_row(batch: tuple[Tensor, Tensor], row: int, features: Any = None,
             label: Any = None) -> tuple[Tensor, Tensor]:
    """A copy of a tensor batch with row ``row``'s features and/or label replaced."""
    x, y = batch[0].clone(), batch[1].clone()
    if features is not None:
        x[row] = torch.as_tensor(features)
    if label is not None:
        y[row] = label
    return x, y


def as_rows(batch: tuple[Tensor, Tensor], row: int, features: list[float]) -> tuple[list, list]:
    """The batch as Python lists of rows and labels (a text source), row ``row`` replaced."""
    rows, labels = batch[0].tolist(), batch[1].tolist()
    rows[row] = features
    return rows, labels


def _empty(batch: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
    return batch[0][:0], batch[1][:0]


# name: (loss, bad batch from a clean one, bad row, reason, words in the message, bad rows)
BAD_BATCHES: dict[str, tuple[str, Callable[[tuple[Tensor, Tensor]], Any], int | None, str, str,
                             int]] = {
    "nan_row": ("squared", lambda b: with_row(b, 3, features=[0.0, NAN, 1.0]), 3,
                "features_not_finite", "NaN or inf", 1),
    "inf_row": ("squared", lambda b: with_row(b, 6, features=[INF, 0.0, 1.0]), 6,
                "features_not_finite", "NaN or inf", 1),
    "wrong_width": ("squared", lambda b: (torch.zeros(B, D + 1), b[1]), 0, "features_shape",
                    f"rows have shape ({D + 1},), expected ({D},)", B),
    "ragged_row": ("squared", lambda b: as_rows(b, 5, [1.0, 2.0]), 5, "features_shape",
                   f"the row has shape (2,), expected ({D},)", 1),
    "unreadable_row": ("squared", lambda b: as_rows(b, 2, ["1.0", "x", "2"]), 2,
                       "features_shape", "cannot be read as numbers", 1),
    "nan_label": ("squared", lambda b: with_row(b, 4, label=NAN), 4, "label_not_finite",
                  "labels contain NaN or inf", 1),
    "softmax_label_out_of_range": ("softmax", lambda b: with_row(b, 1, label=K), 1,
                                   "label_invalid", f"class labels must lie in [0, {K})", 1),
    "softmax_negative_label": ("softmax", lambda b: with_row(b, 7, label=-1), 7,
                               "label_invalid", f"class labels must lie in [0, {K})", 1),
    "softmax_non_integer_label": ("softmax", lambda b: (b[0], [*b[1].tolist()[:2], 1.5,
                                                              *b[1].tolist()[3:]]), 2,
                                  "label_invalid", "integer dtype", 1),
    "logistic_label_out_of_range": ("logistic", lambda b: with_row(b, 0, label=2.0), 0,
                                    "label_invalid", "binary labels must be in", 1),
    "label_count": ("squared", lambda b: (b[0], b[1][:-1]), 0, "label_count",
                    f"{B - 1} labels for {B} rows", B),
    "empty_batch": ("squared", _empty, None, "empty_batch", "empty batch", 0),
}


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
def test_screening_raise_names_batch_row_and_reason_and_leaves_booster_unchanged(case):
    loss, corrupt, row, reason, words, n_bad = BAD_BATCHES[case]
    batches = [clean_batch(loss, seed) for seed in range(4)]
    stream = [*batches[:2], corrupt(batches[2]), batches[3]]

    booster = make_booster(loss)
    with pytest.raises(BadInputError) as caught:
        for x, y in ScreenedStream(stream, booster):
            booster.learn(x, y)
    error = caught.value
    assert isinstance(error, ValueError)
    assert (error.batch, error.row, error.reason) == (2, row, reason)
    assert error.stream_row == (None if row is None else 2 * B + row)
    assert len(error.bad_rows) == n_bad
    assert words in error.detail
    where = "batch 2" if row is None else f"batch 2, row {row} (stream row {2 * B + row})"
    assert str(error).startswith(f"{where}: ")

    reference = make_booster(loss)  # learned the two clean batches before the bad one only
    for x, y in batches[:2]:
        reference.learn(x, y)
    assert booster.rounds == reference.rounds == 2
    for key, value in reference.state_dict().items():
        if torch.is_tensor(value):
            assert torch.equal(value, booster.state_dict()[key]), key


def test_screening_raise_lists_every_bad_row_of_the_batch():
    x, y = clean_batch("squared", 0)
    x[[1, 4, 5]] = NAN
    with pytest.raises(BadInputError, match=r"row 1 .*3 bad rows in this batch: \[1, 4, 5\]") as e:
        list(ScreenedStream([(x, y)], loss="squared"))
    restored = pickle.loads(pickle.dumps(e.value))  # e.g. across processes
    assert str(restored) == str(e.value) and restored.bad_rows == [1, 4, 5]


@pytest.mark.parametrize("case", sorted(BAD_BATCHES))
def test_screening_skip_hands_on_the_clean_rows_and_counts_them(case):
    loss, corrupt, row, reason, _, n_bad = BAD_BATCHES[case]
    batches = [clean_batch(loss, seed) for seed in range(3)]
    stream = ScreenedStream([batches[0], corrupt(batches[1]), batches[2]], policy="skip",
                            loss=loss, n_outputs=K if loss == "softmax" else 1)
    out = list(stream)

    n_rows_bad = 0 if reason == "empty_batch" else B
    clean_rows = [i for i in range(n_rows_bad) if i != row] if n_bad == 1 else []
    expected = [batches[0], *([(batches[1][0][clean_rows], batches[1][1][clean_rows])]
                              if clean_rows else []), batches[2]]
    assert len(out) == len(expected)
    for (x, y), (ex, ey) in zip(out, expected, strict=True):
        assert torch.equal(x, ex) and x.dtype == ex.dtype
        assert torch.equal(y, ey) and y.dtype == ey.dtype
    assert stream.batches_seen == 3 and stream.rows_seen == 2 * B + n_rows_bad
    skipped = {r: 0 for r in REASONS}
    if reason != "empty_batch":
        skipped[reason] = n_bad
    assert stream.skipped == skipped and stream.skipped_rows == n_bad
    assert stream.empty_batches == (reason == "empty_batch")
    assert stream.dropped_batches == (not clean_rows)


def test_screening_skip_rows_that_are_valid_alone_but_not_together():
    # each label alone is a valid binary label; together they mix {0, 1} and {-1, +1}
    x = torch.randn(4, D)
    stream = ScreenedStream([(x, torch.tensor([0.0, 1.0, -1.0, 1.0]))], loss="logistic",
                            policy="skip")
    assert list(stream) == []
    assert stream.skipped["label_invalid"] == 4 and stream.dropped_batches == 1
    with pytest.raises(BadInputError, match="mix the"):
        list(ScreenedStream([(x, torch.tensor([0.0, 1.0, -1.0, 1.0]))], loss="logistic"))


def test_screening_ragged_labels_are_checked_row_by_row():
    x = torch.randn(3, D)
    stream = ScreenedStream([(x, [1.0, [2.0, 3.0], "a"])], loss="squared", policy="skip")
    (xs, ys), = list(stream)
    assert torch.equal(xs, x[:1]) and ys.tolist() == [1.0]
    assert stream.skipped["label_invalid"] == 2


class CountingSquaredLoss(SquaredLoss):
    """Squared loss counting its label checks."""

    calls = 0

    def encode_target(self, target: Tensor, n_outputs: int) -> Tensor:
        self.calls += 1
        return super().encode_target(target, n_outputs)


def test_screening_clean_path_checks_once_and_hands_on_the_same_tensors():
    loss = CountingSquaredLoss()
    batches = [clean_batch("squared", seed) for seed in range(5)]
    out = list(ScreenedStream(batches, loss=loss))
    assert all(x is bx and y is by for (x, y), (bx, by) in zip(out, batches, strict=True))
    assert loss.calls == 5  # one label check per batch
    x, y = clean_batch("squared", 9)
    x[2, 0] = NAN
    list(ScreenedStream([(x, y)], loss=loss, policy="skip"))
    assert loss.calls == 6  # features were bad, labels still one whole-batch check


def test_screening_finite_rows_whose_sum_overflows_are_clean():
    x, y = torch.full((4, D), 3e38), torch.zeros(4)
    assert not torch.isfinite(x.sum())
    stream = ScreenedStream([(x, y)], loss="squared", policy="skip")
    (xs, _), = stream
    assert xs is x and stream.skipped_rows == 0


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_screening_skip_equals_the_clean_rows(data):
    """Any mix of bad rows, in tensor or list batches: the clean rows, in order, and the counts."""
    kinds = ("ok", "nan", "inf", "short", "long", "label_nan", "label_out")
    n_batches = data.draw(st.integers(1, 4))
    batches, expected_x, expected_y, skipped = [], [], [], dict.fromkeys(REASONS, 0)
    for k in range(n_batches):
        x, y = clean_batch("softmax", k)
        rows = data.draw(st.lists(st.sampled_from(kinds), min_size=B, max_size=B))
        as_list = data.draw(st.booleans()) or any(r in ("short", "long") for r in rows)
        x_rows: list[Any] = x.tolist()
        y_rows: list[Any] = y.tolist()
        for i, kind in enumerate(rows):
            if kind == "ok":
                expected_x.append(x[i])
                expected_y.append(y[i])
                continue
            if kind in ("nan", "inf"):
                x_rows[i][1] = NAN if kind == "nan" else -INF
                skipped["features_not_finite"] += 1
            elif kind in ("short", "long"):
                x_rows[i] = x_rows[i][:-1] if kind == "short" else [*x_rows[i], 0.0]
                skipped["features_shape"] += 1
            else:
                y_rows[i] = NAN if kind == "label_nan" else K + i
                skipped["label_not_finite" if kind == "label_nan" else "label_invalid"] += 1
        batches.append((x_rows, y_rows) if as_list else (torch.tensor(x_rows), y_rows))
    stream = ScreenedStream(batches, loss="softmax", n_outputs=K, policy="skip",
                            input_shape=(D,))
    out = list(stream)
    xs = torch.cat([x for x, _ in out]) if out else torch.zeros(0, D)
    ys = torch.cat([y for _, y in out]) if out else torch.zeros(0, dtype=torch.long)
    assert torch.equal(xs, torch.stack(expected_x) if expected_x else torch.zeros(0, D))
    assert ys.dtype == torch.long
    assert ys.tolist() == [int(v) for v in expected_y]
    assert stream.skipped == skipped and stream.rows_seen == n_batches * B


def test_screening_feature_shape_comes_from_input_shape_booster_or_first_batch():
    good, short = [[1.0, 2.0, 3.0]] * 2, [[1.0, 2.0]]
    with pytest.raises(ValueError, match="cannot tell the feature shape"):
        list(ScreenedStream([(good + short, [0.0] * 3)], loss="squared", policy="skip"))
    explicit = ScreenedStream([(short + good, [0.0] * 3)], loss="squared", policy="skip",
                              input_shape=(D,))
    assert [x.shape for x, _ in explicit] == [(2, D)]
    booster = make_booster("squared")
    booster.learn(*clean_batch("squared", 0))
    (x, _), = ScreenedStream([(short + good, [0.0] * 3)], booster, policy="skip")
    assert x.shape == (2, D)
    # the first batch fixes the shape: a later wider tensor batch is all bad
    inferred = ScreenedStream([(torch.zeros(2, D), torch.zeros(2)),
                               (torch.zeros(2, D + 1), torch.zeros(2))], loss="squared",
                              policy="skip")
    assert len(list(inferred)) == 1 and inferred.skipped["features_shape"] == 2
    with pytest.raises(ValueError, match="trained on"):
        ScreenedStream([], booster, input_shape=(D + 1,))


def test_screening_integer_feature_tensors_are_bad_rows():
    stream = ScreenedStream([(torch.ones(4, D, dtype=torch.long), torch.zeros(4))],
                            loss="squared", policy="skip")
    assert list(stream) == [] and stream.skipped["features_dtype"] == 4


def test_screening_rejects_bad_configuration_and_non_pairs():
    with pytest.raises(ValueError, match="policy must be"):
        ScreenedStream([], loss="squared", policy="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exactly one of booster"):
        ScreenedStream([])
    with pytest.raises(ValueError, match="exactly one of booster"):
        ScreenedStream([], make_booster("squared"), loss="squared")
    with pytest.raises(ValueError, match="batch 0 is not an"):
        list(ScreenedStream([torch.zeros(3)], loss="squared"))


def _stream(x: Tensor, y: Tensor) -> DataStream:
    return DataStream(x, y, batch_size=B, shuffle=False, standardize=None)


def test_screening_keeps_length_and_resumes_a_stateful_stream_exactly():
    x, y = torch.randn(10 * B, D), torch.randn(10 * B)
    x[[3, 17, 40]] = NAN
    y[[17, 60]] = INF
    x[4 * B : 5 * B] = NAN  # a whole batch of bad rows: dropped

    whole = ScreenedStream(_stream(x, y), loss="squared", policy="skip")
    assert isinstance(whole, ResumableScreenedStream) and len(whole) == 10
    reference = list(whole)
    assert len(reference) == 9 and whole.dropped_batches == 1
    assert whole.skipped_rows == 3 + 1 + B and whole.skipped["label_not_finite"] == 1

    first = ScreenedStream(_stream(x, y), loss="squared", policy="skip")
    iterator = iter(first)
    head = [next(iterator) for _ in range(4)]  # batches 0-3 handed on; 4 not yet read
    state = first.state_dict()
    head.append(next(iterator))  # reads the dropped batch 4, hands on batch 5
    assert first.state_dict()["stream"]["batches_consumed"] == 6
    resumed = ScreenedStream(_stream(x, y), loss="squared", policy="skip")
    resumed.load_state_dict(state)
    tail = list(resumed)
    assert len(head) + len(tail) == 10  # batch 5 comes twice: once in head, once in tail
    for (a, b), (c, d) in zip(reference, head[:4] + tail, strict=True):
        assert torch.equal(a, c) and torch.equal(b, d)
    assert resumed.counts() == whole.counts()
    assert resumed.input_shape == (D,)

    wrong = ScreenedStream(_stream(x, y), loss="squared", input_shape=(D + 1,))
    with pytest.raises(ValueError, match="screened for rows of shape"):
        wrong.load_state_dict(state)


def test_screening_of_a_stream_that_cannot_resume_has_no_state():
    generator = (clean_batch("squared", seed) for seed in range(2))
    screened = ScreenedStream(generator, loss="squared")
    assert type(screened) is ScreenedStream
    assert not hasattr(screened, "state_dict") and not hasattr(screened, "load_state_dict")
    with pytest.raises(TypeError):
        len(screened)
    assert len(ScreenedStream([clean_batch("squared", 0)] * 3, loss="squared")) == 3


def test_screening_streams_copy_with_their_counts():
    x, y = clean_batch("squared", 0)
    x[0] = NAN
    screened = ScreenedStream(_stream(x, y), loss="squared", policy="skip")
    list(screened)
    copied = copy.deepcopy(screened)
    assert type(copied) is ResumableScreenedStream and copied.counts() == screened.counts()


def test_screening_shards_split_the_clean_rows_of_the_global_batch_on_every_rank():
    """Each rank screens the whole global batch: the ranks agree on every count and decision and
    their parts, in rank order, are the clean rows a single process gets."""
    x, y = torch.randn(3 * B, D), torch.randn(3 * B)
    x[1:B, 0] = NAN  # batch 0: one clean row, too few for 2 ranks
    y[B + 2] = INF  # batch 1: 7 clean rows, split 4 + 3
    whole = list(ScreenedStream(_stream(x, y), loss="squared", policy="skip"))
    shards = [ScreenedStream(_stream(x, y), loss="squared", policy="skip") for _ in range(2)]
    for rank, shard in enumerate(shards):
        shard.shard(rank, 2)
    parts = [list(shard) for shard in shards]
    assert [[len(y_part) for _, y_part in part] for part in parts] == [[4, 4], [3, 4]]
    for (xa, ya), (xb, yb), (xw, yw) in zip(*parts, whole[1:], strict=True):
        assert torch.equal(torch.cat([xa, xb]), xw) and torch.equal(torch.cat([ya, yb]), yw)
    for shard in shards:  # global counts: B - 1 NaN rows and one inf label; batch 0's clean
        assert shard.rows_seen == 3 * B and shard.skipped_rows == B  # row is in no reason
        assert shard.dropped_batches == 1 and shard.stream.batches_consumed == 3
    raising = ScreenedStream(_stream(x, y), loss="squared")
    raising.shard(1, 2)
    with pytest.raises(BadInputError, match=r"batch 0, row 1 \(stream row 1\)"):
        next(iter(raising))  # as on rank 0: every rank raises at the same row
    with pytest.raises(ValueError, match=r"rank must lie in \[0, 2\)"):
        shards[0].shard(2, 2)
