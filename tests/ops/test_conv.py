"""Convolution and pooling of any rank against lax: forward values, and gradients (first
order for every case, second order for a representative set) against jax.grad of
lax.conv_general_dilated / lax.conv_transpose / lax.reduce_window and finite differences."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import jax
import numpy as np
import pytest
from jax import lax

import srcgrad as sg
from support.util import sliced
from srcgrad.base.errors import SrcgradError
from srcgrad.testing import check_grads

RNG = np.random.default_rng(3)


def _arr(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


@dataclass(frozen=True)
class Case:
    """`ours(module, x, w)` with module sg (ours) and lax (the reference) on (x, w)."""

    name: str
    fn: Callable[..., Any]
    x: np.ndarray
    w: np.ndarray | None = None
    second_order: bool = False

    def args(self) -> tuple:
        return (self.x,) if self.w is None else (self.x, self.w)


def _cgd(m: Any, x: Any, w: Any, *args: Any, **kw: Any) -> Any:
    return m.conv_general_dilated(x, w, *args, **kw)


def _ref_conv(
    x: Any,
    w: Any,
    strides: Any = None,
    padding: str = "VALID",
    layout: str = "NHWC",
    dilation: Any = None,
    groups: int = 1,
) -> Any:
    """sg.conv's meaning in lax terms."""
    spatial = layout.replace("N", "").replace("C", "")
    kernel = spatial + "IO" if layout.endswith("C") else "OI" + spatial
    n = len(spatial)
    return lax.conv_general_dilated(
        x,
        w,
        strides or (1,) * n,
        padding,
        None,
        dilation,
        (layout, kernel, layout),
        feature_group_count=groups,
    )


def _conv(m: Any, x: Any, w: Any, *args: Any, **kw: Any) -> Any:
    if m is lax:
        return _ref_conv(
            x, w, *args, **{"groups" if k == "feature_group_count" else k: v for k, v in kw.items()}
        )
    return sg.conv(x, w, *args, **kw)


def _reduce_window(
    kind: str, layout: str, window: tuple, strides: tuple | None, padding: str
) -> Callable[[Any], Any]:
    spatial = [i for i, c in enumerate(layout) if c not in "NC"]
    dims, strd = [1] * len(layout), [1] * len(layout)
    for a, k, s in zip(spatial, window, strides or window):
        dims[a], strd[a] = k, s

    def ref(x: Any) -> Any:
        if kind == "max":
            return lax.reduce_window(x, -np.inf, lax.max, dims, strd, padding)
        return lax.reduce_window(x, 0.0, lax.add, dims, strd, padding) / np.prod(window)

    return ref


def _pool(
    kind: str, layout: str, window: tuple, strides: tuple | None = None, padding: str = "VALID"
) -> Callable[..., Any]:
    ref = _reduce_window(kind, layout, window, strides, padding)
    ours = sg.max_pool if kind == "max" else sg.avg_pool
    return lambda m, x: ref(x) if m is lax else ours(x, window, strides, padding, layout)


def _distinct(*shape: int) -> np.ndarray:
    """Values without ties (max pooling's gradient picks one of tied values in JAX)."""
    return RNG.permutation(int(np.prod(shape))).reshape(shape) * 0.1 - 1.0


