"""`sg.optim`: optimizers that update attached Tensors in place from their `.grad`.

PyTorch's way, with PyTorch's update rules and defaults:

    opt = sg.optim.Adam(model.parameters(), lr=1e-3)
    with sg.autograd.record():
        loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()          # one jitted call updates every parameter
    opt.zero_grad()

DyNet's way still works: `sg.optim.SGD(0.1)(params)` steps the Tensors it is given.
`from_optax(tx, params)` applies any optax transformation. A parameter whose `.grad` is
None (not attached, or `requires_grad=False`) is left alone.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..base.errors import SrcgradError, user_location
from ..transforms.compile_options import QuickJit
from .tensor import Tensor, zeros_like


class HyperparameterError(SrcgradError, ValueError):
    """An optimizer's hyperparameter out of its range: a ValueError, as PyTorch's, naming the
    value and the user's line."""


def checked_hyper(who: str, **ranges: tuple[Any, float, float]) -> None:
    """PyTorch's checks: each value within [lo, hi) (`hi` inf: no upper bound)."""
    for name, (value, lo, hi) in ranges.items():
        v = float(np.asarray(value))
        if not lo <= v < hi:
            bound = f">= {lo:g}" if hi == np.inf else f"in [{lo:g}, {hi:g})"
            raise HyperparameterError(
                f"sg.optim.{who}: invalid {name} {value!r}: it must be {bound}", loc=user_location()
            )


