"""The eager interpreter: an op called on concrete arrays outside any trace computes with JAX.

`srcgrad.dispatch` hands it the calls that are neither traced nor recorded. Each call is
traced once per signature into a one-call Program, lowered by srcgrad's own pipeline and
jitted, as jax.numpy's own functions are; later calls run it on the arrays directly (JAX
tracers of an outer jax.jit, grad or vmap included: the call joins their computation).

The signature is the argument leaves in order: an array by shape and dtype, a `Weak` number
(a Python number in an operand position) by its Python type -- it is an input of the
program, fed its value -- and any other value (axes, shapes, flags) by type and value
(`cache.static_key`). Programs live in one bounded cache of the registry (`cache.py`).

Layer L5 (compiled): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax.core import Tracer

from ..base import dtypes
from ..core.builder import as_var
from ..base.cache import BoundedCache, register, static_key
from ..core.dispatch import Weak, on_device
from ..ir.program import Program, Variable, program_guard
from ..transforms.compile_options import nested_options

#: Compiled one-call programs, by call signature.
PROGRAMS = register("eager", BoundedCache(4096))


class OpProgram:
    """A compiled one-call program: `run(*arrays, *lifted weak numbers, *captured)` gives
    `(result leaves, _)`. Until its first call `run` is the jit wrapper that compiles it
    (`ran` is False); from then on JAX's jitted function itself. `kernels` holds what a
    caller derives from the program per signature (imperative mode's vjp kernels), so it
    lives and goes with the program."""

    __slots__ = (
        "run",
        "ran",
        "ahead",
        "charged",
        "out_tree",
        "weak",
        "captured",
        "avals",
        "inexact",
        "kernels",
        "_staged",
    )

    def __init__(
        self,
        run: Callable[..., Any],
        out_tree: Any,
        weak: tuple[tuple[int, np.dtype], ...],
        captured: tuple[Any, ...],
        avals: tuple[jax.ShapeDtypeStruct, ...],
        staged: Callable[[], Callable[..., Any]] | None = None,
    ):
        self.run = run
        #: Whether the program has run (is compiled).
        self.ran = False
        #: Whether it was compiled before its first call (`compile_ahead`).
        self.ahead = False
        #: Whether a compile of a whole tape was bought on account of this program's compile
        #: (imperative mode's cost rule counts that once: srcgrad/imperative/cost_rule.py).
        self.charged = False
        self.out_tree = out_tree
        #: Per lifted weak input, in input order: the index of its Weak among the call's,
        #: and the dtype it was given.
        self.weak = weak
        #: The arrays the traced code captured (an op's index constants), fed after the rest.
        self.captured = captured
        #: The result leaves' shapes and dtypes, and per result whether it is inexact.
        self.avals = avals
        self.inexact = tuple(dtypes.is_inexact(a.dtype) for a in avals)
        self.kernels: dict[Any, Any] = {}
        #: Makes the wrapper for calls inside a JAX trace, where `run` (compiled with
        #: options, transforms/compile_options.py's QUICK_OPTIONS) is refused; None: `run`.
        self._staged = staged

    def staged(self) -> Callable[..., Any]:
        """The program's wrapper for a call inside a JAX trace (a user's jax.jit, a chunk's
        program): JAX takes compile options at the top level only."""
        return self._staged() if self._staged is not None else self.run

    def call(self, *args: Any) -> Any:
        """`run(*args)` of a program that has run; inside a JAX trace, where JAX refuses
        `run`, by `staged()`."""
        try:
            return self.run(*args)
        except ValueError as e:
            return self.in_trace(e, args)

    def in_trace(self, error: ValueError, args: Sequence[Any]) -> Any:
        """The call of `args` that JAX refused with `error`, made again by `staged()` if it was
        refused for being inside a trace; any other error is raised."""
        if not nested_options(error):
            raise error
        return self.staged()(*args)

    def compile_ahead(self, avals: list[jax.ShapeDtypeStruct]) -> None:
        """Compile the program for arguments of these shapes and dtypes (its inputs, lifted
        weak numbers and captured arrays, as `run` takes them) without running it; its first
        call then only runs. Safe on a pool thread."""
        ahead = getattr(self.run, "ahead", None)
        if not self.ran and not self.ahead and ahead is not None and ahead(*avals):
            self.ahead = True

    def first_call(self, *args: Any) -> Any:
        """`run` for the first time (the compile), then JAX's jitted function from now on."""
        run = self.run
        try:
            outs = run(*args)
        except ValueError as e:
            return self.in_trace(e, args)
        if not self.ran:
            self.run = getattr(run, "jitted", run)
            self.ran = True
        return outs


def is_array(x: Any) -> bool:
    return isinstance(x, (np.ndarray, np.generic, jax.Array, jax.core.Tracer))


def signature(leaves: list) -> tuple[tuple, list, list]:
    """The key of the leaves, the arrays and the weak numbers' values, in order (an array
    may be a jax.ShapeDtypeStruct: its shape and dtype key it alike)."""
    parts, arrays, weak = [], [], []
    for leaf in leaves:
        if type(leaf) is Weak:
            parts.append(type(leaf.value))
            weak.append(leaf.value)
        elif is_array(leaf) or type(leaf) is jax.ShapeDtypeStruct:
            parts.append((leaf.shape, leaf.dtype))
            arrays.append(leaf)
        else:
            parts.append(static_key(leaf))
    return tuple(parts), arrays, weak


