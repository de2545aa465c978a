"""StreamingBoosterModule: a Lightning pass is exactly a plain loop of ``booster.learn``."""

from __future__ import annotations

import warnings

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from torchboost.lightning import BoostingRound, StreamingBoosterModule


@pytest.mark.parametrize("kind", ["sgb", "ogb_logistic"])
def test_lightning_pass_equals_plain_loop(kind, regression, classification, make_booster,
                                          make_stream, trainer_kwargs):
    data = regression if kind == "sgb" else classification
    plain = make_booster(kind)
    predictions = [(plain.learn(x, y), y) for x, y in make_stream(data)]

    booster = make_booster(kind)
    module = StreamingBoosterModule(booster)
    stream = make_stream(data)
    trainer = pl.Trainer(**trainer_kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(module, train_dataloaders=stream)

    assert not [w for w in caught if "no optimizer" in str(w.message)]
    x_test = stream.transform(data.x_test)
    assert torch.equal(booster.predict(x_test), plain.predict(x_test))
    for k in range(1, booster.n_learners + 1):
        assert torch.equal(booster.predict(x_test, k), plain.predict(x_test, k))
    assert trainer.global_step == booster.rounds == len(stream) == 40
    assert booster.compute_units == plain.compute_units == 2000 * 3 * booster.n_learners

    # progressive validation: the running means are those of the pre-update predictions
    losses = torch.cat([plain.loss.value(p, plain.loss.encode_target(y, 1)) for p, y in
                        predictions])
    means = module.progressive_scores()
    assert means["loss"] == pytest.approx(float(losses.mean()), rel=1e-6)
    if kind == "ogb_logistic":
        wrong = torch.cat([(p[:, 0] > 0).long() != y for p, y in predictions])
        assert means["error"] == pytest.approx(float(wrong.double().mean()), rel=1e-9)
    else:
        assert set(means) == {"loss"}
    assert {"progressive/loss", "compute_units"} <= set(trainer.progress_bar_metrics)
    assert trainer.callback_metrics["compute_units"] == booster.compute_units


def test_lightning_validation_step_logs_held_out_scores(classification, make_booster,
                                                       make_stream, trainer_kwargs):
    booster = make_booster("sgb_logistic")
    module = StreamingBoosterModule(booster)
    stream = make_stream(classification)
    x_test, y_test = stream.transform(classification.x_test), classification.y_test
    held_out = DataLoader(TensorDataset(x_test, y_test), batch_size=128)
    trainer = pl.Trainer(**trainer_kwargs)
    trainer.fit(module, train_dataloaders=stream, val_dataloaders=held_out)
    (scores,) = trainer.validate(module, held_out, verbose=False)
    expected = booster.evaluate(x_test, y_test)
    assert scores["val/loss"] == pytest.approx(expected["loss"], rel=1e-5)
    assert scores["val/error"] == pytest.approx(expected["error"], abs=1e-6)
    assert torch.equal(module(x_test), booster.predict(x_test))


def test_lightning_module_needs_a_booster():
    with pytest.raises(TypeError, match="Booster"):
        StreamingBoosterModule(torch.nn.Linear(2, 1))  # type: ignore[arg-type]


def test_lightning_boosting_round_runs_its_closure_only():
    layer = torch.nn.Linear(2, 1)
    before = [p.detach().clone() for p in layer.parameters()]
    round_ = BoostingRound(layer.parameters())
    assert round_.step(lambda: 7) == 7
    assert all(torch.equal(a, b) for a, b in zip(before, layer.parameters(), strict=True))
    assert round_.state_dict()["state"] == {}
    with pytest.raises(ValueError, match="closure"):
        round_.step()


@pytest.mark.parametrize(("n_threads", "inside"), [("auto", 1), (None, 2), (3, 3)])
def test_lightning_fit_chooses_its_threads_and_restores_them(n_threads, inside, regression,
                                                              make_booster, make_stream,
                                                              trainer_kwargs, monkeypatch):
    """``n_threads="auto"``: the papers' small learners learn on one CPU thread; ``None``
    leaves torch's setting; an int is used as given; the fit's end restores torch's count."""
    booster = make_booster("sgb")
    seen = []
    learn = booster.learn
    monkeypatch.setattr(booster, "learn", lambda x, y: (seen.append(torch.get_num_threads()),
                                                        learn(x, y))[1])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        module = StreamingBoosterModule(booster, n_threads=n_threads)
        pl.Trainer(**trainer_kwargs).fit(module, train_dataloaders=make_stream(regression))
        assert set(seen) == {inside} and len(seen) == 40
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match="n_threads must be"):
        module = StreamingBoosterModule(make_booster("sgb"), n_threads="many")
        pl.Trainer(**trainer_kwargs).fit(module, train_dataloaders=make_stream(regression))
