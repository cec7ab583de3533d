"""Converting a function: its source is parsed, rewritten (jumps.py, rewrite.py), compiled
under the user's file name and line numbers, and rebuilt with the function's globals,
closure and defaults. Conversions are cached per code object.

Layer L6 (front ends): see docs/design.md.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import operator
import os
import sys
import sysconfig
import textwrap
import threading
import types
import weakref
from typing import Any, Callable

from ..base.cache import CACHE
from ..base.errors import SrcgradError, is_internal, user_location
from .analysis import GEN
from .rewrite import Converter

_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_LIBRARY_DIRS = tuple(
    sorted(
        {
            os.path.abspath(p) + os.sep
            for p in (
                sysconfig.get_paths()["stdlib"],
                sysconfig.get_paths()["purelib"],
                sysconfig.get_paths()["platlib"],
            )
            if p
        }
    )
)
_LIBRARY_PARTS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)

_lock = threading.Lock()
_codes: dict[types.CodeType, types.CodeType | None] = {}
_ours: set[types.CodeType] = set()
_sources: dict[types.CodeType, str] = {}
#: Per user function: what its conversion was made from (its code object and defaults: a
#: function whose code was replaced, as IPython's autoreload does, is converted again) and
#: the converted function.
_functions: "weakref.WeakKeyDictionary[Callable[..., Any], tuple[tuple, Callable[..., Any]]]" = (
    weakref.WeakKeyDictionary()
)
_counter = itertools.count()
LAMBDA = "_sg_lambda"
#: Generators and coroutines are traced as they are.
_NOT_CONVERTED = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
DEF = "_sg_def"


class _Missing(threading.local):
    def __init__(self) -> None:
        self.no_source: list[Callable[..., Any]] = []


missing = _Missing()


class SourceUnavailable(Exception):
    """The source of a function cannot be read (defined in a REPL string, exec, or C)."""


def clear() -> None:
    """Forget every conversion (the next trace converts again)."""
    with _lock:
        _codes.clear()
        _sources.clear()
        _functions.clear()


def is_user_code(code: types.CodeType) -> bool:
    """True for code the user wrote: not srcgrad, JAX, NumPy, the standard library or an
    installed package."""
    return code not in _ours and is_user_file(code.co_filename)


@functools.lru_cache(maxsize=4096)
def is_user_file(f: str) -> bool:
    """True for a file of the user's: not srcgrad's, JAX's, NumPy's, the standard library's
    or an installed package's."""
    if f.startswith("<srcgrad") or is_internal(f):  # srcgrad's files (transforms/ too)
        return False
    path = os.path.abspath(f) if not f.startswith("<") else f
    return not (
        path.startswith(_HERE)
        or path.startswith(_LIBRARY_DIRS)
        or any(p in path for p in _LIBRARY_PARTS)
    )


