"""Imperative mode: MXNet's record/backward and a DyNet-style tape over srcgrad's pipeline.

    x = sg.tensor([1.0, 2.0]); x.attach_grad()
    with sg.autograd.record():          # a fresh tape (a Program) per outermost record()
        y = sg.sum(sg.tanh(x) * x)      # computed now, and appended to the tape
    y.backward()                        # append_backward on the tape, lowered, jitted
    x.grad                              # dy/dx

An op on Tensors computes its value eagerly (srcgrad/eager.py: one jitted call per op
signature) and, while recording, is traced once more into the tape, so the tape holds the
ops as the user wrote them, with their values beside them. Backward differentiates the tape
with `gradients` (Fluid's algorithm, transforms/backward.py) and emits only the ops that the
gradients need beyond the recorded values: the grad ops, plus any forward value the tape did
not record (inside a composite op). The compiled backward is cached on the tape's structure
(op types, input wiring, shapes, dtypes, attrs; never values: srcgrad/tape_compile.py), so a
training loop over a fixed model compiles it once and then feeds it each iteration's
recorded values.

Layer L6 (front ends): see docs/design.md.
"""
from __future__ import annotations

import contextlib
import math
import re
import threading
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import dtypes, eager, tensors
from .builder import as_var
from .dispatch import Weak, register_tape
from .ops import methods
from .errors import GradientError, SrcgradError, user_location
from .ir import Op, Program, Variable, program_guard
from .tensors import Tensor
from .tape_compile import Compiled, Structure, compile_count, emit, plan
from .transforms.backward import gradients
from .analysis import live_ops

_SUFFIX = re.compile(r"_[0-9]+$")

#: The grad_reqs whose Tensors backward writes a gradient to.
_WRITTEN = ("write", "add")

NOT_IN_GRAPH = ("Cannot differentiate {what} because it is not in a computational graph. You "
                "need to record it: compute it inside `with sg.autograd.record():` to save the "
                "computational graph for backward. If you want to differentiate the same graph "
                "twice, you need to pass retain_graph=True to backward")


class Tape:
    """One recording: the Program of the ops recorded and the values they computed."""

    def __init__(self) -> None:
        self.program = Program()
        #: The concrete value of every tape Variable that has one (inputs, op results).
        self.values: dict[Variable, Any] = {}
        #: id(Tensor) -> (Tensor, input Variable) for the Tensors read as inputs.
        self.leaves: dict[int, tuple[Tensor, Variable]] = {}
        #: The leaves read as attached inputs (kind "param"), in the order first read.
        self.params: list[tuple[Tensor, Variable]] = []
        #: Per earlier tape: its Variables copied onto this one (see `_import`).
        self.imported: dict[Tape, dict[Variable, Variable]] = {}
        self.structure = Structure(self.program)
        self.freed = False

    def var_of(self, t: Tensor) -> Variable:
        """The tape Variable of `t`: its recorded op result, its history copied from the
        live tape that recorded it, or an input fed its value."""
        if t._tape is self:
            return t._var  # type: ignore[return-value]
        hit = self.leaves.get(id(t))
        if hit is not None:
            return hit[1]
        if t._tape is not None and not t._tape.freed:
            return self._import(t._tape, t._var)  # type: ignore[arg-type]
        attached = t.grad_req is not None
        v = self._input(t.name or "x", t.shape, dtypes.canonical(t.dtype), t._value,
                        "param" if attached else "data")
        self.leaves[id(t)] = (t, v)
        if attached:
            self.params.append((t, v))
        return v

    def _input(self, base: str, shape: tuple, dtype: np.dtype, value: Any, kind: str) -> Variable:
        v = self.program.global_block().new_var(base, shape, dtype, kind=kind,
                                                stop_gradient=kind != "param")
        self.program.inputs.append(v)
        self.know(v, value)
        return v

    def _import(self, src: "Tape", var: Variable) -> Variable:
        """Copy the ops of `src` that `var` depends on onto this tape (a Tensor recorded in an
        earlier record() scope keeps its history, as in MXNet), with their values."""
        mapped = self.imported.setdefault(src, {})
        if var in mapped:
            return mapped[var]
        ops = [op for op in live_ops(src.program.global_block().ops, [var])
               if not set(op.outputs) <= mapped.keys()]
        if any(op.sub_blocks() for op in ops):
            raise SrcgradError(f"{var.name} was recorded with a control-flow op in another "
                               "record() scope; read it inside the scope that recorded it",
                               loc=user_location())
        by_var = {v: t for t, v in src.leaves.values()}
        block = self.program.global_block()
        for op in ops:
            ins = []
            for v in op.inputs:
                if v not in mapped:  # an input of `src`: its Tensor's input here, or its value
                    t = by_var.get(v)
                    mapped[v] = (self.var_of(t) if t is not None else
                                 self._input(_base(v.name), v.shape, v.dtype, src.values[v], "data"))
                ins.append(mapped[v])
            outs = [block.new_var(_base(o.name), o.shape, o.dtype) for o in op.outputs]
            block.ops.append(Op(op.type, ins, outs, dict(op.attrs), op.loc, block))
            for o, n in zip(op.outputs, outs):
                mapped[o] = n
                if o in src.values:
                    self.know(n, src.values[o])
        return mapped[var]

    def trace(self, fn: Callable[..., Any], leaves: list, tree: Any) -> list[Variable]:
        """Append `fn`'s ops, called on the Tensors' Variables, and return its results."""
        prog = self.program
        n_caps = len(prog.captures)
        with program_guard(prog):
            traced = [self.var_of(l) if type(l) is Tensor else l for l in leaves]
            args, kwargs = jax.tree_util.tree_unflatten(tree, traced)
            prog.lift_weak = self._lift
            try:
                outs = [as_var(v) for v in jax.tree_util.tree_leaves(fn(*args, **kwargs))]
            finally:
                prog.lift_weak = None
        for v, value in zip(prog.captures[n_caps:], prog.capture_values[n_caps:]):
            self.know(v, jnp.asarray(value, v.dtype))
        return outs

    def _lift(self, w: Weak, dtype: np.dtype) -> Variable:
        """A Python number in an operand position: an input fed its value, so the tape's
        structure (and its compiled backward) does not change with the number."""
        return self._input("c", (), dtype, np.asarray(w.value, dtype), "data")

    def bind(self, value: Any, var: Variable) -> Tensor:
        """A Tensor of `value` recorded as `var`."""
        t = Tensor(value)
        t._tape, t._var = self, var
        self.know(var, value)
        return t

    def know(self, var: Variable, value: Any) -> None:
        """Record `value` as `var`'s (a first value only); which Variables have one is part
        of the structure."""
        values = self.values
        if var not in values:
            values[var] = value
            self.structure.known.append(var)

    def free(self) -> None:
        """Drop the recorded values: a later backward over this tape is an error."""
        self.freed = True
        self.values.clear()
        self.leaves.clear()
        self.params = []
        self.imported.clear()