def run(fn: Callable[..., Any], leaves: list, tree: Any) -> Any:
    """`fn` called on the flattened arguments (arrays, Weak numbers and static values)."""
    parts, arrays, weak = signature(leaves)
    outs, out_tree, _ = evaluate(fn, leaves, tree, parts, arrays, weak)
    return jax.tree_util.tree_unflatten(out_tree, outs)


def evaluate(
    fn: Callable[..., Any], leaves: list, tree: Any, parts: tuple, arrays: list, weak: list
) -> tuple[Any, Any, list[tuple[int, np.dtype, jax.Array]]]:
    """`fn` on leaves whose `signature` is given: its result leaves, their tree, and each
    weak number the program lifted (its index among the weak ones, dtype and device value)."""
    prog = _program((fn, tree, parts, dtypes.x64()), fn, leaves, tree)
    if prog.weak:
        lifted = [(i, dt, on_device(weak[i], dt)) for i, dt in prog.weak]
        fed = [arr for _, _, arr in lifted]
    else:
        lifted = fed = []
    for a in arrays:
        if isinstance(a, Tracer):  # inside a user's jax.jit, grad or vmap: see `staged`
            outs, _ = prog.staged()(*arrays, *fed, *prog.captured)
            break
    else:
        if prog.ran:  # (constants alone may still be inside a user's jax.jit)
            outs, _ = prog.call(*arrays, *fed, *prog.captured)
        else:
            outs, _ = prog.first_call(*arrays, *fed, *prog.captured)
    return outs, prog.out_tree, lifted


def program(fn: Callable[..., Any], leaves: list, tree: Any, parts: tuple) -> OpProgram:
    """The program of a call whose `signature` is `parts`, lowered now if it is new, not run
    (an array leaf may be a jax.ShapeDtypeStruct): the results' shapes and dtypes, and the
    errors of a bad call, without computing anything."""
    return _program((fn, tree, parts, dtypes.x64()), fn, leaves, tree)


def _program(key: tuple, fn: Callable[..., Any], leaves: list, tree: Any) -> OpProgram:
    """The cached program of `key`, lowered and stored now if there is none."""
    prog = PROGRAMS.get(key)
    if prog is None:
        prog = PROGRAMS.put(key, _lower(fn, leaves, tree))
    return prog


def _lower(fn: Callable[..., Any], leaves: list, tree: Any) -> OpProgram:
    """Trace `fn` on fresh inputs in place of the array leaves and lower the one-call Program."""
    from ..transforms.lower_jax import lower_program

    prog = Program()
    block = prog.global_block()
    order = {id(leaf): i for i, leaf in enumerate(l for l in leaves if type(l) is Weak)}
    lifted: list[tuple[int, np.dtype]] = []
    weak_inputs: list[Variable] = []

    def lift(w: Weak, dt: np.dtype) -> Variable:
        v = block.new_var(f"w{len(weak_inputs)}", (), dt, kind="data", stop_gradient=True)
        weak_inputs.append(v)
        prog.inputs.append(v)  # after the arrays' inputs, which are made before the trace
        lifted.append((order[id(w)], dt))
        return v

    prog.lift_weak = lift
    traced = []
    for leaf in leaves:
        if is_array(leaf) or type(leaf) is jax.ShapeDtypeStruct:
            v = block.new_var(
                f"x{len(prog.inputs)}",
                tuple(leaf.shape),
                dtypes.canonical(np.dtype(leaf.dtype)),
                kind="data",
                stop_gradient=True,
                exact_name=True,
            )
            prog.inputs.append(v)
            leaf = v
        traced.append(leaf)
    with program_guard(prog):
        args, kwargs = jax.tree_util.tree_unflatten(tree, traced)
        out = fn(*args, **kwargs)
        out_leaves, out_tree = jax.tree_util.tree_flatten(out)
        outs = [as_var(v) for v in out_leaves]
    avals = tuple(jax.ShapeDtypeStruct(v.shape, v.dtype) for v in outs)
    name = getattr(fn, "__name__", "op")
    lowered = lower_program(prog, list(prog.inputs) + prog.captures, outs, [], name=f"eager_{name}")
    captured = tuple(
        np.asarray(value, v.dtype) if not isinstance(value, jax.Array) else value
        for v, value in zip(prog.captures, prog.capture_values)
    )
    prog.dispose()
    picks = lowered.forwarded
    if outs and None not in picks:  # every result is an input as it is: nothing to run
        op = OpProgram(_forwarding(picks), out_tree, tuple(lifted), captured, avals)
        op.ran = True
        return op
    return OpProgram(
        lowered.jitted(quick=True), out_tree, tuple(lifted), captured, avals, lowered.jitted
    )


def _forwarding(picks: tuple[int | None, ...]) -> Callable[..., Any]:
    """`run` of a program whose results are its inputs `picks` as they are (the vjp of `add`
    where no cotangent was gathered: the cotangent twice): no XLA program to dispatch. A
    host array is put on the device, as the program's call would."""

    def run(*args: Any) -> tuple[tuple, tuple]:
        return tuple([_device(args[i]) for i in picks]), ()

    return run


def _device(x: Any) -> Any:
    return x if isinstance(x, (jax.Array, jax.core.Tracer)) else jax.numpy.asarray(x)