class Optimizer:
    """Holds parameters in groups and a state per parameter; `step()` updates them in one
    jitted call per group.

    `params` is an iterable of Tensors, or of dicts (PyTorch's parameter groups: {"params":
    [...], "lr": ..., ...}, a key left out taking the constructor's value). Each group of
    `param_groups` is a dict of PyTorch's hyperparameter names ("lr", "betas", "momentum",
    ...) besides "params"; writing one (`opt.param_groups[0]["lr"] = 0.01`, a scheduler)
    takes effect at the next step and compiles nothing new: the numbers are runtime inputs
    of the jitted step. Subclasses give `init(value)` (a parameter's state, a pytree of
    arrays), a pure `rule(value, grad, state, step, **hyper) -> (value, state)` over the
    numeric hyperparameters `NUMERIC`, and `check(group)`; boolean options (nesterov,
    centered) are fixed at construction, and so is whether SGD keeps a momentum buffer.
    """

    #: The group keys passed to `rule` (a tuple, such as Adam's betas, as one array).
    NUMERIC: tuple[str, ...] = ("lr",)

    def __init__(self, params: Iterable[Any] | None, defaults: dict[str, Any]):
        self.defaults = dict(defaults)
        self.param_groups: list[dict[str, Any]] = []
        entries = [] if params is None else list(params)
        if entries and all(isinstance(e, dict) for e in entries):
            for group in entries:
                self.add_param_group(group)
        elif entries or params is not None:
            self.add_param_group({"params": entries})
        self.state: dict[int, Any] = {}  # id(param) -> its state
        self.steps: dict[int, int] = {}  # id(param) -> updates made
        #: Elementwise updates: quick to compile, as fast to run (QUICK_OPTIONS).
        self._jitted = QuickJit(self._update)
        self._hyper_cache: dict[int, tuple[tuple, dict[str, jax.Array]]] = {}

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a group: its "params" and any hyperparameters (the rest from `defaults`)."""
        if "params" not in param_group:
            raise SrcgradError(
                "sg.optim: a parameter group is a dict with a 'params' key", loc=user_location()
            )
        group = {**self.defaults, **param_group, "params": _checked(param_group["params"])}
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in group["params"]):
            raise SrcgradError(
                "sg.optim: some parameters appear in more than one parameter group",
                loc=user_location(),
            )
        self.check(group)
        self.param_groups.append(group)

    def check(self, group: dict[str, Any]) -> None:
        """Refuse a group's hyperparameters outside PyTorch's ranges."""
        checked_hyper(type(self).__name__, learning_rate=(group["lr"], 0.0, np.inf))

    @property
    def params(self) -> list[Tensor]:
        """Every parameter, group by group."""
        return [p for g in self.param_groups for p in g["params"]]

    @property
    def hyper(self) -> dict[str, Any]:
        """The first group's hyperparameters (DyNet's form: the defaults)."""
        group = self.param_groups[0] if self.param_groups else self.defaults
        return {k: v for k, v in group.items() if k != "params"}

    @property
    def lr(self) -> Any:
        return (self.param_groups[0] if self.param_groups else self.defaults)["lr"]

    @lr.setter
    def lr(self, value: Any) -> None:
        """Set the learning rate of every group (and the default)."""
        checked_hyper(type(self).__name__, learning_rate=(value, 0.0, np.inf))
        for group in [self.defaults, *self.param_groups]:
            group["lr"] = value

    def init(self, value: jax.Array, group: dict[str, Any]) -> Any:
        """A parameter's initial state (its group's hyperparameters at its first step)."""
        return ()

    def rule(
        self, value: jax.Array, grad: jax.Array, state: Any, step: jax.Array, **hyper: Any
    ) -> tuple[jax.Array, Any]:
        raise NotImplementedError

    def _update(
        self, values: list, grads: list, states: list, steps: jax.Array, hyper: dict[str, Any]
    ) -> tuple[list, list]:
        out = [
            self.rule(v, g.astype(v.dtype), s, steps[i], **hyper)
            for i, (v, g, s) in enumerate(zip(values, grads, states))
        ]
        return [v.astype(v0.dtype) for (v, _), v0 in zip(out, values)], [s for _, s in out]

    def _hyper(self, index: int, group: dict[str, Any]) -> dict[str, jax.Array]:
        """The numeric hyperparameters of `group` as weakly typed float arrays (converted
        again only when one changed)."""
        key = tuple(_hyper_key(group[k]) for k in self.NUMERIC)
        cached = self._hyper_cache.get(index)
        if cached is None or cached[0] != key:
            arrays = {k: _as_hyper(group[k]) for k in self.NUMERIC}
            cached = self._hyper_cache[index] = (key, arrays)
        return cached[1]

    def step(self, params: Sequence[Tensor] | None = None) -> None:
        """Update `params` (default: the optimizer's) from their `.grad`, in place; a
        Tensor given that is in no group takes the defaults."""
        if params is None:
            groups = list(enumerate(self.param_groups))
        else:
            owner = {id(p): i for i, g in enumerate(self.param_groups) for p in g["params"]}
            chosen: dict[int, list[Tensor]] = {}
            for p in _checked(params):
                chosen.setdefault(owner.get(id(p), -1), []).append(p)
            groups = [
                (i, {**(self.param_groups[i] if i >= 0 else self.defaults), "params": ps})
                for i, ps in chosen.items()
            ]
        for index, group in groups:
            self._step_group(index, group)

    def _step_group(self, index: int, group: dict[str, Any]) -> None:
        ps = [p for p in group["params"] if p.grad is not None]
        if not ps:
            return
        for p in ps:
            if id(p) not in self.state:
                self.state[id(p)] = self.init(p._value, group)
                self.steps[id(p)] = 0
            self.steps[id(p)] += 1
        steps = np.array([self.steps[id(p)] for p in ps], np.int32)
        values, states = self._jitted(
            [p._value for p in ps],
            [p.grad._value for p in ps],
            [self.state[id(p)] for p in ps],
            steps,
            self._hyper(index, group),
        )
        for p, v, s in zip(ps, values, states):
            p._value = v
            p._tape = p._num = None
            self.state[id(p)] = s

    def __call__(self, params: Sequence[Tensor]) -> None:
        """DyNet's `sgd(params)`: one step on `params`."""
        self.step(params)

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Set the parameters' `.grad` to zeros (those that have one). (PyTorch's
        `set_to_none` is accepted; a `.grad` of None would detach the parameter here.)"""
        zero_grad(self.params)

    def state_dict(self) -> dict[str, Any]:
        """{"state": {index: (step, state arrays)}, "param_groups": [groups, params as
        indices]}, PyTorch's layout (parameters numbered over the groups in order)."""
        index = {id(p): i for i, p in enumerate(self.params)}
        return {
            "state": {
                index[k]: {"step": self.steps[k], "state": v}
                for k, v in self.state.items()
                if k in index
            },
            "param_groups": [
                {**g, "params": [index[id(p)] for p in g["params"]]} for g in self.param_groups
            ],
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what `state_dict` saved, onto this optimizer's parameters (same order)."""
        params = self.params
        groups = state_dict["param_groups"]
        if [len(g["params"]) for g in groups] != [len(g["params"]) for g in self.param_groups]:
            raise SrcgradError(
                "load_state_dict: the saved parameter groups do not match this optimizer's",
                loc=user_location(),
            )
        for group, saved in zip(self.param_groups, groups):
            group.update({k: v for k, v in saved.items() if k != "params"})
        for i, entry in state_dict["state"].items():
            p = params[int(i)]
            self.steps[id(p)] = int(entry["step"])
            self.state[id(p)] = jax.tree_util.tree_map(jnp.asarray, entry["state"])
        self._hyper_cache.clear()


def zero_grad(params: Iterable[Tensor]) -> None:
    """Set each Tensor's `.grad` to zeros (the Tensors without a `.grad` keep None)."""
    for p in params:
        if p.grad is not None:
            p.grad = Tensor(zeros_like(p._value))


def _hyper_key(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return tuple(_hyper_key(v) for v in value)
    return float(value) if isinstance(value, (int, float, np.number)) else id(value)


def _as_hyper(value: Any) -> Any:
    """A hyperparameter as a weakly typed float array (a tuple, such as Adam's betas, as a
    tuple of them): a number of any Python or NumPy type gives the same program, and a
    float32 parameter's update stays in float32 under jax_enable_x64 (a strongly typed
    float64 array would promote its state, and the next step would compile again)."""
    if isinstance(value, (tuple, list)):
        return tuple(_as_hyper(v) for v in value)
    if isinstance(value, (int, float, np.number)):
        return jnp.asarray(float(value))
    return jnp.asarray(value)


class SGD(Optimizer):
    """`torch.optim.SGD`: g += wd p; b = mu b + (1 - dampening) g (b = g at the first step);
    g = g + mu b (Nesterov) or b; p -= lr g. `SGD(lr)` without parameters is DyNet's
    `sgd(params)` form."""

    NUMERIC = ("lr", "momentum", "dampening", "weight_decay")

    def __init__(
        self,
        params: Iterable[Any] | float | None = None,
        lr: float | None = None,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
    ):
        if isinstance(params, (int, float)):
            params, lr = None, float(params)
        if lr is None:
            raise SrcgradError("sg.optim.SGD: pass a learning rate, lr=", loc=user_location())
        self.nesterov = bool(nesterov)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay)
        self.check(defaults)
        super().__init__(params, defaults)

    def check(self, group: dict[str, Any]) -> None:
        checked_hyper(
            "SGD",
            learning_rate=(group["lr"], 0.0, np.inf),
            momentum=(group["momentum"], 0.0, np.inf),
            weight_decay=(group["weight_decay"], 0.0, np.inf),
        )
        if self.nesterov and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise HyperparameterError(
                "sg.optim.SGD: Nesterov momentum needs momentum > 0 and zero dampening",
                loc=user_location(),
            )

    def init(self, value: jax.Array, group: dict[str, Any]) -> Any:
        return jnp.zeros_like(value) if group["momentum"] else ()

    def rule(self, p, g, buf, step, lr, momentum, dampening, weight_decay):
        g = g + weight_decay * p
        if isinstance(buf, tuple):  # no momentum (at the first step): no buffer
            return p - lr * g, buf
        buf = jnp.where(step == 1, g, momentum * buf + (1 - dampening) * g)
        d = g + momentum * buf if self.nesterov else buf
        d = jnp.where(momentum == 0, g, d)
        return p - lr * d, buf


class Adam(Optimizer):
    """`torch.optim.Adam` (L2 weight decay added to the gradient) = `optax.adam`."""

    NUMERIC = ("lr", "betas", "eps", "weight_decay")

    def __init__(
        self,
        params: Iterable[Any] | None,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        self.check(defaults)
        super().__init__(params, defaults)

    def check(self, group: dict[str, Any]) -> None:
        betas = group["betas"]
        checked_hyper(
            type(self).__name__,
            learning_rate=(group["lr"], 0.0, np.inf),
            epsilon=(group["eps"], 0.0, np.inf),
            beta_0=(betas[0], 0.0, 1.0),
            beta_1=(betas[1], 0.0, 1.0),
            weight_decay=(group["weight_decay"], 0.0, np.inf),
        )

    def init(self, value: jax.Array, group: dict[str, Any]) -> Any:
        return jnp.zeros_like(value), jnp.zeros_like(value)

    def rule(self, p, g, state, step, lr, betas, eps, weight_decay):
        g = g + weight_decay * p
        return _adam(p, g, state, step, lr, betas[0], betas[1], eps)


class AdamW(Adam):
    """`torch.optim.AdamW`: p -= lr wd p, then Adam's step without weight decay
    (= `optax.adamw`). Default weight decay 0.01, as PyTorch's."""

    def __init__(
        self,
        params: Iterable[Any] | None,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ):
        super().__init__(params, lr, betas, eps, weight_decay)

    def rule(self, p, g, state, step, lr, betas, eps, weight_decay):
        return _adam(p * (1 - lr * weight_decay), g, state, step, lr, betas[0], betas[1], eps)


def _adam(p, g, state, step, lr, b1, b2, eps):
    m, v = state
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    t = step.astype(p.dtype)
    m_hat = m / (1 - b1**t)
    v_hat = v / (1 - b2**t)
    return p - lr * m_hat / (jnp.sqrt(v_hat) + eps), (m, v)


class RMSProp(Optimizer):
    """`torch.optim.RMSprop`: v = alpha v + (1 - alpha) g^2 (centered: minus the mean's
    square); b = mu b + g / (sqrt(v) + eps); p -= lr b (lr g / (sqrt(v) + eps) without
    momentum)."""

    NUMERIC = ("lr", "alpha", "eps", "weight_decay", "momentum")

    def __init__(
        self,
        params: Iterable[Any] | None,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
    ):
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum)
        self.check(defaults)
        super().__init__(params, defaults)
        self.centered = bool(centered)

    def check(self, group: dict[str, Any]) -> None:
        checked_hyper(
            "RMSProp",
            learning_rate=(group["lr"], 0.0, np.inf),
            epsilon=(group["eps"], 0.0, np.inf),
            momentum=(group["momentum"], 0.0, np.inf),
            weight_decay=(group["weight_decay"], 0.0, np.inf),
            alpha=(group["alpha"], 0.0, np.inf),
        )

    def init(self, value: jax.Array, group: dict[str, Any]) -> Any:
        return jnp.zeros_like(value), jnp.zeros_like(value), jnp.zeros_like(value)

    def rule(self, p, g, state, step, lr, alpha, eps, weight_decay, momentum):
        v, mean, buf = state
        g = g + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        mean = alpha * mean + (1 - alpha) * g
        avg = v - mean * mean if self.centered else v
        d = g / (jnp.sqrt(avg) + eps)
        buf = momentum * buf + d
        return p - lr * jnp.where(momentum == 0, d, buf), (v, mean, buf)


RMSprop = RMSProp


class Adadelta(Optimizer):
    """`torch.optim.Adadelta`: v = rho v + (1 - rho) g^2; d = sqrt(u + eps) / sqrt(v + eps) g;
    u = rho u + (1 - rho) d^2; p -= lr d (g += wd p first). Defaults lr=1, rho=0.9,
    eps=1e-6, as PyTorch's."""

    NUMERIC = ("lr", "rho", "eps", "weight_decay")

    def __init__(
        self,
        params: Iterable[Any] | None,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0.0,
    ):
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)
        self.check(defaults)
        super().__init__(params, defaults)

    def check(self, group: dict[str, Any]) -> None:
        checked_hyper(
            "Adadelta",
            learning_rate=(group["lr"], 0.0, np.inf),
            epsilon=(group["eps"], 0.0, np.inf),
            weight_decay=(group["weight_decay"], 0.0, np.inf),
        )
        if not 0.0 <= float(group["rho"]) <= 1.0:
            raise HyperparameterError(
                f"sg.optim.Adadelta: invalid rho {group['rho']!r}: it must be in [0, 1]",
                loc=user_location(),
            )

    def init(self, value: jax.Array, group: dict[str, Any]) -> Any:
        return jnp.zeros_like(value), jnp.zeros_like(value)

    def rule(self, p, g, state, step, lr, rho, eps, weight_decay):
        v, u = state
        g = g + weight_decay * p
        v = rho * v + (1 - rho) * g * g
        d = jnp.sqrt(u + eps) / jnp.sqrt(v + eps) * g
        u = rho * u + (1 - rho) * d * d
        return p - lr * d, (v, u)


