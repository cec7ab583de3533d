"""PyTorch's `torch.nn.utils` gradient helpers (`sg.nn.utils`): clip_grad_norm_,
clip_grad_value_, parameters_to_vector, vector_to_parameters.

    loss.backward()
    sg.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    opt.step()

The clipping runs as one jitted call over every gradient and rewrites the `.grad`s in
place; parameters without a `.grad` are skipped, as PyTorch skips those whose grad is None.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Iterable

import jax
import jax.numpy as jnp
import numpy as np

from ..base.errors import SrcgradError, user_location
from .tensor import Tensor


def _with_grads(parameters: Any) -> list[Tensor]:
    ps = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    for p in ps:
        if not isinstance(p, Tensor):
            raise SrcgradError(
                f"sg.nn.utils: expected sg.Tensors, got a {type(p).__name__}", loc=user_location()
            )
    return [p for p in ps if p.grad is not None]


@jax.jit
def _norms(grads: list[jax.Array], norm_type: jax.Array) -> jax.Array:
    """The norm of the per-gradient norms (norm_type inf: the largest |g|)."""
    dt = jnp.result_type(jnp.float32, *grads)
    inf = jnp.isinf(norm_type)
    p = jnp.where(inf, 2.0, norm_type).astype(dt)
    each = jnp.stack(
        [
            jnp.where(
                inf,
                jnp.max(jnp.abs(g)).astype(dt) if g.size else jnp.zeros((), dt),
                jnp.sum(jnp.abs(g).astype(dt) ** p) ** (1.0 / p),
            )
            for g in grads
        ]
    )
    return jnp.where(inf, jnp.max(each), jnp.sum(each**p) ** (1.0 / p))


@jax.jit
def _scaled(grads: list[jax.Array], total: jax.Array, max_norm: jax.Array) -> list[jax.Array]:
    coef = jnp.minimum(max_norm / (total + 1e-6), 1.0)
    return [(g * coef).astype(g.dtype) for g in grads]


def clip_grad_norm_(
    parameters: Any,
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: Any = None,
) -> Tensor:
    """Scale the gradients so that their total `norm_type`-norm is at most `max_norm`
    (each multiplied by min(max_norm / (total + 1e-6), 1)); returns the total norm before
    clipping (a Tensor)."""
    ps = _with_grads(parameters)
    if not ps:
        return Tensor(jnp.zeros((), jnp.float32))
    grads = [p.grad.value() for p in ps]
    total = _norms(grads, jnp.asarray(float(norm_type), jnp.float32))
    if error_if_nonfinite and not bool(jnp.isfinite(total)):
        raise SrcgradError(
            f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is "
            f"{float(total)}; pass error_if_nonfinite=False to clip anyway",
            loc=user_location(),
        )
    for p, g in zip(ps, _scaled(grads, total, jnp.asarray(float(max_norm), jnp.float32))):
        p.grad = Tensor(g)
    return Tensor(total)


def clip_grad_value_(parameters: Any, clip_value: float, foreach: Any = None) -> None:
    """Clamp each gradient element into [-clip_value, clip_value], in place."""
    ps = _with_grads(parameters)
    if ps:
        clipped = _clamped([p.grad.value() for p in ps], jnp.asarray(float(clip_value)))
        for p, g in zip(ps, clipped):
            p.grad = Tensor(g)


@jax.jit
def _clamped(grads: list[jax.Array], c: jax.Array) -> list[jax.Array]:
    return [jnp.clip(g, -c, c).astype(g.dtype) for g in grads]


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters' values flattened and concatenated (a Tensor, not recorded)."""
    values = [p.value().ravel() for p in parameters]
    return Tensor(jnp.concatenate(values) if values else jnp.zeros((0,), jnp.float32))


def vector_to_parameters(vec: Any, parameters: Iterable[Tensor]) -> None:
    """Write consecutive slices of `vec` into the parameters, in place."""
    flat = np.asarray(vec.value() if isinstance(vec, Tensor) else vec)
    ps = list(parameters)
    need = sum(p.size for p in ps)
    if flat.ndim != 1 or flat.size != need:
        raise SrcgradError(
            f"vector_to_parameters: a vector of {need} values is needed, got shape {flat.shape}",
            loc=user_location(),
        )
    at = 0
    for p in ps:
        p.assign(flat[at : at + p.size].reshape(p.shape))
        at += p.size


__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters"]
