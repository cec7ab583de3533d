"""First rewrite: `break`, `continue` and `return` inside loops and branches become flag
variables, and the statements after them run under `if not flag:` (as AutoGraph's
break/continue/return canonicalisation). Loops stop on the flags through their test.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import ast
import itertools

from .analysis import walk_scope

RET, DID_RET = "_sg_ret", "_sg_did_ret"
AG = "ag__"


def name(id_: str, store: bool = False) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


def assign(id_: str, value: ast.expr) -> ast.Assign:
    return ast.Assign(targets=[name(id_, True)], value=value)


def ag(attr: str) -> ast.Attribute:
    return ast.Attribute(value=name(AG), attr=attr, ctx=ast.Load())


def guard(flags: list[str], body: list[ast.stmt], at: ast.AST) -> ast.If:
    """`if not (flags): body`, marked as made by the lowering (for its errors' wording)."""
    node = ast.copy_location(ast.If(test=not_any(flags), body=body, orelse=[]), at)
    node._sg_guard = True  # type: ignore[attr-defined]
    return node


def not_any(flags: list[str]) -> ast.expr:
    """`not (f1 or f2 ...)`."""
    inner = (
        name(flags[0])
        if len(flags) == 1
        else ast.BoolOp(op=ast.Or(), values=[name(f) for f in flags])
    )
    return ast.UnaryOp(op=ast.Not(), operand=inner)


def needs_return_lowering(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """True if a `return` sits inside a branch or loop of `fn` (not only at its top level)."""
    top = {id(s) for s in fn.body if isinstance(s, ast.Return)}
    return any(isinstance(n, ast.Return) and id(n) not in top for n in walk_scope(fn.body))


def falls_through(stmts: list[ast.stmt]) -> bool:
    """True if running `stmts` may reach their end (not every path returns or raises)."""
    if not stmts:
        return True
    last = stmts[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return False
    if isinstance(last, ast.If):
        return falls_through(last.body) or falls_through(last.orelse)
    if isinstance(last, (ast.With, ast.AsyncWith)):
        return falls_through(last.body)
    if isinstance(last, ast.While) and isinstance(last.test, ast.Constant) and last.test.value:
        return _breaks(last.body)  # `while True:` ends by a break only
    if isinstance(last, ast.Try):
        if not falls_through(last.finalbody):
            return False
        return (falls_through(last.body) and falls_through(last.orelse)) or any(
            falls_through(h.body) for h in last.handlers
        )
    return True


def _breaks(stmts: list[ast.stmt]) -> bool:
    """True if `stmts` hold a `break` of the loop around them."""
    return _jumps_out(stmts, (ast.Break,))


def _jumps_out(stmts: list[ast.stmt], kinds: tuple[type, ...] = (ast.Break, ast.Continue)) -> bool:
    """True if `stmts` hold a `break` or `continue` (`kinds`) of the loop around them."""
    todo = list(stmts)
    while todo:
        n = todo.pop()
        if isinstance(n, kinds):
            return True
        if not isinstance(
            n,
            (
                ast.For,
                ast.While,
                ast.AsyncFor,
                ast.FunctionDef,
                ast.AsyncFunctionDef,
                ast.Lambda,
                ast.ClassDef,
            ),
        ):
            todo.extend(ast.iter_child_nodes(n))
    return False


def _test_in_body(s: ast.While) -> None:
    """`while (y := f(x)) < c: body else: tail` -> `while True: if not ((y := f(x)) < c):
    tail; break` then `body`: a name the test assigns is assigned in the body, where the
    converted loop carries it."""
    at = s.test
    stop = ast.If(
        test=ast.copy_location(ast.UnaryOp(op=ast.Not(), operand=s.test), at),
        body=s.orelse + [ast.copy_location(ast.Break(), at)],
        orelse=[],
    )
    s.body = [ast.copy_location(stop, at)] + s.body
    s.test = ast.copy_location(ast.Constant(True), at)
    s.orelse = []


class Jumps:
    """Lowers the jumps of one function body."""

    def __init__(self, counter: itertools.count, lower_returns: bool):
        self.counter = counter
        self.lower_returns = lower_returns

    def function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        falls = falls_through(fn.body)  # (of the source: lowering rewrites the returns)
        body, _ = self.block(fn.body, None)
        if self.lower_returns:
            first, last = fn.body[0], fn.body[-1]
            body = (
                [
                    ast.copy_location(assign(DID_RET, ast.Constant(False)), first),
                    ast.copy_location(assign(RET, ag("UNDEF_RET")), first),
                ]
                + body
                + [
                    ast.copy_location(
                        ast.Return(
                            value=ast.Call(
                                func=ag("ret"),
                                args=[name(RET), name(DID_RET), ast.Constant(falls)],
                                keywords=[],
                            )
                        ),
                        last,
                    )
                ]
            )
        fn.body = body

    def block(
        self, stmts: list[ast.stmt], loop: tuple[str, str] | None
    ) -> tuple[list[ast.stmt], set[str]]:
        out: list[ast.stmt] = []
        for i, s in enumerate(stmts):
            new, flags = self.stmt(s, loop)
            out.extend(ast.copy_location(n, s) for n in new)
            if flags:
                rest, more = self.block(stmts[i + 1 :], loop)
                if rest:
                    out.append(guard(sorted(flags), rest, stmts[i + 1]))
                return out, flags | more
        return out, set()

    def stmt(self, s: ast.stmt, loop: tuple[str, str] | None) -> tuple[list[ast.stmt], set[str]]:
        if isinstance(s, ast.Return) and self.lower_returns:
            value = s.value if s.value is not None else ast.Constant(None)
            value = ast.Call(func=ag("checked"), args=[value], keywords=[])
            return [assign(RET, value), assign(DID_RET, ast.Constant(True))], {DID_RET}
        if isinstance(s, ast.Break) and loop is not None:
            return [assign(loop[0], ast.Constant(True))], {loop[0]}
        if isinstance(s, ast.Continue) and loop is not None:
            return [assign(loop[1], ast.Constant(True))], {loop[1]}
        if isinstance(s, ast.If):
            body, fb = self.block(s.body, loop)
            orelse, fo = self.block(s.orelse, loop)
            s.body, s.orelse = body or [ast.Pass()], orelse
            return [s], fb | fo
        if isinstance(s, (ast.While, ast.For)):
            return self.loop(s, loop)
        if isinstance(s, (ast.With, ast.AsyncWith)):
            s.body, f = self.block(s.body, loop)
            return [s], f
        if isinstance(s, ast.Try):
            s.body, flags = self.block(s.body, loop)
            orelse, fo = self.block(s.orelse, loop)
            if flags and orelse:  # a lowered jump in the `try` skips its `else`
                orelse = [guard(sorted(flags), orelse, orelse[0])]
            s.orelse = orelse
            flags |= fo
            for h in s.handlers:
                h.body, f = self.block(h.body, loop)
                flags |= f
            s.finalbody, f = self._finally(s.finalbody, flags, loop)
            return [s], flags | f
        return [s], set()

    def _finally(
        self, stmts: list[ast.stmt], pending: set[str], loop: tuple[str, str] | None
    ) -> tuple[list[ast.stmt], set[str]]:
        """A `finally` after a `try` that may leave the jumps `pending`: it runs whole (its
        statements are not skipped for them), and a jump of its own discards them, as
        Python's `break` in `finally` discards a pending `return`."""
        body, f = self.block(stmts, loop)
        if not pending or not stmts:
            return body, f
        at, end = stmts[0], stmts[-1]
        saved = {p: f"_sg_pending_{p.lstrip('_')}" for p in sorted(pending)}
        pre = [ast.copy_location(assign(t, name(p)), at) for p, t in saved.items()] + [
            ast.copy_location(assign(p, ast.Constant(False)), at) for p in saved
        ]
        back = []  # p = p or (saved p and not (the finally's other jumps))
        for p, t in saved.items():
            others = sorted(f - {p})
            resumed: ast.expr = (
                name(t)
                if not others
                else ast.BoolOp(op=ast.And(), values=[name(t), not_any(others)])
            )
            back.append(
                ast.copy_location(
                    assign(p, ast.BoolOp(op=ast.Or(), values=[name(p), resumed])), end
                )
            )
        for n in back:
            ast.fix_missing_locations(n)
        return pre + body + back, f

    def loop(
        self, s: ast.While | ast.For, outer: tuple[str, str] | None
    ) -> tuple[list[ast.stmt], set[str]]:
        k = next(self.counter)
        brk, cont = f"_sg_break_{k}", f"_sg_continue_{k}"
        if (
            isinstance(s, ast.While)
            and any(isinstance(n, ast.NamedExpr) for n in ast.walk(s.test))
            and not _jumps_out(s.orelse)
        ):
            _test_in_body(s)
        body, f = self.block(s.body, (brk, cont))
        if cont in f:
            body = [ast.copy_location(assign(cont, ast.Constant(False)), s.body[0])] + body
        s.body = body or [ast.Pass()]
        stop = [x for x in (brk, DID_RET) if x in f]
        if stop:
            if isinstance(s, ast.While):
                s.test = ast.BoolOp(op=ast.And(), values=[not_any(stop), s.test])
            else:
                s._sg_extra = not_any(stop)  # type: ignore[attr-defined]
        orelse, fo = self.block(s.orelse, outer)
        s.orelse = []
        pre = [assign(brk, ast.Constant(False))] if brk in f else []
        post: list[ast.stmt] = []
        if orelse:
            post = [guard(stop, orelse, orelse[0])] if stop else orelse
        return pre + [s] + post, (f & {DID_RET}) | fo
