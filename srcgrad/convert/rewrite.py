"""Second rewrite: `if`/`while`/`for` become calls of the runtime operators (`if_stmt`,
`while_stmt`, `for_stmt`) on generated functions of the names each statement assigns;
`and`/`or`/`not`, conditional expressions, chained comparisons and `in` become `and_`/`or_`/
`not_`/`if_exp`/`in_`; `x[i] = v` becomes `x = setitem(x, i, v)` and `x[i]` with a computed
`i` `getitem(x, i)`; `assert` becomes `assert_`, `raise e` `raise raising(e)`, and `del x`
in a branch or loop body `x = deleted('x')`; calls go through `call`, which converts user
functions. Names that closures share (cells, `nonlocal`, `global`) stay shared: a generated
function declares them `nonlocal` (`global`) and takes their value as a renamed parameter.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import ast
import builtins
import copy
import itertools
from typing import Any, cast

from .analysis import GEN, Scope, assigned, has_mutation, live_in, read_counts
from .jumps import Jumps, ag, assign, name, needs_return_lowering

_BUILTINS = set(dir(builtins))
_OPS = {
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "truediv",
    ast.Pow: "pow",
    ast.FloorDiv: "floordiv",
    ast.Mod: "mod",
    ast.MatMult: "matmul",
    ast.BitAnd: "and_",
    ast.BitOr: "or_",
    ast.BitXor: "xor",
    ast.LShift: "lshift",
    ast.RShift: "rshift",
}


def _call(func: ast.expr, *args: ast.expr) -> ast.Call:
    return ast.Call(func=func, args=list(args), keywords=[])


def _thunk(body: ast.expr) -> ast.Lambda:
    """`lambda _sgt=0: body` (the `_sgt` parameter marks the lambda as generated)."""
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg="_sgt")],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[ast.Constant(0)],
    )
    return ast.Lambda(args=args, body=body)


def _strs(names: list[str]) -> ast.Tuple:
    return ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load())


def _names(names: list[str], store: bool = False) -> ast.Tuple:
    return ast.Tuple(elts=[name(n, store) for n in names], ctx=ast.Store() if store else ast.Load())


def _def(
    fname: str, params: list[str], body: list[ast.stmt], ret: ast.expr, scope: Scope | None = None
) -> ast.FunctionDef:
    """`def fname(*params): body; return ret`; a parameter that is a cell of `scope` comes in
    renamed and is assigned to the shared (nonlocal or global) name first."""
    shared = [p for p in params if scope is not None and p in scope.cells]
    pre: list[ast.stmt] = []
    glob = [p for p in shared if scope is not None and p in scope.globals]
    if glob:
        pre.append(ast.Global(names=glob))
    if len(glob) < len(shared):
        pre.append(ast.Nonlocal(names=[p for p in shared if p not in glob]))
    pre += [assign(p, name(_CELL + p)) for p in shared]
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg=_CELL + p if p in shared else p) for p in params],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[],
    )
    return ast.FunctionDef(
        name=fname,
        args=args,
        body=pre + body + [ast.Return(value=ret)],
        decorator_list=[],
        returns=None,
    )


_CELL = "_sg_cell_"


class Exprs(ast.NodeTransformer):
    """The expression rewrites (nested function definitions are left to `Converter`);
    `self_name`: the first parameter of the method being converted (for `super()`)."""

    def __init__(self, self_name: str | None = None):
        self.self_name = self_name

    def visit_BoolOp(self, node: ast.BoolOp) -> ast.expr:
        self.generic_visit(node)
        op = "and_" if isinstance(node.op, ast.And) else "or_"
        return ast.copy_location(_call(ag(op), *[_thunk(v) for v in node.values]), node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.expr:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call(ag("not_"), node.operand), node)
        return node

    def visit_IfExp(self, node: ast.IfExp) -> ast.expr:
        self.generic_visit(node)
        return ast.copy_location(
            _call(ag("if_exp"), node.test, _thunk(node.body), _thunk(node.orelse)), node
        )

    def visit_Compare(self, node: ast.Compare) -> ast.expr:
        self.generic_visit(node)
        if len(node.ops) == 1:
            return _compare(node.left, node.ops[0], node.comparators[0], node)
        parts, left = [], node.left
        for op, right in zip(node.ops, node.comparators):
            parts.append(_thunk(_compare(left, op, right, node)))
            left = right
        return ast.copy_location(_call(ag("and_"), *parts), node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.expr:
        self.generic_visit(node)
        if not isinstance(node.ctx, ast.Load) or _static_index(node.slice):
            return node
        return ast.copy_location(_call(ag("getitem"), node.value, node.slice), node)

    def visit_Call(self, node: ast.Call) -> ast.expr:
        self.generic_visit(node)
        f = node.func
        if isinstance(f, ast.Name) and f.id == "range" and not node.keywords:
            return ast.copy_location(_call(ag("range_"), f, *node.args), node)
        if (
            isinstance(f, ast.Name)
            and f.id == "super"
            and not node.args
            and not node.keywords
            and self.self_name is not None
        ):
            node.args = [name("__class__"), name(self.self_name)]
            return node
        if isinstance(f, ast.Name) and f.id in _BUILTINS:
            return node
        node.func = ast.copy_location(_call(ag("call"), f), f)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        return node


class Converter:
    """Converts one function definition (and the functions defined inside it)."""

    def __init__(self, counter: itertools.count):
        self.counter = counter
        self.exprs = Exprs()
        self.depth = 0  # how many generated functions the statement being converted is in

    def function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        saved = self.exprs, self.depth
        Jumps(self.counter, needs_return_lowering(fn)).function(fn)
        self.total = read_counts(fn.body)
        self.scope = Scope(fn)
        self.exprs = Exprs(_first_param(fn) if _uses_super(fn) else None)
        self.depth = 0
        fn.body = self.block(fn.body)
        self.exprs, self.depth = saved

    def _def(
        self, fname: str, params: list[str], body: list[ast.stmt], ret: ast.expr
    ) -> ast.FunctionDef:
        return _def(fname, params, body, ret, self.scope)

    def _body(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        """The statements of a branch or loop body (they go into a generated function)."""
        self.depth += 1
        try:
            return self.block(stmts)
        finally:
            self.depth -= 1

    def _shared(self, mod: list[str]) -> list[str]:
        """The names of `mod` this function can rebind, and those a nested function rebinds
        (any call may change them)."""
        return [n for n in mod if n in self.scope.bound] + sorted(
            n for n in self.scope.nested_writes if n not in mod
        )

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for s in stmts:
            new = self.stmt(s)
            for n in new:
                _locate(n, s)
            out.extend(new)
        return out or [ast.Pass()]

    def expr(self, e: ast.expr) -> ast.expr:
        return self.exprs.visit(e)

    def stmt(self, s: ast.stmt) -> list[ast.stmt]:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            saved = self.total, self.scope
            s.decorator_list = [self.expr(d) for d in s.decorator_list]
            self.function(s)
            self.total, self.scope = saved
            return [s]
        if isinstance(s, ast.ClassDef):
            s.body = [
                self.stmt(b)[0] if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) else b
                for b in s.body
            ]
            return [s]
        if isinstance(s, ast.If):
            return self.if_(s)
        if isinstance(s, ast.While):
            return self.while_(s)
        if isinstance(s, ast.For):
            return self.for_(s)
        if isinstance(s, (ast.With, ast.AsyncWith)):
            s.items = [self.exprs.visit(i) for i in s.items]
            s.body = self.block(s.body)
            return [s]
        if isinstance(s, ast.Delete) and self.depth:
            return [
                assign(t.id, _call(ag("deleted"), ast.Constant(t.id)))
                if isinstance(t, ast.Name)
                else self.exprs.visit(ast.Delete(targets=[t]))
                for t in s.targets
            ]
        if isinstance(s, ast.Assert):
            msg = s.msg if s.msg is not None else ast.Constant(None)
            check = ast.Expr(value=_call(ag("assert_"), self.expr(s.test), _thunk(self.expr(msg))))
            return [ast.If(test=name("__debug__"), body=[check], orelse=[])]
        if isinstance(s, ast.Raise) and s.exc is not None:
            s.exc = _call(ag("raising"), self.expr(s.exc))
            s.cause = self.expr(s.cause) if s.cause is not None else None
            return [s]
        if isinstance(s, ast.Try):
            s.body, s.orelse = self.block(s.body), self.block(s.orelse) if s.orelse else []
            s.finalbody = self.block(s.finalbody) if s.finalbody else []
            for h in s.handlers:
                h.body = self.block(h.body)
            return [s]
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and _subscript_of_name(s.targets[0]):
            return [_setitem(s.targets[0], self.expr(s.value), None, self.scope.bound)]
        if (
            isinstance(s, ast.Assign)
            and len(s.targets) == 1
            and isinstance(s.targets[0], (ast.Tuple, ast.List))
            and any(_subscript_of_name(t) for t in s.targets[0].elts)
            and not any(isinstance(t, ast.Starred) for t in s.targets[0].elts)
        ):
            return self._unpack(s)
        if isinstance(s, ast.AugAssign) and _subscript_of_name(s.target) and type(s.op) in _OPS:
            return [_setitem(s.target, self.expr(s.value), _OPS[type(s.op)], self.scope.bound)]
        if isinstance(s, ast.Return) and s.value is not None:
            s.value = _call(ag("checked"), self.expr(s.value))
            return [s]
        return [self.exprs.visit(s)]

    def _unpack(self, s: ast.Assign) -> list[ast.stmt]:
        """`a[i], b = u, v` -> `_sg_t = (u, v); a = setitem(a, i, _sg_t[0]); b = _sg_t[1]`."""
        tmp = f"_sg_unpack_{next(self.counter)}"
        out: list[ast.stmt] = [assign(tmp, self.expr(s.value))]
        for k, t in enumerate(cast(ast.Tuple, s.targets[0]).elts):
            item = ast.Subscript(value=name(tmp), slice=ast.Constant(k), ctx=ast.Load())
            out.extend(self.stmt(ast.copy_location(ast.Assign(targets=[t], value=item), s)))
        return out

    def _state(self, names: list[str]) -> ast.expr:
        glob = [n for n in names if n in self.scope.globals]
        if glob:
            return _call(
                ag("state"),
                _call(name("locals")),
                _strs(names),
                _call(name("globals")),
                _strs(glob),
            )
        return _call(ag("state"), _call(name("locals")), _strs(names))

    def _result(self, names: list[str], call: ast.expr) -> list[ast.stmt]:
        if not names:
            return [ast.Expr(value=call)]
        return [ast.Assign(targets=[_names(names, True)], value=call)]

    def if_(self, s: ast.If) -> list[ast.stmt]:
        k = next(self.counter)
        test = self.expr(s.test)
        body, orelse = self._body(s.body), self._body(s.orelse) if s.orelse else [ast.Pass()]
        mod = self._shared(assigned(body + orelse))
        t = self._def(f"{GEN}if_true_{k}", mod, body, _names(mod))
        f = self._def(f"{GEN}if_false_{k}", mod, orelse, _names(mod))
        call = _call(ag("if_stmt"), test, name(t.name), name(f.name), self._state(mod), _strs(mod))
        if getattr(s, "_sg_guard", False):
            call.keywords = [ast.keyword(arg="guard", value=ast.Constant(True))]
        return [t, f] + self._result(mod, call)

    def _loop_info(self, s: ast.While | ast.For, mod: list[str], first: list[ast.AST]) -> ast.expr:
        inside = read_counts([s])
        live = live_in(s.body, first, assigned([s.target]) if isinstance(s, ast.For) else ())
        live |= self.scope.cells  # a closure may read them
        out = [n for n in mod if self.total[n] > inside[n] or n in self.scope.cells]
        return _call(
            ag("LoopInfo"),
            _strs([n for n in mod if n in live]),
            _strs(out),
            ast.Constant(has_mutation(s.body)),
        )

    def while_(self, s: ast.While) -> list[ast.stmt]:
        k = next(self.counter)
        info_mod = self._shared(assigned(s.body))
        info = self._loop_info(s, info_mod, [s.test])
        test = self.expr(s.test)
        body = self._body(s.body)
        mod = self._shared(assigned(body))
        t = self._def(f"{GEN}while_test_{k}", mod, [], test)
        b = self._def(f"{GEN}while_body_{k}", mod, body, _names(mod))
        call = _call(
            ag("while_stmt"), name(t.name), name(b.name), self._state(mod), _strs(mod), info
        )
        return [t, b] + self._result(mod, call)

    def for_(self, s: ast.For) -> list[ast.stmt]:
        k = next(self.counter)
        info_mod = self._shared(assigned([s.target] + s.body))
        extra = getattr(s, "_sg_extra", None)
        info = self._loop_info(s, info_mod, [extra] if extra is not None else [])
        it = self.expr(s.iter)
        body = self._body(
            [ast.copy_location(ast.Assign(targets=[s.target], value=name("_sg_it")), s)] + s.body
        )
        mod = self._shared([n for n in assigned(body) if n != "_sg_it"])
        out: list[ast.stmt] = []
        extra_fn: ast.expr = ast.Constant(None)
        if extra is not None:
            e = self._def(f"{GEN}for_extra_{k}", mod, [], self.expr(extra))
            out.append(e)
            extra_fn = name(e.name)
        b = self._def(f"{GEN}for_body_{k}", ["_sg_it"] + mod, body, _names(mod))
        call = _call(ag("for_stmt"), it, extra_fn, name(b.name), self._state(mod), _strs(mod), info)
        return out + [b] + self._result(mod, call)


def _compare(left: ast.expr, op: ast.cmpop, right: ast.expr, at: ast.AST) -> ast.expr:
    """One comparison; `in` / `not in` through `in_` (a traced container has no `in`)."""
    if isinstance(op, (ast.In, ast.NotIn)):
        found = ast.copy_location(_call(ag("in_"), left, right), at)
        return found if isinstance(op, ast.In) else ast.copy_location(_call(ag("not_"), found), at)
    return ast.copy_location(ast.Compare(left=left, ops=[op], comparators=[right]), at)


def _static_index(index: ast.expr) -> bool:
    """True for an index that cannot be a traced value (constants and slices of them)."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return all(
        isinstance(p, (ast.Constant, ast.Slice))
        or (isinstance(p, ast.UnaryOp) and isinstance(p.operand, ast.Constant))
        for p in parts
    )