class Adagrad(Optimizer):
    """`torch.optim.Adagrad`: s += g^2; p -= lr / (1 + (t - 1) lr_decay) g / (sqrt(s) + eps)
    (g += wd p first); the sum starts at `initial_accumulator_value`."""

    NUMERIC = ("lr", "lr_decay", "weight_decay", "eps")

    def __init__(
        self,
        params: Iterable[Any] | None,
        lr: float = 1e-2,
        lr_decay: float = 0.0,
        weight_decay: float = 0.0,
        initial_accumulator_value: float = 0.0,
        eps: float = 1e-10,
    ):
        self.initial = float(initial_accumulator_value)
        defaults = dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay, eps=eps)
        self.check(defaults)
        super().__init__(params, defaults)

    def check(self, group: dict[str, Any]) -> None:
        checked_hyper(
            "Adagrad",
            learning_rate=(group["lr"], 0.0, np.inf),
            lr_decay=(group["lr_decay"], 0.0, np.inf),
            weight_decay=(group["weight_decay"], 0.0, np.inf),
            epsilon=(group["eps"], 0.0, np.inf),
            initial_accumulator_value=(self.initial, 0.0, np.inf),
        )

    def init(self, value: jax.Array, group: dict[str, Any]) -> Any:
        return jnp.full_like(value, self.initial)

    def rule(self, p, g, total, step, lr, lr_decay, weight_decay, eps):
        g = g + weight_decay * p
        clr = lr / (1 + (step.astype(p.dtype) - 1) * lr_decay)
        total = total + g * g
        return p - clr * g / (jnp.sqrt(total) + eps), total