def _base(name: str) -> str:
    """`tanh` for `tanh_3`: the base that a copied Variable is named after."""
    return _SUFFIX.sub("", name) or name


class _State(threading.local):
    def __init__(self) -> None:
        self.recording = False
        self.depth = 0  # open record() scopes
        self.tape: Tape | None = None


_state = _State()


def _active_tape() -> Tape | None:
    """The tape ops are recorded onto now; None when not recording."""
    st = _state
    if not st.recording:
        return None
    tape = st.tape
    if tape is None or tape.freed:  # backward freed it inside the record() scope
        tape = st.tape = Tape()
    return tape


def _takes(leaves: list) -> bool:
    """The dispatch's question: does imperative mode take this call? Yes while recording,
    and for any call on a Tensor."""
    if _state.recording:
        return True
    for leaf in leaves:
        if type(leaf) is Tensor:
            return True
    return False


def apply(fn: Callable[..., Any], leaves: list, tree: Any) -> Any:
    """An op call imperative mode takes (srcgrad.dispatch hands it here): computed now by
    the eager interpreter, recorded onto the tape while recording if it reads a Tensor, its
    results wrapped as Tensors (under record() also those of a constructor: sg.zeros)."""
    args = [l._value if type(l) is Tensor else l for l in leaves]
    out = eager.run(fn, args, tree)
    values, out_tree = jax.tree_util.tree_flatten(out)
    tape = _active_tape()
    if (tape is None or not any(type(l) is Tensor for l in leaves)
            or any(isinstance(a, jax.core.Tracer) for a in args)):
        # not recording, nothing recorded read, or values of a JAX trace (jax.jit of a
        # function of Tensors)
        return jax.tree_util.tree_unflatten(out_tree, [Tensor(v) for v in values])
    outs = tape.trace(fn, leaves, tree)
    out = jax.tree_util.tree_unflatten(out_tree, [tape.bind(v, o) for v, o in zip(values, outs)])
    tape.structure.advance()
    return out


# ---------------------------------------------------------------- scopes

