"""PyTorch's learning-rate schedulers (`sg.optim.lr_scheduler`): StepLR, MultiStepLR,
ExponentialLR, CosineAnnealingLR, LambdaLR, OneCycleLR and ReduceLROnPlateau.

    opt = sg.optim.SGD(model.parameters(), lr=0.1)
    sched = sg.optim.lr_scheduler.StepLR(opt, step_size=30, gamma=0.1)
    for epoch in range(100):
        train(...)          # opt.step() inside
        sched.step()

A scheduler writes each parameter group's "lr" (`opt.param_groups[i]["lr"]`), as PyTorch's:
the optimizer's step reads it as a runtime input, so a new learning rate compiles nothing.
The rules are PyTorch's, in its chainable form (each step scales the group's current "lr",
so an lr set by hand between steps is kept and scaled), with the same float arithmetic;
`step(epoch)` (deprecated in PyTorch) uses the closed form of `epoch`. A group's starting
rate is kept under "initial_lr", as PyTorch keeps it.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from typing import Any, Callable, Sequence

from ..base.errors import SrcgradError, user_location


class SchedulerError(SrcgradError, ValueError):
    """A scheduler's bad argument: a ValueError, as PyTorch's."""


def _fail(who: str, message: str) -> SchedulerError:
    return SchedulerError(f"sg.optim.lr_scheduler.{who}: {message}", loc=user_location())


def _groups(who: str, optimizer: Any) -> list[dict[str, Any]]:
    groups = getattr(optimizer, "param_groups", None)
    if not isinstance(groups, list) or not groups:
        raise _fail(who, f"expected an sg.optim optimizer with param_groups, got {optimizer!r}")
    return groups


class LRScheduler:
    """The base: `step()` advances `last_epoch` and writes `get_lr()` into the groups."""

    def __init__(self, optimizer: Any, last_epoch: int = -1):
        who = type(self).__name__
        self.optimizer = optimizer
        groups = _groups(who, optimizer)
        for i, group in enumerate(groups):
            if last_epoch == -1:
                group.setdefault("initial_lr", group["lr"])
            elif "initial_lr" not in group:
                raise _fail(who, f"param 'initial_lr' is not specified in param_groups[{i}]")
        self.base_lrs = [float(g["initial_lr"]) for g in groups]
        self.last_epoch = last_epoch
        self._last_lr: list[float] = [float(g["lr"]) for g in groups]
        self.step()

    def get_lr(self) -> list[float]:
        """The groups' rates at `last_epoch`, from their current ones (chainable form)."""
        raise NotImplementedError

    def closed_form(self) -> list[float]:
        """The groups' rates at `last_epoch` from the base rates alone."""
        return self.get_lr()

    def get_last_lr(self) -> list[float]:
        """The rates the last `step()` set, one per group."""
        return list(self._last_lr)

    def step(self, epoch: int | None = None) -> None:
        """Advance one epoch (or jump to `epoch`, by the closed form) and set the rates."""
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = int(epoch)
            values = self.closed_form()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [float(g["lr"]) for g in self.optimizer.param_groups]

    def _current(self) -> list[float]:
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """The scheduler's state (not the optimizer, nor functions such as LambdaLR's)."""
        return {
            k: v
            for k, v in vars(self).items()
            if k not in ("optimizer", "lr_lambdas") and k[0] != "_"
        } | {"_last_lr": list(self._last_lr)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        vars(self).update(state_dict)


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch) (`lr_lambda`: one function, or one per group)."""

    def __init__(self, optimizer: Any, lr_lambda: Any, last_epoch: int = -1):
        groups = _groups("LambdaLR", optimizer)
        if isinstance(lr_lambda, (list, tuple)):
            if len(lr_lambda) != len(groups):
                raise _fail("LambdaLR", f"expected {len(groups)} lr_lambdas, got {len(lr_lambda)}")
            self.lr_lambdas: list[Callable[[int], float]] = list(lr_lambda)
        else:
            self.lr_lambdas = [lr_lambda] * len(groups)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [base * fn(self.last_epoch) for fn, base in zip(self.lr_lambdas, self.base_lrs)]


class StepLR(LRScheduler):
    """lr times `gamma` every `step_size` epochs."""

    def __init__(self, optimizer: Any, step_size: int, gamma: float = 0.1, last_epoch: int = -1):
        self.step_size, self.gamma = int(step_size), gamma
        if self.step_size < 1:
            raise _fail("StepLR", f"step_size must be a positive int, got {step_size!r}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def closed_form(self) -> list[float]:
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr times `gamma` at each epoch in `milestones` (a repeated milestone: gamma^k)."""

    def __init__(
        self, optimizer: Any, milestones: Sequence[int], gamma: float = 0.1, last_epoch: int = -1
    ):
        self.milestones = Counter(int(m) for m in milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch not in self.milestones:
            return self._current()
        factor = self.gamma ** self.milestones[self.last_epoch]
        return [lr * factor for lr in self._current()]

    def closed_form(self) -> list[float]:
        passed = bisect.bisect_right(sorted(self.milestones.elements()), self.last_epoch)
        return [b * self.gamma**passed for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr times `gamma` every epoch."""

    def __init__(self, optimizer: Any, gamma: float, last_epoch: int = -1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return self._current()
        return [lr * self.gamma for lr in self._current()]

    def closed_form(self) -> list[float]:
        return [b * self.gamma**self.last_epoch for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """eta_min + (initial_lr - eta_min) (1 + cos(pi epoch / T_max)) / 2, by PyTorch's
    recursive form (continuing past T_max as a cosine of period 2 T_max)."""

    def __init__(self, optimizer: Any, T_max: int, eta_min: float = 0.0, last_epoch: int = -1):
        self.T_max, self.eta_min = T_max, eta_min
        if T_max <= 0:
            raise _fail("CosineAnnealingLR", f"T_max must be positive, got {T_max!r}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        if e == 0:
            return self._current()
        if (e - 1 - t) % (2 * t) == 0:
            return [
                lr + (b - lo) * (1 - math.cos(math.pi / t)) / 2
                for lr, b in zip(self._current(), self.base_lrs)
            ]
        ratio = (1 + math.cos(math.pi * e / t)) / (1 + math.cos(math.pi * (e - 1) / t))
        return [ratio * (lr - lo) + lo for lr in self._current()]

    def closed_form(self) -> list[float]:
        e, t, lo = self.last_epoch, self.T_max, self.eta_min
        return [lo + (b - lo) * (1 + math.cos(math.pi * e / t)) / 2 for b in self.base_lrs]


class OneCycleLR(LRScheduler):
    """The 1cycle policy: lr from max_lr / div_factor up to max_lr over `pct_start` of
    `total_steps` (or epochs * steps_per_epoch), then down to initial / final_div_factor
    (`three_phase`: back to the initial rate first), by cosine or linear annealing; momentum
    (SGD's "momentum", Adam's betas[0]) cycles inversely between max_momentum and
    base_momentum. `step()` once per batch."""

    def __init__(
        self,
        optimizer: Any,
        max_lr: float | Sequence[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | Sequence[float] = 0.85,
        max_momentum: float | Sequence[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ):
        groups = _groups("OneCycleLR", optimizer)
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise _fail("OneCycleLR", "give total_steps, or epochs and steps_per_epoch")
            total_steps = epochs * steps_per_epoch
        if total_steps <= 0:
            raise _fail("OneCycleLR", f"total_steps must be positive, got {total_steps!r}")
        if not 0 <= pct_start <= 1:
            raise _fail("OneCycleLR", f"pct_start must be in [0, 1], got {pct_start!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise _fail(
                "OneCycleLR", f"anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}"
            )
        self.total_steps = int(total_steps)
        self.anneal_strategy = anneal_strategy
        self.cycle_momentum = bool(cycle_momentum)
        end = float(pct_start * total_steps) - 1
        last = float(total_steps) - 1
        if three_phase:
            self.phases = [
                (end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (
                    float(2 * pct_start * total_steps) - 2,
                    "max_lr",
                    "initial_lr",
                    "base_momentum",
                    "max_momentum",
                ),
                (last, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self.phases = [
                (end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (last, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        max_lrs = _per_group("max_lr", max_lr, len(groups))
        if last_epoch == -1:
            for group, top in zip(groups, max_lrs):
                group["initial_lr"] = top / div_factor
                group["max_lr"] = top
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.use_beta1 = "betas" in groups[0]
        if self.cycle_momentum:
            if "momentum" not in groups[0] and not self.use_beta1:
                raise _fail(
                    "OneCycleLR",
                    "optimizer must support momentum or beta1 with `cycle_momentum` option enabled",
                )
            bases = _per_group("base_momentum", base_momentum, len(groups))
            tops = _per_group("max_momentum", max_momentum, len(groups))
            if last_epoch == -1:
                for group, lo, hi in zip(groups, bases, tops):
                    self._set_momentum(group, hi)
                    group["max_momentum"], group["base_momentum"] = hi, lo
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group: dict[str, Any], m: float) -> None:
        if self.use_beta1:
            group["betas"] = (m, *group["betas"][1:])
        else:
            group["momentum"] = m

    def _anneal(self, start: float, end: float, pct: float) -> float:
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise _fail(
                "OneCycleLR",
                f"tried to step {step} times; total_steps is {self.total_steps}",
            )
        out = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, (end, lr0, lr1, m0, m1) in enumerate(self.phases):
                if step <= end or i == len(self.phases) - 1:
                    pct = (step - start) / (end - start)
                    out.append(self._anneal(group[lr0], group[lr1], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[m0], group[m1], pct))
                    break
                start = end
        return out


def _per_group(name: str, value: Any, n: int) -> list[float]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise _fail("OneCycleLR", f"expected {n} values of {name}, got {len(value)}")
        return [float(v) for v in value]
    return [float(value)] * n


class ReduceLROnPlateau:
    """lr times `factor` when `step(metric)` has not improved for `patience` epochs (mode
    "min" or "max"; threshold_mode "rel" or "abs"), then `cooldown` epochs of rest; no group
    goes below its `min_lr`, nor changes by less than `eps`."""

    def __init__(
        self,
        optimizer: Any,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | Sequence[float] = 0.0,
        eps: float = 1e-8,
    ):
        groups = _groups("ReduceLROnPlateau", optimizer)
        if factor >= 1.0:
            raise _fail("ReduceLROnPlateau", f"factor should be < 1.0, got {factor}")
        if mode not in ("min", "max"):
            raise _fail("ReduceLROnPlateau", f"mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise _fail(
                "ReduceLROnPlateau",
                f"threshold_mode must be 'rel' or 'abs', got {threshold_mode!r}",
            )
        self.optimizer = optimizer
        self.min_lrs = _per_group("min_lr", min_lr, len(groups))
        self.mode, self.factor, self.patience = mode, factor, patience
        self.threshold, self.threshold_mode = threshold, threshold_mode
        self.cooldown, self.eps = cooldown, eps
        self.best = math.inf if mode == "min" else -math.inf
        self.num_bad_epochs = 0
        self.cooldown_counter = 0
        self.last_epoch = 0
        self._last_lr = [float(g["lr"]) for g in groups]

    def is_better(self, a: float, best: float) -> bool:
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < (best * (1.0 - self.threshold) if rel else best - self.threshold)
        return a > (best * (self.threshold + 1.0) if rel else best + self.threshold)

    def step(self, metrics: Any) -> None:
        """Record this epoch's metric (a number or a 0-d Tensor) and reduce if it is time."""
        current = float(metrics.item() if hasattr(metrics, "item") else metrics)
        self.last_epoch += 1
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            for group, floor in zip(self.optimizer.param_groups, self.min_lrs):
                old = float(group["lr"])
                new = max(old * self.factor, floor)
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [float(g["lr"]) for g in self.optimizer.param_groups]

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "optimizer"}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        vars(self).update(state_dict)


__all__ = [
    "SchedulerError",
    "LRScheduler",
    "LambdaLR",
    "StepLR",
    "MultiStepLR",
    "ExponentialLR",
    "CosineAnnealingLR",
    "OneCycleLR",
    "ReduceLROnPlateau",
]
