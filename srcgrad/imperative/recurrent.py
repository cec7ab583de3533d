"""PyTorch's recurrent layers: `RNN`, `LSTM`, `GRU` and their cells, with PyTorch's
signatures, layouts, gate order, parameter names and initialisation, so a PyTorch
`state_dict` loads as it is.

    rnn = sg.nn.LSTM(10, 20, num_layers=2, dropout=0.1)
    out, (h_n, c_n) = rnn(x, (h0, c0))         # x (L, N, 10); batch_first=True: (N, L, 10)

Parameters per layer k (and direction: `_reverse` for the backward one): `weight_ih_l{k}`
(G H, in), `weight_hh_l{k}` (G H, H), `bias_ih_l{k}`, `bias_hh_l{k}` (G H,), gates stacked
in PyTorch's order: LSTM i, f, g, o (G = 4); GRU r, z, n (G = 3), with
n = tanh(W_in x + b_in + r (W_hn h + b_hn)); RNN one (tanh or relu). All drawn uniform in
+-1/sqrt(H), as PyTorch's. Each layer and direction is one call: the input projection of the
whole sequence, then an `sg.scan` of the recurrence, so the tape records one entry per layer
and the backward is the scan's (not one op per time step). A cell is one call per step.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import math
from typing import Any

from .. import ops as declared_ops
from ..base.errors import SrcgradError, user_location
from ..core import dispatch
from .functional import dropout
from .layers import Module, new_parameter
from .seeds import seeded_rng

#: The op namespace (its names are declared when srcgrad is imported: mypy cannot see them).
ops: Any = declared_ops

#: Gates per mode (rows of weight_ih: gates x hidden_size).
GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


class RecurrentError(SrcgradError, ValueError):
    """A recurrent layer's bad argument or input shape: a ValueError, as PyTorch's."""


def _fail(who: str, message: str) -> RecurrentError:
    return RecurrentError(f"{who}: {message}", loc=user_location())


def _step(mode: str, xw: Any, h: Any, c: Any, w_hh: Any, b_hh: Any) -> tuple[Any, Any]:
    """One step from the projected input `xw` (x W_ih^T + b_ih): the new (h, c)."""
    hw = ops.matmul(h, ops.transpose(w_hh))
    if b_hh is not None:
        hw = hw + b_hh
    if mode == "LSTM":
        i, f, g, o = ops.split(xw + hw, 4, axis=-1)
        c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
        return ops.sigmoid(o) * ops.tanh(c), c
    if mode == "GRU":
        xr, xz, xn = ops.split(xw, 3, axis=-1)
        hr, hz, hn = ops.split(hw, 3, axis=-1)
        r = ops.sigmoid(xr + hr)
        z = ops.sigmoid(xz + hz)
        n = ops.tanh(xn + r * hn)
        return (1.0 - z) * n + z * h, c
    pre = xw + hw
    return (ops.tanh(pre) if mode == "RNN_TANH" else ops.relu(pre)), c


def _project(x: Any, w_ih: Any, b_ih: Any) -> Any:
    xw = ops.matmul(x, ops.transpose(w_ih))
    return xw if b_ih is None else xw + b_ih


def _layer(
    mode: str, x: Any, h0: Any, c0: Any, w: tuple[Any, Any, Any, Any], reverse: bool
) -> tuple[Any, Any, Any]:
    """One layer in one direction over x (L, N, in): outputs (L, N, H), h_n, c_n."""
    w_ih, w_hh, b_ih, b_hh = w

    def body(carry: tuple[Any, Any], xw: Any) -> tuple[tuple[Any, Any], Any]:
        h, c = _step(mode, xw, carry[0], carry[1], w_hh, b_hh)
        return (h, c), h

    (h, c), ys = ops.scan(body, (h0, c0), _project(x, w_ih, b_ih), reverse=reverse)
    return ys, h, c


def _cell(mode: str, x: Any, h: Any, c: Any, w: tuple[Any, Any, Any, Any]) -> tuple[Any, Any]:
    w_ih, w_hh, b_ih, b_hh = w
    return _step(mode, _project(x, w_ih, b_ih), h, c, w_hh, b_hh)


class RNNBase(Module):
    """The multi-layer recurrent layer of `mode` (see the module's docstring)."""

    mode = "RNN_TANH"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
        *,
        seed: int | None = None,
    ):
        who = type(self).__name__
        if num_layers < 1 or hidden_size < 1 or input_size < 1:
            raise _fail(who, "input_size, hidden_size and num_layers must be positive")
        if not 0.0 <= dropout <= 1.0:
            raise _fail(who, f"dropout must be in [0, 1], got {dropout}")
        if proj_size:
            raise _fail(who, "proj_size is not supported (only 0)")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional = bidirectional
        gates = GATES[self.mode] * hidden_size
        bound = 1.0 / math.sqrt(hidden_size)
        rng = seeded_rng(seed)
        dt = "float32" if dtype is None else dtype
        for k in range(num_layers):
            for suffix in ("", "_reverse") if bidirectional else ("",):
                fan_in = input_size if k == 0 else hidden_size * self.directions
                shapes = {"weight_ih": (gates, fan_in), "weight_hh": (gates, hidden_size)}
                if bias:
                    shapes.update(bias_ih=(gates,), bias_hh=(gates,))
                for name, shape in shapes.items():
                    full = f"{name}_l{k}{suffix}"
                    setattr(self, full, new_parameter(rng.uniform(-bound, bound, shape), full, dt))
        if device is not None:
            self.to(device)

    @property
    def directions(self) -> int:
        return 2 if self.bidirectional else 1

    def _weights(self, k: int, suffix: str) -> tuple[Any, Any, Any, Any]:
        get = vars(self).get
        return (
            get(f"weight_ih_l{k}{suffix}"),
            get(f"weight_hh_l{k}{suffix}"),
            get(f"bias_ih_l{k}{suffix}"),
            get(f"bias_hh_l{k}{suffix}"),
        )

    def forward(self, input: Any, hx: Any = None) -> tuple[Any, Any]:
        who = type(self).__name__
        if input.ndim not in (2, 3):
            raise _fail(who, f"the input must be 2-D (unbatched) or 3-D, got {tuple(input.shape)}")
        if input.shape[-1] != self.input_size:
            raise _fail(
                who,
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                f"got {input.shape[-1]}",
            )
        batched = input.ndim == 3
        x = input if batched else ops.expand_dims(input, 1)
        if batched and self.batch_first:
            x = ops.swapaxes(x, 0, 1)
        h0, c0 = self._initial(hx, x, batched)
        hs, cs = [], []
        for k in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(("", "_reverse")[: self.directions]):
                i = k * self.directions + d
                c_in = None if c0 is None else c0[i]
                args = (self.mode, x, h0[i], c_in, self._weights(k, suffix), bool(d))
                y, h, c = dispatch.call(_layer, args, {})
                outs.append(y)
                hs.append(h)
                cs.append(c)
            x = outs[0] if len(outs) == 1 else ops.concatenate(outs, axis=-1)
            if self.dropout and k < self.num_layers - 1:
                x = dropout(x, self.dropout, self.training)
        if batched and self.batch_first:
            x = ops.swapaxes(x, 0, 1)
        h_n = ops.stack(hs)
        if not batched:
            x, h_n = ops.squeeze(x, 1), ops.squeeze(h_n, 1)
        if self.mode != "LSTM":
            return x, h_n
        c_n = ops.stack(cs)
        return x, (h_n, c_n if batched else ops.squeeze(c_n, 1))

    def _initial(self, hx: Any, x: Any, batched: bool) -> tuple[Any, Any]:
        """(h0, c0) as (layers x directions, N, H); zeros where not given."""
        who = type(self).__name__
        want = (self.num_layers * self.directions, x.shape[1], self.hidden_size)
        if hx is None:
            zeros = ops.zeros(want, x.dtype)
            return zeros, (zeros if self.mode == "LSTM" else None)
        if self.mode == "LSTM":
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise _fail(who, "hx must be a pair (h_0, c_0)")
            states = list(hx)
        else:
            if isinstance(hx, (tuple, list)):
                raise _fail(who, "hx must be one tensor h_0, not a tuple")
            states = [hx]
        out = []
        for name, s in zip(("h_0", "c_0"), states):
            s = s if batched else ops.expand_dims(s, 1)
            if tuple(s.shape) != want:
                shape = want if batched else (want[0], want[2])
                got = tuple(s.shape) if batched else (s.shape[0], s.shape[2])
                raise _fail(who, f"Expected hidden size {shape} for {name}, got {got}")
            out.append(s)
        return out[0], (out[1] if len(out) > 1 else None)


