"""The traced form of a converted loop: one `while` op carrying the names its body assigns
and reads, the items and attributes of the Python objects it changes (objects.py), and the
flags of the exceptions it stages (raises.py), as sg.while_loop builds it.

What a loop changes besides its names is found by tracing it: when a trace of the body
changes an object item the loop does not carry yet, or stages an exception, the loop is
traced again carrying it (AutoGraph's loop variables, found dynamically).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import jax
import numpy as np

from ..core.builder import active_program, as_var
from ..base.errors import SrcgradError, SourceLoc
from ..ir.program import Variable
from ..ops.blocks import build_while
from ..ops.creation import zeros
from ..ops.elementwise import astype, logical_and, logical_not, logical_or
from . import objects
from . import raises
from .blocks import is_weak, label, leaves_of, mark_weak, predicate
from .undefined import Undefined, undefined

Slot = tuple[int, Any]  # (index of an objects.Entry, the item's key)
#: How often a loop is traced again for what it changes before srcgrad gives up.
_ROUNDS = 8


class _Found(BaseException):
    """A trace of the body changed object items the loop does not carry, or staged other
    exceptions than it carries flags for: the loop is traced again carrying them."""

    def __init__(self, slots: dict[Slot, Any], n_flags: int):
        super().__init__()
        self.slots, self.n_flags = slots, n_flags


def _slot_value(objs: objects.Objects, slot: Slot, contents: Any = None) -> Any:
    e = objs.entries[slot[0]]
    return dict(objects.items(e, e.before if contents is None else contents))[slot[1]]


def _set_slots(objs: objects.Objects, slots: Sequence[Slot], values: Sequence[Any]) -> None:
    """Write `values` at `slots` (the rest of each object as it was before the loop)."""
    by: dict[int, dict] = {}
    for (i, key), v in zip(slots, values):
        by.setdefault(i, {})[key] = v
    for i, new in by.items():
        e = objs.entries[i]
        objects.write(
            e.obj,
            e.kind,
            objects.rebuild(e, [(k, new.get(k, x)) for k, x in objects.items(e, e.before)]),
        )


def _changes(
    objs: objects.Objects, start: list, after: list, what: str, loc: SourceLoc | None
) -> dict[Slot, Any]:
    """The items each object changed between `start` and `after` (a change of length, keys or
    members is an error), with the value each now has."""
    out: dict[Slot, Any] = {}
    for i, (e, a) in enumerate(zip(objs.entries, after)):
        s = objs.after(start, i)
        if e.kind == objects.SET:
            if s != a:
                raise objects.structure_error(e, s, a, what, loc)
            continue
        ps, pa = objects.items(e, s), objects.items(e, a)
        if [k for k, _ in ps] != [k for k, _ in pa]:
            raise objects.structure_error(e, s, a, what, loc)
        for (k, x), (_, y) in zip(ps, pa):
            if not objects.same(x, y):
                out[(i, k)] = y
    return out


def _types(value: Any) -> Any:
    leaves, tree = jax.tree_util.tree_flatten(value)
    if leaves and all(isinstance(l, Variable) for l in leaves):
        return tree, [(l.shape, l.dtype) for l in leaves]
    return None


def traced_loop(
    test: Callable[..., Any],
    body: Callable[..., tuple],
    state: tuple,
    names: Sequence[str],
    carried: Sequence[int],
    pending: Sequence[int],
    loc: SourceLoc | None,
    max_iters: int | None,
    counter: bool,
    objs: objects.Objects | None = None,
) -> tuple:
    """A `while` op carrying `state[i]` for i in `carried` (and, at types found by tracing the
    body once, `pending`: names first assigned in the loop and read after it), the object
    items the body changes and the flags of the exceptions it stages.

    `test(*state)` and `body(*state)` take and return the whole state. Returns the state after
    the loop: carried names get the loop's outputs; the body's temporaries are undefined."""
    prog = active_program("while")
    parent = prog.current_block()
    objs = objs if objs is not None else objects.Objects({})
    n_blocks, n_loops, n_ops = len(prog.blocks), prog.loop_count, len(parent.ops)
    slots: dict[Slot, Any] = {}
    n_flags = 0
    for _ in range(_ROUNDS):
        try:
            return _build(
                test,
                body,
                list(state),
                names,
                carried,
                pending,
                loc,
                max_iters,
                counter,
                objs,
                slots,
                n_flags,
            )
        except _Found as found:
            del prog.blocks[n_blocks:]
            del parent.ops[n_ops:]
            prog.loop_count = n_loops
            objs.restore()
            for k, v in found.slots.items():
                slots[k] = slots.get(k) or v
            n_flags = max(n_flags, found.n_flags)
    raise SrcgradError(
        "the state this loop on a traced value changes did not settle after "
        f"{_ROUNDS} traces of its body",
        op="loop",
        loc=loc,
    )


def _build(
    test: Callable[..., Any],
    body: Callable[..., tuple],
    state: list,
    names: Sequence[str],
    carried: Sequence[int],
    pending: Sequence[int],
    loc: SourceLoc | None,
    max_iters: int | None,
    counter: bool,
    objs: objects.Objects,
    slots: dict[Slot, Any],
    n_flags: int,
) -> tuple:
    prog = active_program("while")
    slot_keys = list(slots)
    slot_init = [_slot_value(objs, s) for s in slot_keys]
    numbers = [i for i in carried if any(is_weak(l) for l in jax.tree_util.tree_leaves(state[i]))]
    if pending or numbers:
        types = _body_types(body, state, names, list(carried), objs, slot_keys, slot_init)
        for i in pending:
            if i in types:
                tree, specs = types[i]
                state[i] = jax.tree_util.tree_unflatten(tree, [zeros(sh, dt) for sh, dt in specs])
        pending = [i for i in pending if types.get(i) is not None]
        for i in numbers:
            state[i] = _recast(state[i], types.get(i))
    slot_init = [_recast(v, slots[s]) for s, v in zip(slot_keys, slot_init)]
    keep = sorted(set(carried) | set(pending))
    for i in keep:
        leaves_of(state[i], names[i], "loop", loc)
    paths = [objs.entries[i].item_path(k) for i, k in slot_keys]
    for v, path in zip(slot_init, paths):
        leaves_of(v, path, "loop", loc)
    init_vals = (tuple(state[i] for i in keep), tuple(slot_init), (False,) * n_flags)
    leaves, tree = jax.tree_util.tree_flatten(init_vals)
    init = [as_var(l) for l in leaves]
    leaf_names = (
        _leaf_names([state[i] for i in keep], [names[i] for i in keep])
        + _leaf_names(slot_init, paths)
        + ["raised"] * n_flags
    )
    kinds = [(v.shape, v.dtype, v.type_str()) for v in init]
    errors: list[raises.Pending] = []

    def full(carried_names: tuple) -> list:
        s = list(state)
        for i, v in zip(keep, carried_names):
            s[i] = v
        return s

    def cond_fun(carry: tuple) -> Variable:
        nv, sv, fv = carry
        try:
            with objects.traced_body(objs), raises.frame(prog.current_block()) as fr:
                _set_slots(objs, slot_keys, sv)
                start = objs.now()
                t = test(*full(nv))
                changed = _changes(objs, start, objs.now(), "loop", loc)
        finally:
            objs.restore()
        if changed or fr.pending:
            what = (
                f"changes {', '.join(f'`{objs.entries[i].item_path(k)}`' for i, k in changed)}"
                if changed
                else "raises under a traced condition"
            )
            raise SrcgradError(
                f"the test of this loop on a traced value {what}; a loop's test "
                "runs again before every iteration and cannot have such effects "
                "here: move them into the loop body",
                op="loop",
                loc=loc,
            )
        p = predicate(t, "loop", loc)
        if fv:
            stop = fv[0]
            for f in fv[1:]:
                stop = logical_or(stop, f)
            p = logical_and(logical_not(stop), p)
        return p

    def body_fun(carry: tuple) -> tuple:
        nv, sv, fv = carry
        try:
            with objects.traced_body(objs), raises.frame(prog.current_block()) as fr:
                _set_slots(objs, slot_keys, sv)
                start = objs.now()
                try:
                    out = body(*full(nv))
                except Exception as e:
                    better = objects.frozen_array(e, objs, "loop", loc) or raises.failed_branch(
                        e, "body", "loop", loc
                    )
                    if better is e:
                        raise
                    raise better from e
                after = objs.now()
                changed = _changes(objs, start, after, "loop", loc)
        finally:
            objs.restore()
        new = {s: _types(v) for s, v in changed.items() if s not in slots}
        if new or len(fr.pending) != n_flags:
            raise _Found(new, len(fr.pending))
        errors[:] = fr.pending
        names_out = tuple(out[i] for i in keep)
        for i, v in zip(keep, names_out):
            if undefined(v):
                raise SrcgradError(
                    f"`{names[i]}` is carried by this loop on a traced value, but "
                    "one iteration leaves it unassigned",
                    op="loop",
                    loc=loc,
                )
        slots_out = tuple(changed.get(s, v) for s, v in zip(slot_keys, sv))
        flags_out = tuple(logical_or(f, as_var(p.flag)) for f, p in zip(fv, fr.pending))
        new_vals = (names_out, slots_out, flags_out)
        got, got_tree = jax.tree_util.tree_flatten(new_vals)
        if got_tree != tree:
            befores = [state[i] for i in keep] + list(slot_init)
            for nm, a, b in zip([names[i] for i in keep] + paths, befores, names_out + slots_out):
                if jax.tree_util.tree_structure(a) != jax.tree_util.tree_structure(b):
                    raise SrcgradError(
                        f"{label(nm)} is {_shape_of(a)} before this loop on a traced value and "
                        f"{_shape_of(b)} after one iteration; a value a loop carries keeps its "
                        "structure (a list that grows in it cannot be carried: preallocate an "
                        "array, buf = sg.zeros(n), and assign its items)",
                        op="loop",
                        loc=loc,
                    )
        for leaf, (shape, dt, ts), nm in zip(got, kinds, leaf_names):
            if isinstance(leaf, Variable) and (leaf.shape, leaf.dtype) != (shape, dt):
                raise SrcgradError(
                    f"the loop carries {label(nm)} as {ts} but one iteration makes it "
                    f"{leaf.type_str()}; a value carried by a loop on a traced value must keep "
                    "its shape and dtype (give it its final shape and dtype before the loop)",
                    op="loop",
                    loc=loc,
                )
        return new_vals

    if counter:
        init.append(as_var(np.int32(0)))
    outs = build_while(
        cond_fun,
        body_fun,
        init,
        tree,
        loc,
        max_iters,
        counter=counter,
        splat=False,
        names=[_param_name(n) for n in leaf_names],
    )
    names_done, slots_done, flags_done = jax.tree_util.tree_unflatten(tree, outs[: len(leaves)])
    _set_slots(objs, slot_keys, slots_done)
    for flag, pend in zip(flags_done, errors):
        raises.stage(flag, pend.error, pend.loc)
    result: list[Any] = [
        Undefined(
            nm,
            f"is assigned only inside the loop at {loc}, which runs "
            "on a traced value, and is read after it: assign it "
            "before the loop",
        )
        for nm in names
    ]
    for i, v in zip(keep, names_done):
        result[i] = v
    return tuple(result)


def _shape_of(value: Any) -> str:
    """A value's structure in words, for an error."""
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    if isinstance(value, dict):
        return f"a dict with keys {sorted(map(repr, value))}"
    return "an array" if isinstance(value, Variable) else f"a {type(value).__name__}"


