"""Imperative mode: MXNet's record/backward and a DyNet-style tape over srcgrad's pipeline.

    x = sg.tensor([1.0, 2.0]); x.attach_grad()
    with sg.autograd.record():          # a fresh tape per outermost record()
        y = sg.sum(sg.tanh(x) * x)      # computed now, and appended to the tape
    y.backward()                        # the tape differentiated
    x.grad                              # dy/dx

An op on Tensors outside `record()` computes its value eagerly (srcgrad/compiled/eager.py: one
jitted
call per op signature); while recording it appends a light entry to the tape
(srcgrad/imperative/tape.py: the call, the numbers of the values it read, its results' numbers) and
its
results are computed when read or by backward. Backward is tiered. A tape
whose structure (srcgrad/imperative/backward_whole.py: the calls, their wiring, shapes, dtypes,
static
arguments; never values) has been seen `sg.config.tape_compile_after` times is
differentiated whole: the entries are replayed into a Program, `gradients` (Fluid's
algorithm, transforms/backward.py) appends the grad ops, and the ops the gradients need
beyond the recorded values are lowered and jitted once for the structure, then fed each
recording's values. A structure seen fewer times is differentiated entry by entry
(srcgrad/imperative/backward_op_by_op.py), from per-op gradient programs cached by op and
signature, so a tape
of a new shape (a sentence of a new length) compiles no whole backward; its windows of
entries that recur (an RNN cell) run as compiled chunks of those programs
(srcgrad/imperative/backward_chunks.py).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import contextlib
import math
import threading
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ..base import dtypes
from ..compiled import eager
from ..base.config import config
from ..core.dispatch import TapeInterpreter
from ..base.errors import GradientError, SrcgradError, user_location
from ..ir.program import Program
from ..ops import methods
from .tape import Tape
from .backward_whole import FED, compile_count, key_of, run_whole
from .backward_chunks import run_op_by_op, windows
from . import cost_rule
from .cost_rule import RULE
from .tensor import Tensor
from ..core.verify import checks_enabled

_Tracer = jax.core.Tracer
#: The grad_reqs whose Tensors backward writes a gradient to.
_WRITTEN = ("write", "add")

NOT_IN_GRAPH = (
    "Cannot differentiate {what} because it is not in a computational graph. You "
    "need to record it: compute it inside `with sg.autograd.record():` to save the "
    "computational graph for backward. If you want to differentiate the same graph "
    "twice, you need to pass retain_graph=True to backward"
)


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


def takes(leaves: list) -> bool:
    """The dispatch's question: does imperative mode take this call? Yes while recording,
    and for any call on a Tensor."""
    if _state.recording:
        return True
    for leaf in leaves:
        if type(leaf) is Tensor:
            return True
    return False


def apply(fn: Callable[..., Any], leaves: list, tree: Any) -> Any:
    """An op call imperative mode takes (srcgrad.dispatch hands it here): recorded onto the
    tape while recording if it reads a Tensor (computed when needed), else computed now by
    the eager interpreter; its results as Tensors (under record() also those of a
    constructor: sg.zeros)."""
    tape = _active_tape()
    if tape is not None:
        reads = False
        for leaf in leaves:
            if type(leaf) is Tensor:
                if isinstance(leaf._v, _Tracer):
                    break  # values of a JAX trace (jax.jit of a function of Tensors)
                reads = True
            elif isinstance(leaf, _Tracer):
                break
        else:
            if reads:
                return tape.record(fn, leaves, tree)
    out = eager.run(fn, [l._value if type(l) is Tensor else l for l in leaves], tree)
    return Tensor(out) if isinstance(out, jax.Array) else jax.tree_util.tree_map(Tensor, out)


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
    t._tape = t._num = None


#: PyTorch's name for `pause`: `with sg.autograd.no_grad(): w -= lr * w.grad`.
no_grad = pause

_INPLACE = {"sub": "-=", "add": "+=", "mul": "*=", "truediv": "/="}


def check_update(t: Tensor, what: str) -> None:
    """A SrcgradError where the recording in progress read `t`: updating its array in place
    (`t -= ...` under pause(), `t.assign(...)`) would leave its backward differentiating at
    the old value. `what` shows the update after the tensor's name."""
    tape = _state.tape
    if _state.depth and tape is not None and not tape.freed and id(t) in tape.leaves:
        raise SrcgradError(
            f"{t.name or 'tensor'}{what}: the recording in progress read this "
            "tensor; update it after backward or outside `record()`",
            loc=user_location(),
        )