@contextlib.contextmanager
def record() -> Iterator[None]:
    """Record the ops on Tensors in the body onto a tape for backward.

    The outermost `record()` starts a fresh tape (DyNet's reset each iteration). A Tensor
    recorded under an earlier tape that is still alive brings its history along (its ops
    are copied); one whose tape was freed is an input, fed its value.
    """
    st = _state
    prev = st.recording
    if st.depth == 0:
        st.tape = Tape()
    st.depth += 1
    st.recording = True
    try:
        yield
    finally:
        st.depth -= 1
        st.recording = prev


@contextlib.contextmanager
def pause() -> Iterator[None]:
    """Compute without recording inside a `record()` scope."""
    st = _state
    prev = st.recording
    st.recording = False
    try:
        yield
    finally:
        st.recording = prev


@contextlib.contextmanager
def _recording_onto(tape: Tape) -> Iterator[None]:
    st = _state
    prev = st.recording, st.tape
    st.recording, st.tape = True, tape
    try:
        yield
    finally:
        st.recording, st.tape = prev


def forget(t: Tensor) -> None:
    """`t` becomes a new variable (attach_grad): ops recorded from now on read it as a new
    input of the tape, as MXNet's attach_grad makes a new autograd node."""
    for tape in (_state.tape, t._tape):
        if tape is not None:
            if tape.leaves.pop(id(t), None) is not None:
                tape.params = [p for p in tape.params if p[0] is not t]
    t._tape = t._var = None


#: PyTorch's name for `pause`: `with sg.autograd.no_grad(): w -= lr * w.grad`.
no_grad = pause

_INPLACE = {"sub": "-=", "add": "+=", "mul": "*=", "truediv": "/="}


def inplace(t: Tensor, other: Any, op: str) -> Tensor:
    """`t -= other` (and `+=`, `*=`, `/=`): recorded like `t - other` (a new Tensor) while
    recording; otherwise `t`'s array is replaced in place, keeping its shape, dtype and
    `attach_grad` (an optimizer's step under `no_grad()`). A recorded result updated in
    place loses its history: later recordings read its new value as a constant."""
    new = methods.BINARY[op](t, other)
    if _state.recording:
        return new
    sym = _INPLACE[op]
    tape = _state.tape
    if _state.depth and tape is not None and not tape.freed and id(t) in tape.leaves:
        raise SrcgradError(f"{t.name or 'tensor'} {sym} ...: the recording in progress read this "
                           "tensor; update it after backward or outside `record()`",
                           loc=user_location())
    if new.shape != t.shape:
        raise SrcgradError(f"{sym}: the result has shape {new.shape}, but the tensor updated in "
                           f"place has shape {t.shape}", loc=user_location())
    if not np.can_cast(new.dtype, t.dtype, "same_kind"):
        raise SrcgradError(f"{sym}: the result is {new.dtype.name}, which the {t.dtype.name} "
                           "tensor updated in place cannot hold", loc=user_location())
    t._value = new._value.astype(t.dtype)
    t._tape = t._var = None
    return t


def is_recording() -> bool:
    """True inside `record()` (and not inside `pause()`)."""
    return _state.recording


def tape() -> Program:
    """The Program of the current recording, or of the last one."""
    t = _state.tape
    if t is None:
        raise SrcgradError("sg.autograd.tape(): nothing was recorded yet in this thread; record "
                           "ops inside `with sg.autograd.record():`", loc=user_location())
    return t.program


# ---------------------------------------------------------------- backward

def backward(heads: Tensor | Sequence[Tensor], head_grads: Any = None, retain_graph: bool = False,
             create_graph: bool = False) -> None:
    """Write the gradients of `heads` (seeded with `head_grads`, default ones for a scalar
    head) into the `.grad` of every attached Tensor on their tape, per its `grad_req`.

    Without `retain_graph` the tape is freed afterwards. With `create_graph` the backward
    ops are recorded onto the tape (and the tape kept), so the gradients can be
    differentiated again.
    """
    heads, head_grads = _listed(heads, head_grads)
    _backward(heads, head_grads, None, retain_graph, create_graph)


def grad(heads: Tensor | Sequence[Tensor], variables: Tensor | Sequence[Tensor],
         head_grads: Any = None, retain_graph: bool = False,
         create_graph: bool = False) -> list[Tensor]:
    """The gradients of `heads` with respect to `variables` (attached Tensors), returned
    instead of written to `.grad`."""
    heads, head_grads = _listed(heads, head_grads)
    variables = [variables] if isinstance(variables, Tensor) else list(variables)
    grads = _backward(heads, head_grads, variables, retain_graph, create_graph)
    return grads or []