def no_convert(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark `fn` so that srcgrad never converts it (also a decorator). A function converted
    before is traced again, unconverted, on the next call of its transformations (those
    made before included)."""
    try:
        fn.__sg_no_convert__ = True  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        raise SrcgradError(
            f"sg.no_convert: cannot mark a {type(fn).__name__}", loc=user_location()
        ) from None
    if _functions.pop(fn, fn) is not fn:
        CACHE.forget(fn)
    return fn


def converted(fn: Callable[..., Any], force: bool = False) -> Callable[..., Any]:
    """The converted form of a user function (`fn` itself for library code, a function marked
    `no_convert`, or one whose source is unavailable; with `force`, the latter raises)."""
    if not isinstance(fn, types.FunctionType):
        if isinstance(fn, types.MethodType) and isinstance(fn.__func__, types.FunctionType):
            f = converted(fn.__func__, force)
            return fn if f is fn.__func__ else types.MethodType(f, fn.__self__)
        if isinstance(fn, functools.partial):
            f = converted(fn.func, force)
            return fn if f is fn.func else functools.partial(f, *fn.args, **fn.keywords)
        call = getattr(type(fn), "__call__", None)  # noqa: B004  (the class's function itself)
        if isinstance(call, types.FunctionType) and not isinstance(fn, type):
            f = converted(call, force)  # an object whose class defines __call__
            return fn if f is call else types.MethodType(f, fn)
        return fn
    made_from = (fn.__code__, fn.__defaults__, fn.__kwdefaults__)
    done = _functions.get(fn)
    if done is not None and all(map(operator.is_, done[0], made_from)):
        return done[1]
    if (
        getattr(fn, "__sg_no_convert__", False)
        or not is_user_code(fn.__code__)
        or fn.__code__.co_flags & _NOT_CONVERTED
    ):
        _functions[fn] = (made_from, fn)  # remembered: library code is looked at once
        return fn
    try:
        code = _convert_code(fn)
    except SourceUnavailable as e:
        if force:
            raise SrcgradError(
                f"cannot convert {fn.__qualname__}: {e}; rewrite its control flow "
                "with sg.cond / sg.while_loop, or define it in a file",
                loc=user_location(),
            ) from None
        missing.no_source.append(fn)
        return fn
    if code is None:
        return fn
    new = _rebuild(fn, code)
    _functions[fn] = (made_from, new)
    return new


def converted_call(f: Any) -> Any:
    """The function converted code calls in place of `f`."""
    call = getattr(type(f), "__call__", None)  # noqa: B004  (the class's function itself)
    if isinstance(f, (types.FunctionType, types.MethodType, functools.partial)) or (
        not isinstance(f, type) and isinstance(call, types.FunctionType)
    ):
        return converted(f)
    return f


def _convert_code(fn: types.FunctionType) -> types.CodeType | None:
    original = fn.__code__
    with _lock:
        if original in _codes:
            return _codes[original]
    try:
        src = inspect.getsource(original)  # (not fn: functools.wraps would lead to the wrapped one)
    except (OSError, TypeError):
        raise SourceUnavailable(
            f"its source is not available (it was defined in "
            f"{original.co_filename}, which cannot be read)"
        ) from None
    node = _definition(textwrap.dedent(src), original)
    if node is None:
        with _lock:
            _codes[original] = None  # no single definition found: traced as it is
        return None
    node.decorator_list = []
    _strip_annotations(node)
    a = node.args
    a.defaults = [ast.Constant(None) for _ in a.defaults]
    a.kw_defaults = [None if d is None else ast.Constant(None) for d in a.kw_defaults]
    Converter(_counter).function(node)
    text = ast.unparse(node)
    node.name = DEF  # so that a recursive call reaches the module's function, not this one
    freevars = list(original.co_freevars)
    params = ast.arguments(
        posonlyargs=[],
        args=[ast.arg(arg=n) for n in ["ag__"] + freevars],
        kwonlyargs=[],
        kw_defaults=[],
        defaults=[],
    )
    factory = ast.FunctionDef(
        name="_sg_factory",
        args=params,
        decorator_list=[],
        returns=None,
        body=[node, ast.Return(value=ast.Name(id=node.name, ctx=ast.Load()))],
    )
    module = ast.Module(body=[factory], type_ignores=[])
    ast.copy_location(factory, node)
    ast.fix_missing_locations(module)
    ns: dict[str, Any] = {}
    exec(compile(module, original.co_filename, "exec", dont_inherit=True), ns)
    inner = ns["_sg_factory"](*[None] * (1 + len(freevars))).__code__
    inner = inner.replace(co_name=original.co_name)
    if sys.version_info >= (3, 11):  # co_qualname is new in 3.11
        inner = inner.replace(co_qualname=original.co_qualname)
    code = _rename(inner, original.co_name)
    with _lock:
        _codes[original] = code
        _sources[original] = text
    return code


def converted_source(fn: Callable[..., Any]) -> str:
    """The Python source srcgrad runs in place of `fn` when it converts it (as AutoGraph's
    `to_code`): the rewritten statements call the operators of srcgrad.convert.runtime."""
    fn = getattr(fn, "fn", fn)
    if converted(fn, force=True) is fn:
        raise SrcgradError(
            f"{getattr(fn, '__qualname__', fn)!r} is not converted (library code, "
            "sg.no_convert, or not a Python function)",
            loc=user_location(),
        )
    return _sources[fn.__code__]


def _definition(src: str, code: types.CodeType) -> ast.FunctionDef | None:
    """The `def` of `code` in its source (a lambda becomes a `def` returning its body), with
    the file's line numbers; None if it cannot be found unambiguously."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return None
    ast.increment_lineno(tree, code.co_firstlineno - 1)
    node = tree.body[0] if tree.body else None
    if isinstance(node, ast.FunctionDef) and node.name == code.co_name:
        return node
    if code.co_name != "<lambda>":
        return None
    names = list(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
    found = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Lambda)
        and n.lineno == code.co_firstlineno
        and [a.arg for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs] == names
    ]
    if len(found) != 1:
        return None
    lam = found[0]
    fn = ast.FunctionDef(
        name=LAMBDA,
        args=lam.args,
        body=[ast.Return(value=lam.body)],
        decorator_list=[],
        returns=None,
    )
    ast.copy_location(fn, lam)
    ast.copy_location(fn.body[0], lam)
    return fn


def _strip_annotations(node: ast.AST) -> None:
    """Drop annotations: they would be evaluated in the factory's namespace, not the module's."""
    for n in ast.walk(node):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            n.returns = None
        elif isinstance(n, ast.arg):
            n.annotation = None


def _rename(code: types.CodeType, outer: str) -> types.CodeType:
    """Generated functions (branch and loop bodies, thunks) take the name of the user function
    they come from, so that locations and tracebacks name it."""
    generated = code.co_name.startswith(GEN) or "_sgt" in code.co_varnames[: code.co_argcount]
    name = outer if generated else code.co_name
    consts = tuple(_rename(c, name) if isinstance(c, types.CodeType) else c for c in code.co_consts)
    kw: dict[str, Any] = {"co_name": name, "co_consts": consts}
    if generated and sys.version_info >= (3, 11):
        kw["co_qualname"] = name
    new = code.replace(**kw)
    _ours.add(new)
    return new


class _Runtime:
    """The module converted code calls as `ag__` (srcgrad/convert/runtime.py, which builds on
    this one, registers itself here)."""

    module: types.ModuleType


RUNTIME = _Runtime()


def _rebuild(fn: types.FunctionType, code: types.CodeType) -> types.FunctionType:
    runtime = RUNTIME.module
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    closure = tuple(types.CellType(runtime) if n == "ag__" else cells[n] for n in code.co_freevars)
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, closure or None)
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    new.__module__ = fn.__module__
    new.__doc__ = fn.__doc__
    new.__dict__.update(fn.__dict__)
    new.__wrapped__ = fn  # type: ignore[attr-defined]
    return new