def inplace(t: Tensor, other: Any, op: str) -> Tensor:
    """`t -= other` (and `+=`, `*=`, `/=`): recorded like `t - other` (a new Tensor) while
    recording; otherwise `t`'s array is replaced in place, keeping its shape, dtype and
    `attach_grad` (an optimizer's step under `no_grad()`). A recorded result updated in
    place loses its history: later recordings read its new value as a constant."""
    new = methods.BINARY[op](t, other)
    if _state.recording:
        return new
    sym = _INPLACE[op]
    check_update(t, f" {sym} ...")
    if new.shape != t.shape:
        raise SrcgradError(
            f"{sym}: the result has shape {new.shape}, but the tensor updated in "
            f"place has shape {t.shape}",
            loc=user_location(),
        )
    if not np.can_cast(new.dtype, t.dtype, "same_kind"):
        raise SrcgradError(
            f"{sym}: the result is {new.dtype.name}, which the {t.dtype.name} "
            "tensor updated in place cannot hold",
            loc=user_location(),
        )
    t._value = new._value.astype(t.dtype)
    t._tape = t._num = None
    return t


def is_recording() -> bool:
    """True inside `record()` (and not inside `pause()`)."""
    return _state.recording


def tape() -> Program:
    """The Program of the current recording, or of the last one (its entries replayed)."""
    t = _state.tape
    if t is None:
        raise SrcgradError(
            "sg.autograd.tape(): nothing was recorded yet in this thread; record "
            "ops inside `with sg.autograd.record():`",
            loc=user_location(),
        )
    return t.program


# ---------------------------------------------------------------- backward


def backward(
    heads: Tensor | Sequence[Tensor],
    head_grads: Any = None,
    retain_graph: bool = False,
    create_graph: bool = False,
) -> None:
    """Write the gradients of `heads` (seeded with `head_grads`, default ones for a scalar
    head) into the `.grad` of every attached Tensor on their tape, per its `grad_req`.

    Without `retain_graph` the tape is freed afterwards. With `create_graph` the backward
    ops are recorded onto the tape (and the tape kept), so the gradients can be
    differentiated again.
    """
    heads, head_grads = _listed(heads, head_grads)
    run_backward(heads, head_grads, None, retain_graph, create_graph)


def grad(
    heads: Tensor | Sequence[Tensor],
    variables: Tensor | Sequence[Tensor],
    head_grads: Any = None,
    retain_graph: bool = False,
    create_graph: bool = False,
) -> list[Tensor]:
    """The gradients of `heads` with respect to `variables` (attached Tensors), returned
    instead of written to `.grad`."""
    heads, head_grads = _listed(heads, head_grads)
    variables = [variables] if isinstance(variables, Tensor) else list(variables)
    grads = run_backward(heads, head_grads, variables, retain_graph, create_graph)
    return grads or []


def _listed(heads: Any, head_grads: Any) -> tuple[list, list]:
    if isinstance(heads, Tensor):
        return [heads], [head_grads]
    heads = list(heads)
    if head_grads is None:
        return heads, [None] * len(heads)
    head_grads = list(head_grads) if isinstance(head_grads, (list, tuple)) else [head_grads]
    if len(head_grads) != len(heads):
        raise GradientError(
            f"backward: {len(head_grads)} head gradients for {len(heads)} heads",
            loc=user_location(),
        )
    return heads, head_grads