def _listed(heads: Any, head_grads: Any) -> tuple[list, list]:
    if isinstance(heads, Tensor):
        return [heads], [head_grads]
    heads = list(heads)
    if head_grads is None:
        return heads, [None] * len(heads)
    head_grads = list(head_grads) if isinstance(head_grads, (list, tuple)) else [head_grads]
    if len(head_grads) != len(heads):
        raise GradientError(f"backward: {len(head_grads)} head gradients for {len(heads)} heads",
                            loc=user_location())
    return heads, head_grads


def _backward(heads: list, head_grads: list, variables: list | None, retain_graph: bool,
              create_graph: bool) -> list[Tensor] | None:
    tape, hv = _heads_tape(heads)
    seeds = [_seed(h, v, g, create_graph) for h, v, g in zip(heads, hv, head_grads)]
    targets = _targets(tape, variables)
    xs = [v for _, v in targets]
    if create_graph:
        grads = [Tensor(jnp.zeros(t.shape, t.dtype)) if g is None else g
                 for (t, _), g in zip(targets, _run_recorded(tape, hv, seeds, xs))]
    else:
        grads = [Tensor(jnp.zeros(t.shape, t.dtype) if g is None else g)
                 for (t, _), g in zip(targets, _run(tape, hv, seeds, xs))]
    if not (retain_graph or create_graph):
        tape.free()
    if variables is not None:
        return grads
    for (t, _), g in zip(targets, grads):
        if t.grad_req == "add" and t.grad is not None:
            if create_graph:
                with _recording_onto(tape):
                    t.grad = t.grad + g
            else:
                t.grad = Tensor(t.grad._value + g._value)
        else:
            t.grad = g
    return None


def _heads_tape(heads: list) -> tuple[Tape, list[Variable]]:
    """The tape the heads were recorded on and their Variables there. A head that is an
    attached input itself (`return a`) is that input, as in PyTorch: its gradient is the
    seed."""
    tape: Tape | None = None
    if not heads:
        raise GradientError("backward: no heads given", loc=user_location())
    for i, h in enumerate(heads):
        if not isinstance(h, Tensor):
            raise GradientError(f"backward: head {i} is a {type(h).__name__}, not an sg.Tensor",
                                loc=user_location())
        if (h._tape is None or h._tape.freed) and h.grad_req is not None:
            continue
        if h._tape is None or h._tape.freed:
            what = "the head" if len(heads) == 1 else f"head {i}"
            raise GradientError(NOT_IN_GRAPH.format(what=f"{what} ({h.dtype.name}{list(h.shape)})"),
                                loc=user_location())
        if tape is None:
            tape = h._tape
        elif h._tape is not tape:
            raise GradientError(f"backward: head {i} was recorded in another record() scope than "
                                "head 0; differentiate heads of one recording together",
                                loc=user_location())
    if tape is None:  # every head is an attached input
        current = _state.tape
        tape = current if current is not None and not current.freed else Tape()
    return tape, [h._var if h._tape is tape else tape.var_of(h) for h in heads]


def _seed(h: Tensor, var: Variable, g: Any, create_graph: bool) -> Any:
    """None (ones, for a scalar head), an array, or (create_graph) a Tensor to record."""
    name = var.name  # type: ignore[union-attr]
    if g is None:
        if math.prod(var.shape) != 1:  # type: ignore[union-attr]
            raise GradientError(f"backward: the head {name} is not a scalar ({h.dtype.name}"
                                f"{list(h.shape)}): pass head_grad, an array of shape {h.shape}",
                                loc=user_location())
        if not dtypes.is_inexact(var.dtype):  # type: ignore[union-attr]
            raise GradientError(f"backward: the head {name} is {h.dtype.name}, not floating "
                                "point", loc=user_location())
        return None
    value = g._value if isinstance(g, Tensor) else jnp.asarray(g)
    if tuple(value.shape) != h.shape:
        raise GradientError(f"backward: the head gradient has shape {tuple(value.shape)}, but "
                            f"the head {name} has shape {h.shape}", loc=user_location())
    if create_graph and isinstance(g, Tensor):
        return g if g.dtype == h.dtype else g.astype(h.dtype)
    return value.astype(h.dtype)


def _targets(tape: Tape, variables: list | None) -> list[tuple[Tensor, Variable | None]]:
    """The attached Tensors to differentiate and their input Variables (None: not read)."""
    if variables is None:
        out = [p for p in tape.params if p[0].grad_req in _WRITTEN]
        if not out:
            raise GradientError("backward: there are no inputs in the computational graph that "
                                "require gradients: call attach_grad() on an input before "
                                "recording the ops that read it", loc=user_location())
        return out
    out = []
    for i, t in enumerate(variables):
        if not isinstance(t, Tensor) or t.grad_req is None:
            raise GradientError(f"Cannot differentiate with respect to the {i + 1}-th variable "
                                "because it does not require gradient: call attach_grad() on it "
                                "before recording the ops that read it", loc=user_location())
        hit = tape.leaves.get(id(t))
        out.append((t, hit[1] if hit is not None and hit[1].kind == "param" else None))
    return out


