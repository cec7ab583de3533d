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
from .tensor import Tensor, zeros_like


class HyperparameterError(SrcgradError, ValueError):
    """An optimizer's hyperparameter out of its range: a ValueError, as PyTorch's, naming the
    value and the user's line."""


def _checked_hyper(who: str, **ranges: tuple[Any, float, float]) -> None:
    """PyTorch's checks: each value within [lo, hi) (`hi` inf: no upper bound)."""
    for name, (value, lo, hi) in ranges.items():
        v = float(np.asarray(value))
        if not lo <= v < hi:
            bound = f">= {lo:g}" if hi == np.inf else f"in [{lo:g}, {hi:g})"
            raise HyperparameterError(
                f"sg.optim.{who}: invalid {name} {value!r}: it must be {bound}", loc=user_location()
            )


class Optimizer:
    """Holds parameters and a state per parameter; `step()` updates them in one jitted call.

    Subclasses give `init(value)` (a parameter's state, a pytree of arrays) and a pure
    `rule(value, grad, state, step, **hyper) -> (value, state)`; the numeric hyperparameters
    (`self.hyper`) are runtime inputs of the jitted step, so changing `opt.lr` (a schedule)
    compiles nothing new; boolean options (nesterov, centered) are fixed at construction, and
    so is whether SGD keeps a momentum buffer (momentum 0 or not).
    """

    def __init__(self, params: Iterable[Tensor] | None, **hyper: Any):
        self.params: list[Tensor] = [] if params is None else _checked(params)
        self.hyper = hyper
        self.state: dict[int, Any] = {}  # id(param) -> its state
        self.steps: dict[int, int] = {}  # id(param) -> updates made
        self._jitted = jax.jit(self._update)
        self._hyper_key: tuple = ()
        self._hyper_arrays: dict[str, jax.Array] = {}

    @property
    def lr(self) -> Any:
        return self.hyper["lr"]

    @lr.setter
    def lr(self, value: Any) -> None:
        _checked_hyper(type(self).__name__, learning_rate=(value, 0.0, np.inf))
        self.hyper["lr"] = value

    def init(self, value: jax.Array) -> Any:
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

    def _hyper(self) -> dict[str, Any]:
        """The hyperparameters as weakly typed arrays (converted again only on a change)."""
        key = tuple((k, v if isinstance(v, (int, float)) else id(v)) for k, v in self.hyper.items())
        if self._hyper_key != key:
            self._hyper_key = key
            self._hyper_arrays = {k: jnp.asarray(v) for k, v in self.hyper.items()}
        return self._hyper_arrays

    def step(self, params: Sequence[Tensor] | None = None) -> None:
        """Update `params` (default: the optimizer's) from their `.grad`, in place."""
        ps = [
            p for p in (self.params if params is None else _checked(params)) if p.grad is not None
        ]
        if not ps:
            return
        for p in ps:
            if id(p) not in self.state:
                self.state[id(p)] = self.init(p._value)
                self.steps[id(p)] = 0
            self.steps[id(p)] += 1
        steps = np.array([self.steps[id(p)] for p in ps], np.int32)
        values, states = self._jitted(
            [p._value for p in ps],
            [p.grad._value for p in ps],
            [self.state[id(p)] for p in ps],
            steps,
            self._hyper(),
        )
        for p, v, s in zip(ps, values, states):
            p._value = v
            p._tape = p._num = None
            self.state[id(p)] = s

    def __call__(self, params: Sequence[Tensor]) -> None:
        """DyNet's `sgd(params)`: one step on `params`."""
        self.step(params)

    def zero_grad(self) -> None:
        """Set the parameters' `.grad` to zeros (those that have one)."""
        zero_grad(self.params)


def zero_grad(params: Iterable[Tensor]) -> None:
    """Set each Tensor's `.grad` to zeros (the Tensors without a `.grad` keep None)."""
    for p in params:
        if p.grad is not None:
            p.grad = Tensor(zeros_like(p._value))


class SGD(Optimizer):
    """`torch.optim.SGD`: g += wd p; b = mu b + (1 - dampening) g (b = g at the first step);
    g = g + mu b (Nesterov) or b; p -= lr g. `SGD(lr)` without parameters is DyNet's
    `sgd(params)` form."""

    def __init__(
        self,
        params: Iterable[Tensor] | float | None = None,
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
        _checked_hyper(
            "SGD",
            learning_rate=(lr, 0.0, np.inf),
            momentum=(momentum, 0.0, np.inf),
            weight_decay=(weight_decay, 0.0, np.inf),
        )
        if nesterov and (momentum <= 0 or dampening != 0):
            raise HyperparameterError(
                "sg.optim.SGD: Nesterov momentum needs momentum > 0 and zero dampening",
                loc=user_location(),
            )
        super().__init__(
            params, lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay
        )
        self.nesterov = bool(nesterov)

    def init(self, value: jax.Array) -> Any:
        return jnp.zeros_like(value) if self.hyper["momentum"] else ()

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

    def __init__(
        self,
        params: Iterable[Tensor] | None,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ):
        _checked_hyper(
            type(self).__name__,
            learning_rate=(lr, 0.0, np.inf),
            epsilon=(eps, 0.0, np.inf),
            beta_0=(betas[0], 0.0, 1.0),
            beta_1=(betas[1], 0.0, 1.0),
            weight_decay=(weight_decay, 0.0, np.inf),
        )
        super().__init__(
            params, lr=lr, b1=betas[0], b2=betas[1], eps=eps, weight_decay=weight_decay
        )

    def init(self, value: jax.Array) -> Any:
        return jnp.zeros_like(value), jnp.zeros_like(value)

    def rule(self, p, g, state, step, lr, b1, b2, eps, weight_decay):
        g = g + weight_decay * p
        return _adam(p, g, state, step, lr, b1, b2, eps)


class AdamW(Adam):
    """`torch.optim.AdamW`: p -= lr wd p, then Adam's step without weight decay
    (= `optax.adamw`). Default weight decay 0.01, as PyTorch's."""

    def __init__(
        self,
        params: Iterable[Tensor] | None,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.01,
    ):
        super().__init__(params, lr, betas, eps, weight_decay)

    def rule(self, p, g, state, step, lr, b1, b2, eps, weight_decay):
        return _adam(p * (1 - lr * weight_decay), g, state, step, lr, b1, b2, eps)


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

    def __init__(
        self,
        params: Iterable[Tensor] | None,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        momentum: float = 0.0,
        centered: bool = False,
    ):
        _checked_hyper(
            "RMSProp",
            learning_rate=(lr, 0.0, np.inf),
            epsilon=(eps, 0.0, np.inf),
            momentum=(momentum, 0.0, np.inf),
            weight_decay=(weight_decay, 0.0, np.inf),
            alpha=(alpha, 0.0, np.inf),
        )
        super().__init__(
            params, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum
        )
        self.centered = bool(centered)

    def init(self, value: jax.Array) -> Any:
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
    "from_optax",
    "zero_grad",
]