def run_backward(
    heads: list, head_grads: list, variables: list | None, retain_graph: bool, create_graph: bool
) -> list[Tensor] | None:
    """Differentiate `heads` (seeded with `head_grads`): into the attached Tensors' `.grad`
    (`variables` None), or returned for `variables` (autograd.grad)."""
    tape, hn = _heads_tape(heads)
    seeds = [_seed(h, g, create_graph) for h, g in zip(heads, head_grads)]
    targets = _targets(tape, variables)
    xs = [n for _, n in targets]
    if create_graph:
        with _recording_onto(tape):
            got = run_op_by_op(tape, hn, seeds, xs, create_graph=True)
        grads = [
            Tensor(jnp.zeros(t.shape, t.dtype)) if g is None else g
            for (t, _), g in zip(targets, got)
        ]
    else:
        grads = [
            Tensor(
                jnp.zeros(t.shape, t.dtype)
                if g is None
                else g
                if isinstance(g, jax.Array)
                else jnp.asarray(g)
            )  # a seed passed on
            for (t, _), g in zip(targets, _gradients(tape, hn, seeds, xs, retain_graph))
        ]
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


def _gradients(
    tape: Tape, heads: list[int], seeds: list, xs: list[int | None], retain: bool
) -> list[Any]:
    """The gradients' values, by the tier the cost rule picks for the tape's structure
    (srcgrad/imperative/cost_rule.py): its compiled whole backward once compiling has paid
    (at once if the tape is cold: op by op would compile a program per call), op by op
    before (chunks where recurring windows have paid). With `config.tape_compile_after` set,
    the fixed rule instead: whole from that sighting on (at once if the tape is `cold` and
    `config.tape_compile_cold`). A whole backward of a tape not computed yet computes its
    forward too, returning the results live Tensors hold (every one if the tape is
    `retain`ed). With SRCGRAD_ENABLE_CHECKS the other tier runs too and must agree."""
    forward = tape.wanted(retain) if tape.lazy else FED
    slot, paid = tape.structure.trie.visit(key_of(tape, heads, seeds, xs, forward))
    n = len(tape.entries)
    fixed = config.tape_compile_after
    if fixed is not None:
        whole = (
            slot.entry is not None
            or paid.runs + 1 >= fixed
            or (config.tape_compile_cold and cost_rule.cold(tape.entries))
        )
        paid.runs += 1
        got = (
            run_whole(tape, heads, seeds, xs, slot, forward)
            if whole
            else run_op_by_op(tape, heads, seeds, xs)
        )
    elif slot.entry is not None or RULE.whole(
        paid, n, lambda: cost_rule.never_run(tape.entries), config.tape_compile_cold
    ):
        whole = True
        run = lambda: run_whole(tape, heads, seeds, xs, slot, forward)
        if slot.entry is None:
            got = RULE.compiled(RULE.whole_compile, n, run)
        else:
            got, slower = RULE.fast_run(paid, run)
            if slower:
                slot.entry = None  # the compiled program ran slower: op by op from now on
    else:
        whole = False
        plan = windows(tape)
        got = RULE.op_by_op(
            paid,
            n,
            lambda: run_op_by_op(tape, heads, seeds, xs, plan=plan),
            any(w.chunk is not None for w in plan),
        )
    if checks_enabled():
        other = (
            run_op_by_op(tape, heads, seeds, xs)
            if whole
            else run_whole(tape, heads, seeds, xs, slot, forward)
        )
        _agree(got, other, "compiled" if whole else "op-by-op")
    return got


def _agree(got: list, other: list, tier: str) -> None:
    """SRCGRAD_ENABLE_CHECKS: the two backward tiers give the same gradients."""
    for i, (a, b) in enumerate(zip(got, other)):
        if a is None or b is None:  # no gradient on one side: the other must be zeros
            given = b if a is None else a
            if given is not None and np.any(np.asarray(given)):
                raise AssertionError(
                    f"backward: the {tier} tier and the other disagree on "
                    f"whether gradient {i} is zero"
                )
            continue
        a, b = np.asarray(a), np.asarray(b)
        tol = (
            1e-4
            if a.dtype in (np.float16, np.float32, np.complex64) or a.dtype.name == "bfloat16"
            else 1e-9
        )
        if a.shape != b.shape or not np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True):
            raise AssertionError(
                f"backward: the {tier} tier gives gradient {i} = {a}, the other tier {b}"
            )


