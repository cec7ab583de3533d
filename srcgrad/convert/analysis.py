"""Static analysis of a function's AST: which names a statement assigns and reads, and which
a loop must carry (AutoGraph's activity and liveness analyses, simplified).

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import ast
from collections import Counter
from typing import Iterable

#: Prefix of the functions the rewrite generates (never carried as state).
GEN = "_sgf_"
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def walk_scope(nodes: Iterable[ast.AST]) -> Iterable[ast.AST]:
    """The nodes under `nodes` in their own scope: a nested def/class/lambda is yielded but
    not entered (comprehensions are entered: their reads are reads of this scope)."""
    todo = list(nodes)[::-1]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, _SCOPES):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                todo.extend(node.decorator_list[::-1])
            continue
        todo.extend(list(ast.iter_child_nodes(node))[::-1])


def assigned(nodes: Iterable[ast.AST], items: bool = True) -> list[str]:
    """Names bound in this scope by `nodes`, in order of first binding (with `items`, also
    the names whose items are assigned: the conversion rebinds them)."""
    out: dict[str, None] = {}
    for node in walk_scope(nodes):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out[node.id] = None
        elif items and isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            base = node.value  # `x[i] = v` rebinds x (the conversion makes it `x = setitem(...)`)
            while isinstance(base, ast.Subscript):
                base = base.value
            if isinstance(base, ast.Name):
                out[base.id] = None
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[node.name] = None
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                out[(a.asname or a.name).split(".")[0]] = None
        elif isinstance(node, ast.ExceptHandler) and node.name:
            out[node.name] = None
    comp_targets = _comprehension_targets(nodes)
    return [n for n in out if not n.startswith(GEN) and n not in comp_targets]


def _comprehension_targets(nodes: Iterable[ast.AST]) -> set[str]:
    found = set()
    for node in walk_scope(nodes):
        if isinstance(node, ast.comprehension):
            found |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return found


def read_counts(nodes: Iterable[ast.AST]) -> Counter:
    """How often each name is read under `nodes` (nested functions included: closures)."""
    c: Counter = Counter()
    for root in nodes:
        for node in ast.walk(root):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                c[node.id] += 1
    return c


def _reads(node: ast.AST | None) -> set[str]:
    return set(read_counts([node])) if node is not None else set()


def live_in(
    stmts: list[ast.stmt], first: Iterable[ast.AST] = (), defined: Iterable[str] = ()
) -> set[str]:
    """Names read by `first` or by `stmts` before `stmts` surely assigned them (`defined`:
    names assigned before `stmts` run, as a for loop's target)."""
    found = set().union(*(_reads(n) for n in first)) if first else set()
    _scan(stmts, set(defined), found)
    return found


def _scan(stmts: list[ast.stmt], defined: set[str], found: set[str]) -> set[str]:
    """Walk `stmts` in order: add reads of names not yet `defined` to `found`; return the
    names surely defined after them."""
    defined = set(defined)
    for s in stmts:
        if isinstance(s, ast.Assign):
            found |= _reads(s.value) - defined
            for t in s.targets:
                found |= _reads(t) - defined
            defined |= set(assigned(s.targets))
        elif isinstance(s, (ast.AugAssign, ast.AnnAssign)):
            found |= (_reads(s.value) | _reads(s.target) | set(assigned([s.target]))) - defined
            defined |= set(assigned([s.target]))
        elif isinstance(s, ast.If):
            found |= _reads(s.test) - defined
            defined |= set(assigned([s.test]))  # a walrus in the test
            a = _scan(s.body, defined, found)
            b = _scan(s.orelse, defined, found)
            defined |= a & b
        elif isinstance(s, (ast.For, ast.While)):
            head = s.iter if isinstance(s, ast.For) else s.test
            found |= _reads(head) - defined
            inner = set(defined) | (set(assigned([s.target])) if isinstance(s, ast.For) else set())
            _scan(s.body, inner, found)
            _scan(s.orelse, defined, found)
        elif isinstance(s, ast.Try):
            after = _scan(s.body, defined, found)
            ends = [_scan(s.orelse, after, found)]
            for h in s.handlers:
                ends.append(_scan(h.body, defined | ({h.name} if h.name else set()), found))
            defined = set.intersection(*ends) if s.handlers else ends[0]
            defined = _scan(s.finalbody, defined, found)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                found |= _reads(item.context_expr) - defined
                defined |= set(assigned([item.optional_vars])) if item.optional_vars else set()
            defined = _scan(s.body, defined, found)
        elif isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found |= _reads(s) - defined - {s.name}
            defined.add(s.name)
        else:
            found |= _reads(s) - defined
            defined |= set(assigned([s]))
    return defined


def has_mutation(stmts: list[ast.stmt]) -> bool:
    """True if `stmts` mutate a Python container in place (`out.append(v)`): such a loop
    is unrolled in Python, as it traces today, not turned into a traced loop."""
    for node in walk_scope(stmts):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr
            in (
                "append",
                "extend",
                "insert",
                "pop",
                "update",
                "add",
                "setdefault",
                "remove",
                "clear",
            )
        ):
            return True
    return False


class Scope:
    """The names of one function that converted statements must share with other functions
    (as cells, not as parameters of the generated branch and loop functions): those nested
    functions and lambdas read or write (closures), and those declared `nonlocal` or
    `global`; `nested_writes`: the ones a nested function rebinds (`nonlocal n` in it), which
    any call can change."""

    def __init__(self, fn: ast.FunctionDef | ast.AsyncFunctionDef):
        a = fn.args
        params = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
        params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        self.globals: set[str] = set()
        declared_nonlocal: set[str] = set()
        nested: set[str] = set()
        self.nested_writes: set[str] = set()
        for node in walk_scope(fn.body):
            if isinstance(node, ast.Global):
                self.globals.update(node.names)
            elif isinstance(node, ast.Nonlocal):
                declared_nonlocal.update(node.names)
            elif isinstance(node, _SCOPES):
                for n in ast.walk(node):
                    if isinstance(n, ast.Name):
                        nested.add(n.id)
                    elif isinstance(n, ast.Nonlocal):
                        self.nested_writes.update(n.names)
        local = (params | set(assigned(fn.body, items=False))) - self.globals - declared_nonlocal
        self.cells = (local & nested) | declared_nonlocal | self.globals
        self.nested_writes &= local | declared_nonlocal
        #: The names this function may rebind (not a closure's or a global it only reads).
        self.bound = local | declared_nonlocal | self.globals
