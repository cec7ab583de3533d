"""`Transformed`: a traced function that runs inline on traced values and, on arrays, traces,
differentiates, lowers and jax.jits its program, cached per input signature (the public
wrappers `sg.grad` & co. are srcgrad/api/functional.py).

Layer L5 (compiled): see docs/design.md.
"""

from __future__ import annotations

import functools
import inspect
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..base import dtypes, conversion as hooks
from ..core.builder import as_var
from ..base.cache import (
    CACHE,
    Slot,
    binding_reader,
    bindings_check,
    on_forget,
    same_bindings,
    static_key,
)
from ..base.config import config
from ..core.dispatch import tracing_leaves
from ..core.builder import input_var
from ..base.errors import SrcgradError, located, user_location
from ..ir.program import OPEN_SCOPES, Program, current_program, program_guard
from ..base.traceback_filter import leave_out_internal_frames
from ..core.verify import check
from .arguments import arg_names, as_vars, hashable, leaf_array, leaf_dtype, static_positions

from ..transforms.checks import lift_checks
from ..transforms.control_grad import INITIAL_CAPACITY
from ..transforms.loading import SHALLOW_NESTING, Lowered, collection_paused
from ..transforms.lower_jax import lower_program

#: The tracers of a jax.jit / make_jaxpr trace. Should a JAX release stop exposing them, no
#: tracer matches and every traced call goes through a nested jit: correct, a little slower
#: to compile.
_JaxprTracer: Any = getattr(jax.interpreters.partial_eval, "DynamicJaxprTracer", type(None))


@dataclass
class _Entry:
    lowered: Lowered
    call: Callable[..., Any]
    out_tree: Any
    checks: list
    captures: list[tuple[Any, np.dtype, tuple]]
    bindings: tuple
    caps: dict[int, int] = field(default_factory=dict)
    watched: tuple = ()  # Program.watched: checks that turn False when it is stale

    @property
    def transient(self) -> bool:
        """True if it captured a tracer of the JAX trace it was traced in (an array JAX made
        while srcgrad traced under jax.jit): it serves that trace alone, never the cache."""
        return any(
            isinstance(leaf, jax.core.Tracer)
            for value, _, _ in self.captures
            for leaf in jax.tree_util.tree_leaves(value)
        )  # (an sg.Tensor holds one)

    def fed(self) -> list[Any] | None:
        """The captured arrays' current values; None when one changed shape (retrace)."""
        out = []
        for value, dt, shape in self.captures:
            if tuple(value.shape) != shape:
                return None
            if not isinstance(value, (np.ndarray, jax.Array)):  # an sg.Tensor: its array
                (value,) = jax.tree_util.tree_leaves(value)
            if isinstance(value, jax.Array):  # (a tracer too, in a transient entry)
                out.append(value if value.dtype == dt else value.astype(dt))
            else:
                out.append(np.asarray(value).astype(dt, copy=False))
        return out