class RNN(RNNBase):
    """`torch.nn.RNN`: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Any = None,
        dtype: Any = None,
        *,
        seed: int | None = None,
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise _fail("RNN", f"nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(
            input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional,
            device=device, dtype=dtype, seed=seed,
        )  # fmt: skip


class LSTM(RNNBase):
    """`torch.nn.LSTM`: gates i, f, g, o; returns (output, (h_n, c_n))."""

    mode = "LSTM"


class GRU(RNNBase):
    """`torch.nn.GRU`: gates r, z, n; h' = (1 - z) n + z h."""

    mode = "GRU"


class RNNCellBase(Module):
    """One step of a recurrent layer: weight_ih (G H, in), weight_hh (G H, H), bias_ih,
    bias_hh; `cell(x, hx)` with x (N, in) or (in,)."""

    mode = "RNN_TANH"

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
        *,
        seed: int | None = None,
    ):
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        gates = GATES[self.mode] * hidden_size
        bound = 1.0 / math.sqrt(hidden_size)
        rng = seeded_rng(seed)
        dt = "float32" if dtype is None else dtype
        shapes = {"weight_ih": (gates, input_size), "weight_hh": (gates, hidden_size)}
        if bias:
            shapes.update(bias_ih=(gates,), bias_hh=(gates,))
        for name, shape in shapes.items():
            setattr(self, name, new_parameter(rng.uniform(-bound, bound, shape), name, dt))
        if not bias:
            self.bias_ih = self.bias_hh = None
        if device is not None:
            self.to(device)

    def forward(self, input: Any, hx: Any = None) -> Any:
        who = type(self).__name__
        if input.ndim not in (1, 2) or input.shape[-1] != self.input_size:
            raise _fail(
                who,
                f"the input must be (N, {self.input_size}) or ({self.input_size},), "
                f"got {tuple(input.shape)}",
            )
        batched = input.ndim == 2
        x = input if batched else ops.expand_dims(input, 0)
        want = (x.shape[0], self.hidden_size)
        if hx is None:
            h = c = ops.zeros(want, x.dtype)
        else:
            states = list(hx) if self.mode == "LSTM" else [hx]
            if self.mode == "LSTM" and len(states) != 2:
                raise _fail(who, "hx must be a pair (h, c)")
            states = [s if batched else ops.expand_dims(s, 0) for s in states]
            for s in states:
                if tuple(s.shape) != want:
                    raise _fail(who, f"the hidden state must be {want}, got {tuple(s.shape)}")
            h, c = states[0], (states[1] if len(states) > 1 else None)
        get = vars(self).get
        w = (get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"))
        c_in = c if self.mode == "LSTM" else None
        h, c = dispatch.call(_cell, (self.mode, x, h, c_in, w), {})
        if not batched:
            h = ops.squeeze(h, 0)
            c = None if c is None else ops.squeeze(c, 0)
        return (h, c) if self.mode == "LSTM" else h


class RNNCell(RNNCellBase):
    """`torch.nn.RNNCell`: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: Any = None,
        *,
        seed: int | None = None,
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise _fail("RNNCell", f"nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        self.nonlinearity = nonlinearity
        self.mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, device, dtype, seed=seed)


class LSTMCell(RNNCellBase):
    """`torch.nn.LSTMCell`: returns (h', c')."""

    mode = "LSTM"


class GRUCell(RNNCellBase):
    """`torch.nn.GRUCell`."""

    mode = "GRU"


__all__ = [
    "RecurrentError",
    "RNNBase",
    "RNN",
    "LSTM",
    "GRU",
    "RNNCellBase",
    "RNNCell",
    "LSTMCell",
    "GRUCell",
]