CASES = [
    Case(
        "conv 1-D NWC stride dilation SAME",
        lambda m, x, w: _conv(m, x, w, (2,), "SAME", "NWC", (2,)),
        _arr(2, 9, 3),
        _arr(3, 3, 4),
    ),
    Case(
        "conv 1-D NCW",
        lambda m, x, w: _conv(m, x, w, None, "VALID", "NCW"),
        _arr(2, 3, 7),
        _arr(4, 3, 2),
    ),
    Case(
        "conv 2-D NHWC today's signature",
        lambda m, x, w: _conv(m, x, w, (1, 2), "SAME", "NHWC", (1, 1)),
        _arr(1, 5, 6, 2),
        _arr(3, 2, 2, 3),
    ),
    Case(
        "conv 2-D depthwise",
        lambda m, x, w: _conv(m, x, w, (1, 1), "SAME", "NHWC", feature_group_count=4),
        _arr(2, 5, 5, 4),
        _arr(3, 3, 1, 8),
        True,
    ),
    Case(
        "conv 2-D NCHW groups explicit padding",
        lambda m, x, w: _conv(m, x, w, (2, 1), ((1, 0), (2, 1)), "NCHW", feature_group_count=2),
        _arr(2, 4, 5, 4),
        _arr(6, 2, 3, 2),
    ),
    Case(
        "conv 3-D NDHWC",
        lambda m, x, w: _conv(m, x, w, (1, 2, 1), "SAME", "NDHWC"),
        _arr(1, 4, 5, 3, 2),
        _arr(2, 3, 2, 2, 3),
    ),
    Case(
        "conv 3-D NCDHW dilation",
        lambda m, x, w: _conv(m, x, w, None, "VALID", "NCDHW", (2, 1, 1)),
        _arr(1, 2, 5, 3, 3),
        _arr(2, 2, 2, 2, 2),
    ),
    Case(
        "conv_general_dilated lhs_dilation",
        lambda m, x, w: _cgd(
            m, x, w, (1, 1), ((1, 2), (0, 1)), (2, 3), (1, 2), ("NCHW", "OIHW", "NCHW")
        ),
        _arr(2, 3, 3, 4),
        _arr(2, 3, 2, 2),
    ),
    Case(
        "conv_general_dilated default dn",
        lambda m, x, w: _cgd(m, x, w, (2,), "SAME"),
        _arr(2, 3, 8),
        _arr(4, 3, 3),
    ),
    Case(
        "conv_general_dilated batch groups",
        lambda m, x, w: _cgd(
            m, x, w, (1,), "VALID", dimension_numbers=("NWC", "WIO", "NWC"), batch_group_count=2
        ),
        _arr(4, 6, 3),
        _arr(2, 3, 4),
        True,
    ),
    Case(
        "conv_transpose 2-D SAME",
        lambda m, x, w: m.conv_transpose(x, w, (2, 2), "SAME"),
        _arr(1, 3, 4, 2),
        _arr(3, 3, 2, 3),
    ),
    Case(
        "conv_transpose 1-D transpose_kernel",
        lambda m, x, w: m.conv_transpose(
            x, w, (3,), "VALID", dimension_numbers=("NCH", "OIH", "NCH"), transpose_kernel=True
        ),
        _arr(2, 3, 4),
        _arr(3, 2, 2),
    ),
    Case(
        "conv_transpose explicit padding",
        lambda m, x, w: m.conv_transpose(x, w, (2,), ((1, 2),)),
        _arr(1, 5, 2),
        _arr(3, 2, 2),
    ),
    Case("max_pool 1-D NWC", _pool("max", "NWC", (3,), (2,)), _distinct(2, 7, 3)),
    Case("max_pool 2-D SAME", _pool("max", "NHWC", (3, 2), (2, 2), "SAME"), _distinct(1, 5, 5, 2)),
    Case(
        "max_pool 3-D NCDHW",
        _pool("max", "NCDHW", (2, 2, 2)),
        _distinct(1, 2, 4, 4, 4),
        second_order=True,
    ),
    Case("avg_pool 1-D NCW SAME", _pool("avg", "NCW", (3,), (2,), "SAME"), _arr(2, 2, 7)),
    Case("avg_pool 2-D NCHW", _pool("avg", "NCHW", (2, 3), (1, 2)), _arr(1, 2, 5, 6)),
    Case("avg_pool 3-D NDHWC", _pool("avg", "NDHWC", (2, 1, 3), (2, 1, 1)), _arr(1, 4, 3, 5, 2)),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_forward_matches_lax(case: Case) -> None:
    want = case.fn(lax, *case.args())
    got = sg.jit(lambda *a: case.fn(sg, *a))(*case.args())
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    f32 = [a.astype(np.float32) for a in case.args()]
    np.testing.assert_allclose(case.fn(sg, *f32), case.fn(lax, *f32), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("case", sliced(CASES, 2, lambda c: c.name), ids=lambda c: c.name)
def test_gradients_match_jax(case: Case) -> None:
    """jax.grad and finite differences; second order where the case asks for it."""
    check_grads(
        lambda *a: case.fn(sg, *a),
        case.args(),
        order=2 if case.second_order else 1,
        jax_fun=lambda *a: case.fn(lax, *a),
        directions=1,
    )


def test_conv_errors_name_the_layout_and_ranks() -> None:
    with pytest.raises(SrcgradError, match="layout must be one of"):
        sg.conv(_arr(1, 3, 3, 2), _arr(2, 2, 2, 2), layout="NHCW")
    with pytest.raises(SrcgradError, match="5-D input"):
        sg.conv(_arr(1, 3, 3, 2), _arr(2, 2, 2, 2), layout="NDHWC")
    with pytest.raises(SrcgradError, match="string padding with lhs_dilation"):
        sg.conv_general_dilated(_arr(1, 2, 4), _arr(2, 2, 2), (1,), "SAME", (2,))
    with pytest.raises(SrcgradError, match="window of 3"):
        sg.max_pool(_arr(1, 4, 4, 4, 1), (2, 2), layout="NDHWC")


def test_jax_grad_of_an_sg_conv_program() -> None:
    """The grouped conv's gradient program is itself differentiable by JAX (jax.grad of sg.grad)."""
    x, w = _arr(1, 4, 4, 2), _arr(2, 2, 1, 2)

    def loss(m: Any, w: Any) -> Any:
        return (_conv(m, x, w, None, "SAME", "NHWC", feature_group_count=2) ** 2).sum()

    gg = jax.grad(lambda w: (sg.grad(lambda w: loss(sg, w))(w) ** 2).sum())(w)
    want = jax.grad(lambda w: (jax.grad(lambda w: loss(lax, w))(w) ** 2).sum())(w)
    np.testing.assert_allclose(gg, want, rtol=1e-10)
