"""The traced form of a converted `if`: one `cond` op whose outputs are what its branches
change -- the names they assign, the items and attributes of the Python objects they change
(objects.py) and the flags of the exceptions they stage (raises.py). Each branch starts from
the state before the `if`.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..core.builder import active_program, as_var, emit
from ..base.errors import SrcgradError, SourceLoc
from ..ir.program import Block, Variable
from ..ops.creation import zeros
from ..ops.elementwise import astype, logical_not, not_equal
from ..ir.analysis import free_vars
from . import objects
from . import raises
from .jumps import DID_RET, RET
from .undefined import Undefined, undefined

BOOL = np.dtype(bool)
_ARRAYISH = (Variable, bool, int, float, np.ndarray, np.generic, jax.Array)
IFEXP = "_sg_ret_ifexp"
#: Loop-carried values that started as Python numbers, while a loop body is traced to find
#: their types: a branch that gives one another dtype promotes it, as JAX's weak types do.
#: (Keyed by id: a WeakSet would compare Variables with `==`, which builds an op.)
_WEAK: dict[int, "weakref.ref[Variable]"] = {}


def mark_weak(v: Variable) -> None:
    key = id(v)
    _WEAK[key] = weakref.ref(v, lambda _: _WEAK.pop(key, None))


def is_weak(v: Any) -> bool:
    """True for a Python number, or a Variable `mark_weak` marked."""
    if not isinstance(v, Variable):
        return True
    ref = _WEAK.get(id(v))
    return ref is not None and ref() is v


def predicate(p: Any, what: str, loc: SourceLoc | None) -> Variable:
    """A traced condition as a bool scalar (a number tests `!= 0`, as Python's truth)."""
    v = as_var(p)
    if v.shape != ():
        raise SrcgradError(
            f"the condition of this {what} is a traced {v.type_str()} array, which "
            "has no single truth value; reduce it with sg.any or sg.all",
            op=what,
            loc=loc,
        )
    return v if v.dtype == BOOL else not_equal(v, 0)


def label(name: str) -> str:
    """How an error names a joined place."""
    if name == RET:
        return "the return value"
    if name == IFEXP:
        return "the value of this conditional expression"
    return f"`{name}`"


def leaves_of(value: Any, name: str, what: str, loc: SourceLoc | None) -> tuple[list, Any]:
    leaves, tree = jax.tree_util.tree_flatten(value)
    for l in leaves:
        if not isinstance(l, _ARRAYISH):
            raise SrcgradError(
                f"{label(name)} holds a {type(l).__name__} that this {what} on a "
                "traced value cannot carry: only arrays, numbers and lists/tuples/"
                "dicts of them can be carried out of a converted branch or loop",
                op=what,
                loc=loc,
            )
    return leaves, tree


class _Fill:
    """The value of a place in a branch that raised: zeros of the other branch's type."""


FILL = _Fill()


class Branch:
    """One traced branch: its block, the names it returns, the contents of the objects after
    it (objects.Objects.now), its staged exceptions, and the staged exception it raised."""

    def __init__(self, block: Block):
        self.block = block
        self.values: list[Any] = []
        self.after: list[Any] = []
        self.pending: list[raises.Pending] = []
        self.raised: BaseException | None = None

    def frozen(self, value: Any, objs: objects.Objects) -> Any:
        """`value` with the objects it holds as this branch left them (fresh lists and dicts)."""
        after = {id(e.obj): (e, a) for e, a in zip(objs.entries, self.after)}

        def copy(v: Any, depth: int = 0) -> Any:
            found = after.get(id(v))
            if found is not None and depth < 100:
                e, a = found
                if e.kind == objects.LIST:
                    return [copy(x, depth + 1) for x in a]
                if e.kind == objects.DICT:
                    return {k: copy(x, depth + 1) for k, x in a}
            if isinstance(v, tuple) and depth < 100:
                return (
                    type(v)(*(copy(x, depth + 1) for x in v))
                    if hasattr(v, "_fields")
                    else tuple(copy(x, depth + 1) for x in v)
                )
            return v

        return copy(value)


def trace_branch(
    fn: Callable[..., tuple],
    state: tuple,
    objs: objects.Objects,
    parent: Block,
    side: str,
    what: str,
    loc: SourceLoc | None,
) -> Branch:
    """Trace `fn(*state)` in a new block: a user's `raise` in it is staged, any other
    exception is an error; the objects are back to their contents before it afterwards."""
    prog = parent.program
    br = Branch(prog.create_block(parent))
    try:
        with prog.block_guard(br.block), objects.traced_body(objs), raises.frame(br.block) as fr:
            try:
                br.values = list(fn(*state))
                br.after = objs.now()
            except Exception as e:
                if not raises.staged(e):
                    better = objects.frozen_array(e, objs, what, loc) or raises.failed_branch(
                        e, side, what, loc
                    )
                    if better is e:
                        raise
                    raise better from e
                br.raised = e
            br.pending = fr.pending
    finally:
        objs.restore()
    return br


def traced_if(
    pred: Any,
    true_fn: Callable[..., tuple],
    false_fn: Callable[..., tuple],
    state: tuple,
    names: Sequence[str],
    loc: SourceLoc | None,
    objs: objects.Objects | None = None,
    guard: bool = False,
) -> tuple:
    """`if pred:` on a traced `pred`: one `cond` op, its outputs the names the branches set,
    the object items they change and the flags of the exceptions they stage."""
    p = predicate(pred, "if", loc)
    prog = active_program("if")
    parent = prog.current_block()
    objs = objs if objs is not None else objects.Objects({})
    t = trace_branch(true_fn, state, objs, parent, "true branch", "if", loc)
    f = trace_branch(false_fn, state, objs, parent, "false branch", "if", loc)
    if t.raised is not None and f.raised is not None:
        _both_raise(p, t, f, objs, parent, loc)
    joins = Joins([t, f], objs, loc, names, guard)
    merged = list(state)
    for i, nm in enumerate(names):
        joins.name(i, nm, state[i], merged)
    contents = joins.join_objects()
    joins.flags()
    joins.emit(p, parent)
    for e, c in contents:
        objects.write(e.obj, e.kind, c())
    return tuple(merged)


def _both_raise(
    p: Variable, t: Branch, f: Branch, objs: objects.Objects, parent: Block, loc: SourceLoc | None
) -> None:
    """Both branches raise. Inside another traced branch or loop body, each exception is
    staged under its side of `p` and the rest of that body never runs (`raises.Staged`);
    outside, the `if` always raises: tracing stops with the true branch's exception when
    the two are of one type."""
    if raises.in_frame():
        joins = Joins([t, f], objs, loc)
        joins.flags()
        joins.emit(p, parent)
        raise raises.Staged()
    if type(t.raised) is type(f.raised):
        raise t.raised
    raise SrcgradError(
        f"both branches of this `if` on a traced value raise: "
        f"{type(t.raised).__name__}({t.raised}) and {type(f.raised).__name__}"
        f"({f.raised}); a traced condition would choose which one",
        op="if",
        loc=loc,
    )


class Joins:
    """The places two branches may give different values, each to come out of the `cond`
    (its label for errors, the two values, and where the merged value goes)."""

    def __init__(
        self,
        branches: list[Branch],
        objs: objects.Objects,
        loc: SourceLoc | None,
        names: Sequence[str] = (),
        guard: bool = False,
    ):
        self.branches, self.objs, self.loc, self.guard = branches, objs, loc, guard
        self.did_ret = list(names).index(DID_RET) if DID_RET in names else None
        self.places: list[tuple[str, Any, Any, Callable[[Any], None]]] = []
        self.pending: list[tuple[Any, Any, raises.Pending]] = []
        self.direct: list[tuple[int, raises.Pending]] = []  # (the side that raises, what)

    def add(self, name: str, a: Any, b: Any, sink: Callable[[Any], None]) -> None:
        self.places.append((name, a, b, sink))

    def name(self, i: int, nm: str, before: Any, merged: list) -> None:
        t, f = self.branches
        a = t.values[i] if t.raised is None else FILL
        b = f.values[i] if f.raised is None else FILL
        if a is FILL or b is FILL:
            kept = b if a is FILL else a
            if kept is before or undefined(kept):
                merged[i] = kept
                return
        elif a is b or (undefined(a) and undefined(b)):
            merged[i] = a
            return
        elif undefined(a) or undefined(b):
            if self.returned(0 if undefined(a) else 1):
                a, b = (FILL, b) if undefined(a) else (a, FILL)  # never read on the other path
            elif not nm.startswith(RET):
                merged[i] = Undefined(
                    nm,
                    f"is assigned in only one branch of the `if` at {self.loc}, "
                    "whose condition is a traced value, and used after it: "
                    "assign it before the `if` or in both branches",
                )
                return
            else:
                a, b = (FILL, b) if undefined(a) else (a, FILL)  # a return value: the other's zeros
        self.add(
            nm,
            a if a is FILL else t.frozen(a, self.objs),
            b if b is FILL else f.frozen(b, self.objs),
            lambda v: merged.__setitem__(i, v),
        )

    def returned(self, side: int) -> bool:
        """True if branch `side` surely returned (the lowered `return` set its flag to True):
        what follows the `if` runs only where the flag is false, so a name the branch left
        unbound is never read on its path."""
        i = self.did_ret
        return i is not None and self.branches[side].values[i] is True

    def join_objects(self) -> list[tuple[objects.Entry, Callable[[], Any]]]:
        """Join the objects the branches changed; returns (entry, its merged contents once
        the `cond` is built)."""
        t, f = self.branches
        live = [b for b in (t, f) if b.raised is None]
        n = len(self.objs.entries)
        changed = sorted(
            {
                i
                for b in live
                for i in self.objs.changed([self.objs.after(b.after, j) for j in range(n)])
            }
        )
        out: list[tuple[objects.Entry, Callable[[], Any]]] = []
        for i in changed:
            e = self.objs.entries[i]
            ca = self.objs.after(t.after, i) if t.raised is None else None
            cb = self.objs.after(f.after, i) if f.raised is None else None
            if ca is not None and cb is not None and not _same_shape(e, ca, cb):
                raise objects.structure_error(e, None, ca, "if", self.loc, other=cb)
            if e.kind == objects.SET:
                kept = ca if ca is not None else cb
                out.append((e, lambda kept=kept: kept))
                continue
            pairs = objects.items(e, ca if ca is not None else cb)
            other = objects.items(e, cb) if ca is not None and cb is not None else None
            new: list[list] = [list(kv) for kv in pairs]
            before = (
                dict(objects.items(e, e.before))
                if e.kind != objects.LIST
                else dict(enumerate(e.before))
            )
            for k, (key, x) in enumerate(pairs):
                if other is not None:
                    y = other[k][1]
                    if objects.same(x, y):
                        continue
                    a, b = t.frozen(x, self.objs), f.frozen(y, self.objs)
                else:
                    if key in before and objects.same(before[key], x):
                        continue
                    live_br = t if ca is not None else f
                    a = live_br.frozen(x, self.objs)
                    a, b = (a, FILL) if ca is not None else (FILL, a)
                self.add(e.item_path(key), a, b, functools.partial(_set_second, new[k]))
            out.append((e, functools.partial(_rebuilt, e, new)))
        return out

    def flags(self) -> None:
        """The staged exceptions: each branch's flags (a raising branch: True), joined."""
        t, f = self.branches
        for br, side in ((t, 0), (f, 1)):
            items = list(br.pending)
            if br.raised is not None and not isinstance(br.raised, raises.Staged):
                items.append(raises.Pending(True, br.raised, getattr(br.raised, raises.MARK, None)))
            for pend in items:
                if pend.flag is True:  # the whole branch raises: the condition is the flag
                    self.direct.append((side, pend))
                    continue
                a, b = (pend.flag, False) if side == 0 else (False, pend.flag)
                self.pending.append((a, b, pend))

    def emit(self, p: Variable, parent: Block) -> None:
        """Build the `cond` and hand each place its merged value."""
        blocks = [br.block for br in self.branches]
        res_t: list[Variable] = []
        res_f: list[Variable] = []
        outs: list[tuple[Any, int, Callable[[Any], None]]] = []
        for name, a, b, sink in self.places:
            va, vb, tree = self._pair_values(name, a, b)
            outs.append((tree, len(va), sink))
            res_t += va
            res_f += vb
        for a, b, _ in self.pending:
            va, vb = _pair(blocks, [a], [b])
            res_t += va
            res_f += vb
        blocks[0].results, blocks[1].results = res_t, res_f
        vals: list[Variable] = []
        prog = parent.program
        if res_t or blocks[0].ops or blocks[1].ops:
            caps = list(dict.fromkeys(free_vars(blocks[0]) + free_vars(blocks[1])))
            vals = emit(
                "cond", [p] + caps, {"true": blocks[0], "false": blocks[1], "n_operands": 0}
            )
            blocks[0].owner = blocks[1].owner = parent.ops[-1]
        elif prog.blocks[-2:] == blocks:  # nothing to join: no `cond` (only a flag, maybe)
            del prog.blocks[-2:]
        it = iter(vals)
        for tree, n, sink in outs:
            sink(jax.tree_util.tree_unflatten(tree, [next(it) for _ in range(n)]))
        for _, _, pend in self.pending:
            raises.stage(next(it), pend.error, pend.loc)
        for side, pend in self.direct:
            raises.stage(p if side == 0 else logical_not(p), pend.error, pend.loc)

    def _pair_values(self, name: str, a: Any, b: Any) -> tuple[list[Variable], list[Variable], Any]:
        blocks = [br.block for br in self.branches]
        prog = blocks[0].program
        if a is FILL or b is FILL:
            live, side = (b, 1) if a is FILL else (a, 0)
            leaves, tree = leaves_of(live, name, "if", self.loc)
            with prog.block_guard(blocks[side]):
                vs = [as_var(l) for l in leaves]
            with prog.block_guard(blocks[1 - side]):
                fill = [zeros(v.shape, v.dtype) for v in vs]
            return (vs, fill, tree) if side == 0 else (fill, vs, tree)
        la, ta = leaves_of(a, name, "if", self.loc)
        lb, tb = leaves_of(b, name, "if", self.loc)
        if ta != tb:
            if name == RET:
                raise SrcgradError(
                    f"this function returns {ta} on one path and {tb} on another, "
                    "and a traced condition chooses between them; return the same "
                    "structure on every path",
                    op="if",
                    loc=self.loc,
                )
            raise SrcgradError(
                f"{label(name)} has a different structure in the two branches: {ta} and {tb}",
                op="if",
                loc=self.loc,
            )
        va, vb = _pair(blocks, la, lb)
        bad = [(x, y) for x, y in zip(va, vb) if (x.shape, x.dtype) != (y.shape, y.dtype)]
        if bad:
            x, y = bad[0]
            if name in (RET, IFEXP):
                what = "this function returns" if name == RET else "this conditional expression is"
                raise SrcgradError(
                    f"{what} {x.type_str()} on one path and {y.type_str()} on "
                    "another, and a traced condition chooses between them; give "
                    "every path the same shape and dtype",
                    op="if",
                    loc=self.loc,
                )
            if self.guard:
                raise SrcgradError(
                    f"{label(name)} is {x.type_str()} where the statements after a "
                    f"`break`, `continue` or `return` run and {y.type_str()} where "
                    "a traced condition skips them; give it its final shape and "
                    "dtype before (s = 0.0, not s = 0, for a float sum)",
                    op="if",
                    loc=self.loc,
                )
            raise SrcgradError(
                f"{label(name)} is {x.type_str()} after the true branch and "
                f"{y.type_str()} after the false branch of this `if` on a traced "
                "value; both branches must give it the same shape and dtype",
                op="if",
                loc=self.loc,
            )
        return va, vb, ta


def _set_second(pair: list, value: Any) -> None:
    pair[1] = value


def _rebuilt(e: objects.Entry, pairs: list[list]) -> Any:
    return objects.rebuild(e, [(k, v) for k, v in pairs])


def _same_shape(e: objects.Entry, a: Any, b: Any) -> bool:
    """True if contents `a` and `b` of `e` have the same length, keys or members."""
    if e.kind == objects.SET:
        return a == b
    if e.kind == objects.LIST:
        return len(a) == len(b)
    return [k for k, _ in a] == [k for k, _ in b]


def _pair(blocks: list[Block], la: list, lb: list) -> tuple[list[Variable], list[Variable]]:
    """The leaves of the two branches as Variables, each made in its branch's block; a Python
    number (or a loop-carried value that started as one) takes the other branch's dtype."""
    prog = blocks[0].program
    va, vb = [], []
    for x, y in zip(la, lb):
        with prog.block_guard(blocks[0]):
            vx = as_var(x, like=y if isinstance(y, Variable) else None)
        with prog.block_guard(blocks[1]):
            vy = as_var(y, like=vx)
        if vx.dtype != vy.dtype and vx.shape == vy.shape:
            if is_weak(x) and not is_weak(y):
                with prog.block_guard(blocks[0]):
                    vx = astype(vx, vy.dtype) if isinstance(x, Variable) else as_var(x, like=vy)
            elif is_weak(y) and not is_weak(x) and isinstance(y, Variable):
                with prog.block_guard(blocks[1]):
                    vy = astype(vy, vx.dtype)
            elif not isinstance(x, Variable) and vx.shape == ():
                with prog.block_guard(blocks[0]):
                    vx = as_var(x, like=vy)
        va.append(vx)
        vb.append(vy)
    return va, vb