class Transformed:
    """A traced function: called on Variables it records inline; on arrays it compiles and runs.

    Compiled programs are cached (`srcgrad.cache`) per function, transformation and input
    signature, so a fresh `sg.grad(f)` of the same `f` reuses them. `compilations` counts the
    programs this object compiled.
    """

    def __init__(
        self,
        inline: Callable[..., Any],
        fun: Callable[..., Any],
        name: str,
        jit: bool = True,
        params: tuple = (),
        static_argnums: int | Sequence[int] = (),
    ):
        self._inline = inline
        self._fun = fun
        self._name = name
        self._jit = jit
        self._static = static_positions(static_argnums, name)
        # What names the compiled program besides the arguments: the user's function (for
        # sg.grad(sg.grad(f)), the innermost one) and every transformation applied to it.
        inner = fun._key if isinstance(fun, Transformed) else ()
        self._base: Callable[..., Any] = fun._base if isinstance(fun, Transformed) else fun
        self._read = binding_reader(self._base)
        self._key = (name, jit, params, self._static) + inner
        self._own: dict[Any, Slot] = {}
        self._own_lock = threading.Lock()
        #: JAX's dispatch for repeated calls (`_fast_call`): (jax.jit of the pipeline, the
        #: bindings it was made under, their check, the pipeline); None before the first
        #: call, False where it cannot serve (captured arrays or loop records sized at run
        #: time).
        self._fast: (
            tuple[Callable[..., Any], tuple, Callable[[], bool], _Pipeline] | bool | None
        ) = None if jit else False
        self._weak = weakref.ref(self)
        self.compilations = 0
        _MADE.add(self)
        functools.update_wrapper(self, fun, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run on arrays (compiled), or record inline on Variables. A repeated call on flat
        arrays and numbers goes straight to JAX's dispatch of the compiled pipeline
        (`_fast_call`) once the function's bindings are seen unchanged."""
        try:
            fast = self._fast
            if (
                fast.__class__ is tuple
                and not kwargs
                and (not OPEN_SCOPES[0] or current_program() is None)
            ):
                for a in args:
                    if a.__class__ not in _FAST_TYPES:
                        break
                else:
                    if fast[2]():  # (the bindings are unchanged)
                        fast[3].caller = self._weak
                        try:
                            return fast[0](*args)
                        except _NotFast:  # a new signature whose program it cannot serve
                            self._fast = False
            return self._call(args, kwargs)
        except Exception as e:
            notes = getattr(e, "__notes__", None)  # srcgrad's error, without JAX's note
            if notes:
                notes[:] = [n for n in notes if "JAX has removed its internal frames" not in n]
            leave_out_internal_frames(e)
            raise

    def _call(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        if kwargs:
            args = self._positional(args, kwargs)
        static = self._static_positions(args) if self._static else frozenset()
        leaves = jax.tree_util.tree_leaves(args)
        if tracing_leaves(leaves):
            inline = hooks.user_fn(self._inline)
            return inline(*[a if i in static else as_vars(a) for i, a in enumerate(args)])
        if not static and self._fast is not False:
            out = self._fast_call(args, leaves)
            if out is not _SLOW:
                return out
        return self._run(args, static)

    def _bindings(self) -> tuple:
        """`cache.bindings` of the user's function, read by the reader made once."""
        read = self._read
        return read() if read is not None else ()

    def _fast_call(self, args: tuple, leaves: list) -> Any:
        """The call served by JAX's own dispatch: the `jax.jit` of this function's `_Pipeline`,
        which runs srcgrad's trace, transform and lowering when JAX traces (once per input
        signature), so a repeated call costs what a jax.jit call does, plus the check that
        the globals and closure cells the function reads are the same objects (`bindings`).
        Calls on JAX tracers, on other leaves than arrays and numbers, and programs that read
        captured arrays (fed their current values on every call), size loop records at run
        time, watch another function's globals (`sg.from_jax`) or nest deeply take the full
        path (`_run`); `_SLOW` says so."""
        for leaf in leaves:
            if type(leaf) not in _FAST_TYPES and not isinstance(leaf, np.generic):
                return _SLOW
        fast = self._fast
        if fast is None or not fast[2]():  # (the bindings changed)
            now = self._bindings()
            pipeline = self._pipeline(now)
            if pipeline.slow:
                self._fast = False
                return _SLOW
            fast = self._fast = (pipeline.jitted, now, bindings_check(self._base, now), pipeline)
        fast[3].caller = self._weak
        try:
            return fast[0](*args)
        except _NotFast:
            self._fast = False
            return _SLOW

    def _pipeline(self, now: tuple) -> _Pipeline:
        """The `_Pipeline` of this function and transformation traced under the bindings
        `now` (made, or remade after the bindings changed, under the cache slot's lock)."""
        slot = self._slot(_PIPELINE)
        with slot.lock:
            pipeline = slot.entry
            if pipeline is None or not same_bindings(pipeline.bindings, now):
                pipeline = slot.entry = _Pipeline(now, getattr(self._base, "__name__", "fn"))
            pipeline.users.add(self)
        return pipeline

    def records_loops(self) -> bool:
        """True if a program this object compiled sizes its loop records at run time (its
        calls then need concrete inputs: no jax.vmap over them)."""
        return any(s.entry is not None and s.entry.checks for s in self._own.values())

    def _positional(self, args: tuple, kwargs: dict[str, Any]) -> tuple:
        """Keyword arguments bound to their positions in the function's signature."""
        try:
            bound = inspect.signature(self._fun).bind(*args, **kwargs)
        except (TypeError, ValueError) as e:
            raise located(
                TypeError, f"{self._name}: cannot bind the keyword arguments {sorted(kwargs)}: {e}"
            ) from None
        if bound.kwargs:
            name = getattr(self._base, "__name__", "the function")
            raise located(
                TypeError,
                f"{self._name}: {name}'s keyword-only parameters "
                f"{sorted(bound.kwargs)} cannot be passed to a transformed function "
                "(its inputs are positional): bind them first "
                f"(functools.partial({name}, {sorted(bound.kwargs)[0]}=...)), or make "
                "them positional (static_argnums for Python values)",
            )
        return bound.args

    def _static_positions(self, args: tuple) -> frozenset[int]:
        """The positions of `args` that `static_argnums` names (negative ones from the end)."""
        if not self._static:
            return frozenset()
        out = set()
        for i in self._static:
            j = i + len(args) if i < 0 else i
            if not 0 <= j < len(args):
                raise SrcgradError(
                    f"{self._name}: static_argnums {i} but only {len(args)} arguments were given",
                    loc=user_location(),
                )
            out.add(j)
        return frozenset(out)

    def trace(
        self, *args: Any, capacities: dict[int, int] | None = None
    ) -> tuple[Program, list, Any, Any]:
        """The Program for these example arguments, its inputs, output leaves and output tree
        (traced again with its Python control flow converted if it needs it: srcgrad.convert)."""
        return hooks.trace_converting(lambda: self._trace(args, capacities))

    def _trace(
        self, args: tuple, capacities: dict[int, int] | None
    ) -> tuple[Program, list, Any, Any]:
        static = self._static_positions(args)
        dynamic = tuple(None if i in static else a for i, a in enumerate(args))
        leaves, tree = jax.tree_util.tree_flatten(dynamic)
        paths = [p for p, _ in jax.tree_util.tree_flatten_with_path(dynamic)[0]]
        names = arg_names(self._fun, dynamic, paths)
        prog = Program()
        prog.capacities = dict(capacities or {})
        with program_guard(prog):
            ins = []
            for i, (n, l) in enumerate(zip(names, leaves)):
                impl = dtypes.key_impl(l)  # a typed PRNG key: an input of its uint32 data
                shape, dt = (
                    (np.shape(l), leaf_dtype(l))
                    if impl is None
                    else (np.shape(l) + tuple(impl.key_shape), np.dtype(np.uint32))
                )
                ins.append(input_var(n if n not in prog._taken else f"{n}_{i}", shape, dt, "data"))
                ins[-1].stop_gradient = False
                if impl is not None:
                    prog.key_data[ins[-1]] = impl
            traced = jax.tree_util.tree_unflatten(tree, ins)
            inline = hooks.user_fn(self._inline)
            out = inline(*[args[i] if i in static else a for i, a in enumerate(traced)])
            out_leaves, out_tree = jax.tree_util.tree_flatten(out)
            out_vars = [as_var(v) for v in out_leaves]
        check(prog, "tracing")
        return prog, ins, out_vars, out_tree

    def lower(
        self, *args: Any, capacities: dict[int, int] | None = None
    ) -> tuple[Lowered, Any, list]:
        lowered, out_tree, checks, _, _ = self._lower(args, capacities)
        return lowered, out_tree, checks

    def _lower(
        self, args: tuple, capacities: dict[int, int] | None
    ) -> tuple[Lowered, Any, list, list[tuple[Any, np.dtype, tuple]], tuple]:
        """`lower`, plus the captured arrays the compiled function takes after the arguments
        and the program's staleness checks (`Program.watched`)."""
        with collection_paused():
            prog, ins, outs, out_tree = self.trace(*args, capacities=capacities)
            lift_checks(prog)
            name = getattr(self._fun, "__name__", "fn")
            checks = prog.capacity_checks
            lowered = lower_program(
                prog,
                ins + prog.captures,
                outs,
                [v for _, v, _ in checks],
                name=name if self._name in ("jit", "trace") else f"{name}_{self._name}",
            )
            captures = [
                (value, v.dtype, v.shape) for v, value in zip(prog.captures, prog.capture_values)
            ]
            watched = tuple(prog.watched)
            prog.dispose()
            return lowered, out_tree, checks, captures, watched

    def _build(self, args: tuple, caps: dict[int, int], now: tuple) -> _Entry:
        lowered, out_tree, checks, captures, watched = self._lower(args, caps)
        with self._own_lock:
            self.compilations += 1
        call = lowered.jitted() if self._jit else _eager(lowered.eager_fn())
        return _Entry(lowered, call, out_tree, checks, captures, now, dict(caps), watched)

    def _slot(self, key: Any) -> Slot:
        """The cache slot of `key`, remembered on this object after the first look-up."""
        slot = self._own.get(key)
        if slot is None:
            # None for a callable that cannot be held weakly: then cached on this object only.
            slot = CACHE.slot(self._base, (self._key, key)) or Slot()
            with self._own_lock:
                slot = self._own.setdefault(key, slot)
        return slot

    def _entry(
        self, slot: Slot, args: Callable[[], tuple], now: tuple, grow: dict[int, int] | None = None
    ) -> tuple[_Entry, list]:
        """The slot's entry (built under its lock if missing, stale or too small for `grow`)
        and the captured arrays to feed it. `now` is what the function reads by name
        (`cache.bindings`): an entry traced when those were other objects is stale."""
        entry = slot.entry
        fed = _usable(entry, now)
        if fed is not None and not _needs(entry, grow):
            return entry, fed
        with slot.lock:
            entry = slot.entry
            fed = _usable(entry, now)
            if fed is None or _needs(entry, grow):
                caps = dict(entry.caps) if entry is not None and fed is not None else {}
                for lid, cap in (grow or {}).items():
                    caps[lid] = max(caps.get(lid, 0), cap)
                entry = self._build(args(), caps, now)
                if not entry.transient:
                    slot.entry = entry
                fed = entry.fed()
                if fed is None:
                    raise SrcgradError(
                        f"{self._name}: a captured array changes shape while it is traced",
                        loc=user_location(),
                    )
        return entry, fed

    def _run(self, args: tuple, static: frozenset[int], fast: bool = False) -> Any:
        if static:
            statics = tuple(static_key(hashable(args[i], i, self._name)) for i in sorted(static))
            dynamic = tuple(None if i in static else a for i, a in enumerate(args))
        else:
            statics, dynamic = (), args
        leaves, tree = jax.tree_util.tree_flatten(dynamic)
        impls = tuple(dtypes.key_impl(l) for l in leaves)
        keyed = any(i is not None for i in impls)
        # A typed PRNG key is fed as its uint32 data (and traced from the key).
        arrays = [
            leaf_array(l) if i is None else jax.random.key_data(l) for l, i in zip(leaves, impls)
        ]
        key = (
            statics,
            tree,
            tuple((np.shape(a), leaf_dtype(a)) for a in arrays),
            dtypes.x64(),
            config.max_loop_records,
        ) + ((impls,) if keyed else ())

        def call_args() -> tuple:
            """The arguments to trace with: the arrays (and keys), the static values in their
            places."""
            traced = jax.tree_util.tree_unflatten(
                tree,
                [l if i is not None else a for a, l, i in zip(arrays, leaves, impls)]
                if keyed
                else arrays,
            )
            return tuple(args[i] if i in static else a for i, a in enumerate(traced))

        slot = self._slot(key)
        now = self._bindings()
        entry, fed = self._entry(slot, call_args, now)
        if fast and (
            entry.checks
            or entry.captures
            or entry.watched
            or entry.lowered.nesting > SHALLOW_NESTING
        ):
            # (a deep program's compile needs the recursion room jitted() makes). An entry
            # that captured this trace's tracers (a constant computed by JAX while srcgrad
            # traced, as from_jax's key data) was never stored; one that captured arrays stays.
            if entry.transient:
                with self._own_lock:
                    self.compilations -= 1  # (XLA never compiled it)
            raise _NotFast
        if entry.checks and any(isinstance(a, jax.core.Tracer) for a in (*arrays, *fed)):
            op = entry.checks[0][2]
            raise SrcgradError(
                f"{self._name}: this while loop has a data-dependent trip count and no max_iters, "
                "so its gradient needs concrete inputs to size its records; inside jax.jit (or "
                "vmap) pass max_iters=N to sg.while_loop (or sg.fori_loop)"
                + hooks.loop_hint(op.loc),
                op="while",
                loc=op.loc,
            )
        if self._jit and _in_jit_trace(arrays):
            # The ops join the caller's jaxpr, as jax.grad's would: a nested jit would be one
            # more call for XLA to compile and inline. Under an eager vmap or jax.grad the
            # nested jit stays, so that the gradient still runs as one compiled program.
            outs, _ = entry.lowered.inline(
                *arrays, *map(jax.numpy.asarray, fed)
            )  # no NumPy in a trace
            return jax.tree_util.tree_unflatten(entry.out_tree, list(outs))
        while True:
            outs, counts = entry.call(*arrays, *fed)
            grow = _capacities_needed(entry, counts) if entry.checks else None
            if not grow:
                return jax.tree_util.tree_unflatten(entry.out_tree, list(outs))
            entry, fed = self._entry(slot, call_args, now, grow)


class _NotFast(Exception):
    """Raised while JAX traces the fast path, for a program it cannot serve."""


#: The cache key, beside the input signatures, of a function and transformation's pipeline.
_PIPELINE = "jax.jit pipeline"


class _Pipeline:
    """What the fast path's `jax.jit` traces, one per function, transformation and bindings,
    kept in the compile cache: a fresh `sg.grad(f)` of the same `f` reuses JAX's compiled
    executable. It holds the `Transformed` objects that call it weakly (never the user's
    function, whose lifetime keys the cache); a trace runs `_run` on the caller, or on any
    of them (they are alike but for their `compilations`). `caller` is the `Transformed`
    whose call last went to it, weakly (a plain attribute, not a thread's: with two of them
    calling it from two threads, a trace may count its build on the other)."""

    def __init__(self, bindings: tuple, name: str) -> None:
        self.bindings = bindings
        self.users: weakref.WeakSet[Transformed] = weakref.WeakSet()
        self.slow = False  # a program the fast path cannot serve (`_NotFast`)
        self.caller: Callable[[], Transformed | None] = lambda: None

        def pipeline(*args: Any) -> Any:
            return self.run(args)

        pipeline.__name__ = pipeline.__qualname__ = name
        self.jitted = jax.jit(pipeline)

    def run(self, args: tuple) -> Any:
        caller = self.caller()
        if caller is None or caller not in self.users:
            caller = next(iter(self.users))
        try:
            return caller._run(args, frozenset(), fast=True)
        except _NotFast:
            self.slow = True
            raise


_SLOW = object()
#: Every transformation made: `sg.clear_caches()` and `sg.no_convert(f)` make them forget
#: what they hold beside the cache (the slots they looked up, the fast path's jax.jit).
_MADE: weakref.WeakSet[Transformed] = weakref.WeakSet()


def _forget(fun: Callable[..., Any] | None) -> None:
    """Make every transformation of `fun` (of every function: None) look its programs up in
    the cache again on its next call."""
    for t in list(_MADE):
        if fun is None or t._base is fun:
            with t._own_lock:
                t._own.clear()
            if t._fast.__class__ is tuple:
                t._fast = None


on_forget(_forget)

#: The leaf types the fast path takes (concrete arrays and numbers; never a JAX tracer).
_FAST_TYPES = frozenset(
    {
        type(jax.numpy.zeros(())),
        np.ndarray,
        bool,
        int,
        float,
        complex,
        *(np.dtype(c).type for c in "?bhilqBHILQefdFD"),
    }
)


def _usable(entry: _Entry | None, now: tuple) -> list[Any] | None:
    """The arrays to feed `entry` after the arguments, or None if it must be traced again."""
    if (
        entry is None
        or not same_bindings(entry.bindings, now)
        or not all(current() for current in entry.watched)
    ):
        return None
    return entry.fed()


def _needs(entry: _Entry, grow: dict[int, int] | None) -> bool:
    """True if `entry` records fewer iterations of a loop than `grow` asks for."""
    return bool(grow) and any(
        entry.caps.get(lid, INITIAL_CAPACITY) < cap for lid, cap in grow.items()
    )


def _capacities_needed(entry: _Entry, counts: Sequence[Any]) -> dict[int, int]:
    """Loop id -> the capacity its records need, for loops that ran past their capacity: the
    trip count measured, rounded up to a power of two (so a stable trip count recompiles
    once). A loop that reached `config.max_loop_records` is an error."""
    limit = config.max_loop_records
    grow: dict[int, int] = {}
    for (lid, _, op), c in zip(entry.checks, counts):
        c = int(c)
        if c > limit:
            raise SrcgradError(
                f"the loop did not stop: it reached {c} iterations, past "
                f"sg.config.max_loop_records = {limit}, with max_iters={op.attrs['max_iters']}; "
                "its gradient records every iteration, so pass max_iters to sg.while_loop (or "
                "raise sg.config.max_loop_records for a longer loop)",
                op="while",
                loc=op.loc,
            )
        if c > entry.caps.get(lid, INITIAL_CAPACITY):
            grow[lid] = max(grow.get(lid, 0), min(1 << (c - 1).bit_length(), limit))
    return grow


def _in_jit_trace(arrays: Sequence[Any]) -> bool:
    """True when the traced arrays belong to a jax.jit (make_jaxpr) trace itself, not to a
    vmap or grad transformation running on top of one or eagerly."""
    tracers = [a for a in arrays if isinstance(a, jax.core.Tracer)]
    return bool(tracers) and all(isinstance(t, _JaxprTracer) for t in tracers)


def _eager(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(*arrays: Any) -> Any:
        return fn(*[jax.numpy.asarray(a) for a in arrays])

    return run


__all__ = ["Transformed"]
