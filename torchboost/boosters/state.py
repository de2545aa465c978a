"""A booster's state and its loading (:class:`BoosterState`, a base of
:class:`~torchboost.boosters.base.Booster`): the configuration saved with the state and compared
on loading, all-or-nothing ``load_state_dict``, and the extra state (input shape, counters).
Nothing here runs during a round."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from torchboost.atomic_load import AtomicLoad, unfit_state
from torchboost.boosters.default_lr import DEFAULT_BETAS, RULE_BETAS_BEFORE
from torchboost.boosters.stall import StallMonitor
from torchboost.learners.optimizers import DEFAULT_OPTIMIZER
from torchboost.learners.schedules import describe_schedulers
from torchboost.protocol import counters, load_counters

__all__ = ["BoosterState"]


class BoosterState(AtomicLoad):
    """What :class:`~torchboost.boosters.base.Booster` saves and loads (module docstring); the
    load is all or nothing (:class:`~torchboost.atomic_load.AtomicLoad`)."""

    state_owner = "booster"

    # --- state ------------------------------------------------------------------------------------
    #: attributes that configure the algorithm, saved in the state and compared on loading
    #: (extended by the subclasses)
    config_keys: tuple[str, ...] = ("standardize",)
    #: plain attributes :meth:`_adopt_earlier_rule` may set from a saved state (each class lists
    #: its own; put back when the load fails)
    rule_attributes: tuple[str, ...] = ()

    def config(self) -> dict[str, Any]:
        """The booster's configuration, as saved in its ``state_dict``: class, loss (name and
        parameters), ``y0`` mode, learners (number, mode, optimizer class and defaults) and the
        algorithm's own hyper-parameters (:attr:`config_keys`, e.g. SGB's step, OGB's radius and
        bound). Loading a state saved with a different configuration raises ``ValueError``."""
        spec = self.learners.optimizer_spec
        defaults = self.learners.optimizers[0].defaults
        out: dict[str, Any] = {
            "booster": type(self).__name__,
            "loss": _describe(self.loss),
            "y0": self.y0_mode,
            "n_learners": self.n_learners,
            "outputs": self.out_dim,
            "mode": self.learners.mode,
            "optimizer": f"{spec.cls.__module__}.{spec.cls.__qualname__}",
            "optimizer_defaults": {k: _plain(v) for k, v in defaults.items()
                                   if k not in _RUNTIME_OPTIMIZER_FLAGS},
            "stall_window": None if self.stall is None else self.stall.window,
        }
        if self.learners.chained:  # absent where it changes nothing (older states have none)
            out["chained"] = True
        if self.learners.averaging_window is not None:  # the same
            out["averaging_window"] = self.learners.averaging_window
        if self.learners.lr_scaled:  # absent where it changes nothing (older states have none)
            out["lr_fan_in"] = spec.lr_fan_in
        if spec.output_scale != 1.0:  # only where it changes a rate (linear learners)
            out["lr_output_scale"] = spec.output_scale
        schedule = describe_schedulers(self.learners.schedulers)
        if schedule is not None:  # absent without one (states saved before schedules)
            out["lr_scheduler"] = schedule
        for cls in reversed(type(self).__mro__):
            for key in vars(cls).get("config_keys", ()):
                out[key] = _describe(getattr(self, key))
        return out

    def _other_shapes_reason(self) -> str:
        return "its tensors have other shapes, so its learners have another architecture"

    def _load_settings(self) -> tuple[Any, ...]:
        """What loading may adopt from a state (:meth:`_adopt_earlier_rule`, the learners'
        loop mode, the stall window, every class's :attr:`rule_attributes`): restored when the
        load fails."""
        names = [n for cls in type(self).__mro__ for n in vars(cls).get("rule_attributes", ())]
        return (self.learners.mode_settings(),
                None if self.stall is None else self.stall.window,
                self.learners.optimizer_spec, self.learners.optimizers[0].defaults.get("betas"),
                {name: getattr(self, name) for name in names})

    def _restore_load_settings(self, settings: tuple[Any, ...]) -> None:
        mode, window, spec, betas, attributes = settings
        self.learners.restore_mode(mode)
        if self.stall is not None:
            self.stall.window = window
        if self.learners.optimizers[0].defaults.get("betas") != betas:
            self.learners.adopt_betas(betas)
        self.learners.optimizer_spec = spec
        for name, value in attributes.items():
            setattr(self, name, value)

    def _check_saved_config(self, saved: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` for a saved configuration that no booster of this class can
        resume, however it is built (default: none; the comparison with this booster's own
        configuration follows)."""

    def _adopt_earlier_rule(self, saved: Mapping[str, Any]) -> None:
        """Resume a state as it was saved where it holds an earlier default rule's value of a
        setting this booster took from today's rule: the default optimizer's betas
        (:data:`~torchboost.boosters.default_lr.RULE_BETAS_BEFORE` before
        :data:`~torchboost.boosters.default_lr.DEFAULT_BETAS`). Whatever else differs is
        refused by the configuration check that follows (and the adoption undone)."""
        saved_betas = (saved.get("optimizer_defaults") or {}).get("betas")
        if (self.learners.optimizer_spec.cls is DEFAULT_OPTIMIZER and saved_betas is not None
                and tuple(saved_betas) == RULE_BETAS_BEFORE
                and self.learners.optimizers[0].defaults.get("betas") == DEFAULT_BETAS):
            self.learners.adopt_betas(RULE_BETAS_BEFORE)

    def _check_loaded(self) -> None:
        """Loaded running statistics must fit the loaded input shape and outputs (they are sized
        by the first batch, so torch's own shape check cannot see a mismatch); subclasses check
        their own values too (a stage beyond the last learner, non-finite vote weights)."""
        if self.standardizer is None:
            return
        width = self.input_shape[0] if self.input_shape else None
        sizes = [("features", self.standardizer.features, width)]
        if self.standardizer.labels is not None:
            sizes.append(("labels", self.standardizer.labels, self.out_dim))
        for what, moments, size in sizes:
            columns = moments.mean.numel()
            tracked = moments.off_01.numel() if moments.off_01 is not None else columns
            if columns and (columns != size or moments.sq_dev.numel() != columns
                            or tracked != columns):
                raise unfit_state("booster", f"its {what} statistics have {columns} columns "
                                             f"(and {moments.sq_dev.numel()} squared "
                                             f"deviations) for {size} {what} columns")

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any,
                              **kwargs: Any) -> None:
        extra = state_dict.get(prefix + "_extra_state")
        saved = extra.get("config") if isinstance(extra, dict) else None
        if isinstance(saved, dict) and "standardize" not in saved:
            # saved before the option existed: trained on the data as given
            saved = {**saved, "standardize": False}
            state_dict[prefix + "_extra_state"] = {**extra, "config": saved}
        if saved is not None:  # states saved before configurations were recorded have none
            self._check_saved_config(saved)
            # what resumes as saved: an auto-stacked container that fell back to the loop, the
            # stall monitor's window (a monitoring setting, not the model), an earlier default
            # rule; adopted only once nothing else differs, so that a refused state (also when
            # a parent module's load_state_dict calls this directly) changes nothing
            mode = self.learners.adoptable_mode(saved.get("mode", self.learners.mode))
            # a monitored booster takes the saved window; one saved without a monitor
            # (stall_window=None; ResidualSGB had none before) gets a fresh monitor (below)
            window = ({"stall_window": saved["stall_window"]}
                      if self.stall is not None and "stall_window" in saved else {})

            def adopted() -> dict[str, Any]:  # this configuration with mode and window adopted
                return {**self.config(), "mode": mode, **window}

            rule = self._load_settings()
            self._adopt_earlier_rule(saved)
            differences = _differences(saved, adopted())
            if differences:
                self._restore_load_settings(rule)
                differences = _differences(saved, adopted())
                raise ValueError("the state was saved by a booster configured differently (nothing "
                                 "was loaded); build the booster with the saved configuration. "
                                 "Differences: " + "; ".join(differences))
            self.learners.adopt_mode(mode)
            if window.get("stall_window") is not None:
                self.stall.window = int(window["stall_window"])
        features = prefix + "standardizer.features."
        if (isinstance(extra, dict) and "indicators" not in extra
                and features + "mean" in state_dict and features + "off_01" not in state_dict):
            # saved before indicator columns were tracked: every feature was standardised
            state_dict[features + "off_01"] = torch.ones_like(state_dict[features + "mean"])
        if isinstance(extra, dict) and "label_range" not in extra:
            # saved before the label range was kept: none (its predictions stay unbounded)
            for name in ("label_low", "label_high"):
                state_dict.setdefault(prefix + name, torch.zeros_like(getattr(self, name)))
        stall = prefix + "stall."
        if self.stall is not None and not any(key.startswith(stall) for key in state_dict):
            # saved without a monitor: it starts afresh (its sums are not the model's)
            fresh = StallMonitor(self.loss, self.n_learners, self.out_dim, self.stall.window,
                                 self.stall.tolerance, self.stall.metric)
            state_dict.update({stall + key: value.to(self.stall.partial_loss.device)
                               if torch.is_tensor(value) else value
                               for key, value in fresh.state_dict().items()})
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def get_extra_state(self) -> dict[str, Any]:
        # "indicators": the features' statistics track 0/1 columns (states saved before lack it)
        # "label_range": whether the label range covers every label (states saved before lack it)
        return {"input_shape": self.input_shape, "config": self.config(), "indicators": True,
                "label_range": self.label_range_kept, **counters(self)}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        shape = state["input_shape"]
        self.input_shape = tuple(shape) if shape is not None else None
        self.label_range_kept = bool(state.get("label_range", False))
        load_counters(self, state)