def _uses_super(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Name)
        and n.func.id == "super"
        and not n.args
        for n in ast.walk(fn)
    )


def _first_param(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    a = fn.args.posonlyargs + fn.args.args
    return a[0].arg if a else None


def _locate(node: ast.AST, at: ast.stmt) -> None:
    """Give the generated nodes under `node` the location of the statement `at`."""
    for n in ast.walk(node):
        if "lineno" in n._attributes and getattr(n, "lineno", None) is None:
            ast.copy_location(n, at)
            cast(Any, n).end_lineno, cast(Any, n).end_col_offset = at.lineno, at.col_offset


def _subscript_of_name(t: ast.expr) -> bool:
    if not isinstance(t, ast.Subscript):
        return False
    while isinstance(t, ast.Subscript):
        t = t.value
    return isinstance(t, ast.Name) and not isinstance(t, ast.Starred)


def _load(e: ast.expr) -> ast.expr:
    """A copy of the target expression `e` in load context."""
    e = copy.deepcopy(e)
    for n in ast.walk(e):
        if hasattr(n, "ctx"):
            n.ctx = ast.Load()
    return e


def _setitem(target: ast.Subscript, value: ast.expr, op: str | None, bound: set[str]) -> ast.stmt:
    """`a[i][j] = v` -> `a = setitem(a, i, setitem(a[i], j, v))` (`op` for `a[i] op= v`); an
    `a` this function cannot rebind (a closure's, a global it does not declare) ->
    `setitem_in_place('a', a, ...)`, which refuses a functional update."""
    expr_ = Exprs()
    idx = expr_.visit(_load(target.slice))
    base = target.value
    if op is None:
        new = _call(ag("setitem"), _load(base), idx, value)
    else:
        new = _call(ag("setitem_op"), _load(base), idx, value, ast.Constant(op))
    while isinstance(base, ast.Subscript):
        new = _call(ag("setitem"), _load(base.value), expr_.visit(_load(base.slice)), new)
        base = base.value
    target_name = cast(ast.Name, base).id
    if target_name in bound:
        return assign(target_name, new)
    return ast.Expr(
        value=_call(ag("setitem_in_place"), ast.Constant(target_name), name(target_name), new)
    )


__all__ = ["Converter", "Exprs", "assign"]