def _param_name(name: str) -> str:
    out = "".join(c if c.isalnum() or c == "_" else "_" for c in name).strip("_")
    return out or "v"


def _leaf_names(values: Sequence[Any], names: Sequence[str]) -> list[str]:
    out = []
    for v, n in zip(values, names):
        out += [n] * len(jax.tree_util.tree_leaves(v))
    return out


def _recast(value: Any, types: Any) -> Any:
    """Python numbers (and values that started as ones) carried into a loop, as the dtypes
    the body gives them."""
    leaves, tree = jax.tree_util.tree_flatten(value)
    if types is None or types[0] != tree:
        return value
    out = []
    for l, (shape, dt) in zip(leaves, types[1]):
        v = as_var(l)
        out.append(astype(v, dt) if is_weak(l) and v.shape == shape and v.dtype != dt else l)
    return jax.tree_util.tree_unflatten(tree, out)


def test_becomes_traced(
    test: Callable[..., Any], body: Callable[..., tuple], state: tuple, objs: objects.Objects
) -> bool:
    """True if the loop's test is a traced value after one run of the body (from a trace in a
    scratch block that is then dropped): then the loop is traced from its first iteration
    instead of running that one in Python."""
    prog = active_program("while")
    n_blocks, n_loops = len(prog.blocks), prog.loop_count
    blk = prog.create_block(prog.current_block())
    try:
        with prog.block_guard(blk), objects.traced_body(objs), raises.frame(blk):
            try:
                t = test(*body(*state))
            except Exception:
                t = None
    finally:
        objs.restore()
        del prog.blocks[n_blocks:]
        prog.loop_count = n_loops
    return isinstance(t, Variable)