#: optimizer defaults that choose an implementation, not the arithmetic
_RUNTIME_OPTIMIZER_FLAGS = ("foreach", "fused", "capturable", "differentiable")


def _plain(value: Any) -> Any:
    """A comparable, picklable copy of a hyper-parameter (tensors become numbers or lists)."""
    if torch.is_tensor(value):
        return value.tolist()
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    return value


def adopt_unrecorded(state_dict: dict[str, Any], prefix: str, key: str, value: Any) -> None:
    """For a state saved before its configuration recorded ``key``: record this booster's
    ``value`` in it (the saved one cannot be checked), in place, before the check."""
    extra = state_dict.get(prefix + "_extra_state")
    config = extra.get("config") if isinstance(extra, dict) else None
    if isinstance(config, dict) and key not in config:
        state_dict[prefix + "_extra_state"] = {**extra, "config": {**config, key: value}}


def _differences(saved: Mapping[str, Any], mine: Mapping[str, Any]) -> list[str]:
    """Every setting in which two configurations differ, described for an error message."""
    return [f"{key}: saved {saved.get(key, '(none)')!r}, this booster {mine.get(key, '(none)')!r}"
            for key in sorted(set(saved) | set(mine), key=str) if saved.get(key) != mine.get(key)]


def _describe(value: Any) -> Any:
    """A hyper-parameter for :meth:`Booster.config`: plain values as they are, objects (a loss,
    a surrogate, potentials) as their class name and plain attributes."""
    if value is None or isinstance(value, bool | int | float | str | tuple | list):
        return _plain(value)
    if torch.is_tensor(value):
        return _plain(value)
    attributes = {k: _plain(v) for k, v in sorted(vars(value).items())
                  if not k.startswith("_") and k != "training" and (v is None or isinstance(
                      v, bool | int | float | str | tuple))}
    return {"class": type(value).__name__, **attributes}