def _heads_tape(heads: list) -> tuple[Tape, list[int]]:
    """The tape the heads were recorded on and their numbers there. A head that is an
    attached input itself (`return a`) is that input, as in PyTorch: its gradient is the
    seed."""
    tape: Tape | None = None
    if not heads:
        raise GradientError("backward: no heads given", loc=user_location())
    for i, h in enumerate(heads):
        if not isinstance(h, Tensor):
            raise GradientError(
                f"backward: head {i} is a {type(h).__name__}, not an sg.Tensor", loc=user_location()
            )
        if (h._tape is None or h._tape.freed) and h.grad_req is not None:
            continue
        if h._tape is None or h._tape.freed:
            what = "the head" if len(heads) == 1 else f"head {i}"
            raise GradientError(
                NOT_IN_GRAPH.format(what=f"{what} ({h.dtype.name}{list(h.shape)})"),
                loc=user_location(),
            )
        if tape is None:
            tape = h._tape
        elif h._tape is not tape:
            raise GradientError(
                f"backward: head {i} was recorded in another record() scope than "
                "head 0; differentiate heads of one recording together",
                loc=user_location(),
            )
    if tape is None:  # every head is an attached input
        current = _state.tape
        tape = current if current is not None and not current.freed else Tape()
    return tape, [h._num if h._tape is tape else tape.num_of(h) for h in heads]


def _seed(h: Tensor, g: Any, create_graph: bool) -> Any:
    """None (ones, for a scalar head), an array, or (create_graph) a Tensor to record."""
    if g is None:
        if math.prod(h.shape) != 1:
            raise GradientError(
                f"backward: the head is not a scalar ({h.dtype.name}"
                f"{list(h.shape)}): pass head_grad, an array of shape {h.shape}",
                loc=user_location(),
            )
        if not dtypes.is_inexact(h.dtype):
            raise GradientError(
                f"backward: the head is {h.dtype.name}, not floating point", loc=user_location()
            )
        return None
    value = g._value if isinstance(g, Tensor) else jnp.asarray(g)
    if tuple(value.shape) != h.shape:
        raise GradientError(
            f"backward: the head gradient has shape {tuple(value.shape)}, but "
            f"the head has shape {h.shape}",
            loc=user_location(),
        )
    if create_graph and isinstance(g, Tensor):
        return g if g.dtype == h.dtype else g.astype(h.dtype)
    return value.astype(h.dtype)


def _targets(tape: Tape, variables: list | None) -> list[tuple[Tensor, int | None]]:
    """The attached Tensors to differentiate and their input numbers (None: not read)."""
    if variables is None:
        out = [p for p in tape.params if p[0].grad_req in _WRITTEN]
        if not out:
            raise GradientError(
                "backward: there are no inputs in the computational graph that "
                "require gradients: call attach_grad() on an input before "
                "recording the ops that read it",
                loc=user_location(),
            )
        return out
    out = []
    for i, t in enumerate(variables):
        if not isinstance(t, Tensor) or t.grad_req is None:
            raise GradientError(
                f"Cannot differentiate with respect to the {i + 1}-th variable "
                "because it does not require gradient: call attach_grad() on it "
                "before recording the ops that read it",
                loc=user_location(),
            )
        hit = tape.leaves.get(id(t))
        out.append((t, hit[1] if hit is not None and tape.kinds[hit[1]] == "param" else None))
    return out


#: The tape interpreter that srcgrad/wiring.py gives the one dispatch.
INTERPRETER = TapeInterpreter(apply, takes, (Tensor,))

__all__ = [
    "record",
    "pause",
    "no_grad",
    "is_recording",
    "backward",
    "grad",
    "tape",
    "compile_count",
    "Tape",
]