def _run(tape: Tape, heads: list[Variable], seeds: list, xs: list[Variable | None]) -> list[Any]:
    """The gradients' values, from the backward cached on the tape's node (its structure)."""
    st = tape.structure
    node = st.advance()
    num = st.num
    slot = st.trie.slot((node, tuple([num[h] for h in heads]),
                         tuple([None if s is None else (s.shape, s.dtype) for s in seeds]),
                         tuple([-1 if x is None else num[x] for x in xs])))
    entry = slot.entry
    if entry is None:
        with slot.lock:
            entry = slot.entry
            if entry is None:
                entry = slot.entry = _build(tape, heads, seeds, xs, num)
    values, order = tape.values, st.order
    fed = [values[order[i]] for i in entry.feeds] + [s for s in seeds if s is not None]
    outs = iter(entry.fn(*fed))
    return [next(outs) if r else None for r in entry.returned]


def _build(tape: Tape, heads: list[Variable], seeds: list, xs: list[Variable | None],
           num: dict[Variable, int]) -> Compiled:
    """Differentiate the tape (the grad ops are taken off again afterwards) and compile."""
    prog = tape.program
    block = prog.global_block()
    n_ops, n_inputs = len(block.ops), len(prog.inputs)
    try:
        hg = [None if s is None else block.new_var("head_grad", tuple(s.shape), np.dtype(s.dtype),
                                                   kind="data", stop_gradient=True) for s in seeds]
        prog.inputs.extend(v for v in hg if v is not None)
        wrt = [x for x in xs if x is not None]
        gs = gradients(heads, wrt, hg) if wrt else []
        got = dict(zip(wrt, gs))
        fetch = [g for g in gs if g is not None]
        known = set(tape.values).union(v for v in hg if v is not None)
        ops, feeds = plan(block.ops, fetch, known)
        fwd = sorted((v for v in feeds if v in num), key=num.__getitem__)
        compiled = emit(prog, ops, fwd + [v for v in hg if v is not None], fetch)
        returned = [x is not None and got.get(x) is not None for x in xs]
        return Compiled(compiled[0], [num[v] for v in fwd], returned, compiled[1])
    finally:
        del block.ops[n_ops:]
        del prog.inputs[n_inputs:]


def _run_recorded(tape: Tape, heads: list[Variable], seeds: list,
                  xs: list[Variable | None]) -> list[Tensor | None]:
    """create_graph: the grad ops stay on the tape; their values come from a compiled
    program cached on the structure of the tape with them."""
    prog = tape.program
    block = prog.global_block()
    with program_guard(prog):
        hg = []
        for h, s in zip(heads, seeds):
            if s is None or isinstance(s, Tensor):
                hg.append(None if s is None else tape.var_of(s))
                continue
            v = block.new_var("head_grad", h.shape, h.dtype, kind="data", stop_gradient=True)
            prog.inputs.append(v)
            tape.know(v, s)
            hg.append(v)
        wrt = [x for x in xs if x is not None]
        got = dict(zip(wrt, gradients(heads, wrt, hg) if wrt else []))
    fetch = [got[x] for x in wrt if got[x] is not None]
    st = tape.structure
    node, num = st.advance(), st.num
    slot = st.trie.slot((node, "create_graph", tuple([num[g] for g in fetch])))
    entry = slot.entry
    if entry is None:
        with slot.lock:
            entry = slot.entry
            if entry is None:
                ops, feeds = plan(block.ops, fetch, set(tape.values))
                feeds.sort(key=num.__getitem__)
                fn, source = emit(prog, ops, feeds, fetch)
                entry = slot.entry = Compiled(fn, [num[v] for v in feeds], [], source)
    values = dict(zip(fetch, entry.fn(*[tape.values[st.order[i]] for i in entry.feeds])))
    out: list[Tensor | None] = []
    for x in xs:
        g = got.get(x) if x is not None else None
        out.append(None if g is None else tape.bind(values[g], g))
    return out


# ---------------------------------------------------------------- Tensor methods

tensors._autograd.update(_backward=_backward, forget=forget, inplace=inplace)
methods.install(Tensor)
register_tape(apply, _takes, (Tensor,))

__all__ = ["record", "pause", "no_grad", "is_recording", "backward", "grad", "tape", "compile_count", "Tape"]