class from_optax:  # a function's name: sg.optim.from_optax(tx, params)
    """Any optax `GradientTransformation` as an optimizer of imperative parameters:
    `opt = sg.optim.from_optax(optax.adam(1e-3), model.parameters()); opt.step()`."""

    def __init__(self, tx: Any, params: Iterable[Tensor]):
        if not (hasattr(tx, "init") and hasattr(tx, "update")):
            raise SrcgradError(
                f"sg.optim.from_optax: expected an optax GradientTransformation "
                f"(with init and update), got {type(tx).__name__}",
                loc=user_location(),
            )
        self.tx = tx
        self.params = _checked(params)
        self.state = tx.init([p._value for p in self.params])
        self._jitted = jax.jit(self._update)

    def _update(self, values: list, grads: list, state: Any) -> tuple[list, Any]:
        import optax  # optax is optional: only this bridge needs it

        updates, state = self.tx.update(grads, state, values)
        return optax.apply_updates(values, updates), state

    def step(self) -> None:
        """One update of every parameter; a parameter without `.grad` gets a zero gradient."""
        grads = [
            jnp.zeros_like(p._value) if p.grad is None else p.grad._value.astype(p.dtype)
            for p in self.params
        ]
        values, self.state = self._jitted([p._value for p in self.params], grads, self.state)
        for p, v in zip(self.params, values):
            p._value = v.astype(p.dtype)
            p._tape = p._num = None

    def zero_grad(self) -> None:
        zero_grad(self.params)


def _checked(params: Iterable[Any]) -> list[Tensor]:
    if isinstance(params, Tensor):
        params = [params]
    ps = list(params)
    for p in ps:
        if not isinstance(p, Tensor):
            hint = (
                "; outside record(), sg.zeros & co. on shapes or arrays give jax.Arrays: "
                "make a trainable tensor with sg.tensor(value, requires_grad=True)"
                if isinstance(p, jax.Array)
                else ""
            )
            raise SrcgradError(
                f"sg.optim: parameters must be sg.Tensors, got a {type(p).__name__}{hint}",
                loc=user_location(),
            )
    return ps


__all__ = [
    "Optimizer",
    "HyperparameterError",
    "SGD",
    "Adam",
    "AdamW",
    "RMSProp",
    "RMSprop",
    "Adadelta",
    "Adagrad",
    "from_optax",
    "zero_grad",
]