def _body_types(
    body: Callable[..., tuple],
    state: list,
    names: Sequence[str],
    carried: list[int],
    objs: objects.Objects,
    slot_keys: list[Slot],
    slot_init: list[Any],
) -> dict[int, Any]:
    """The (shape, dtype) trees the body gives each name, from one trace of it in a scratch
    block that is then dropped (carried values that started as Python numbers are weak there:
    a branch that gives one a wider dtype promotes it)."""
    prog = active_program("while")
    parent = prog.current_block()
    n_blocks, n_loops = len(prog.blocks), prog.loop_count
    blk = prog.create_block(parent)
    s = list(state)

    def params(value: Any, name: str) -> Any:
        leaves, tree = jax.tree_util.tree_flatten(value)
        ps = []
        for l in leaves:
            v = as_var(l)
            p = blk.add_param(_param_name(name), v.shape, v.dtype)
            if is_weak(l):
                mark_weak(p)
            ps.append(p)
        return jax.tree_util.tree_unflatten(tree, ps)

    try:
        with prog.block_guard(blk), objects.traced_body(objs), raises.frame(blk):
            for i in carried:
                s[i] = params(s[i], names[i])
            _set_slots(objs, slot_keys, [params(v, "slot") for v in slot_init])
            try:
                out = body(*s)
            except Exception:
                out = None
    finally:
        objs.restore()
        del prog.blocks[n_blocks:]
        prog.loop_count = n_loops
    if out is None:
        return {}
    types: dict[int, Any] = {}
    for i, v in enumerate(out):
        if not undefined(v):
            t = _types(v)
            if t is not None:
                types[i] = t
    return types
