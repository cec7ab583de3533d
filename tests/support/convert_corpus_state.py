"""The conversion corpus, part 4: Python state that a traced branch or loop changes besides
its variables -- dict and list items, attributes, closures, `nonlocal` and `global` names --
and the Python constructs whose meaning the conversion must keep (`x or y` returns an
operand, `return` in `finally`, `del`, a walrus in a `while` test, `super()`, `in`), at every
place the converter joins state: if/else, loop carries, break/continue/return flags,
`while ... else`. Written as people write Python; tests/test_convert_corpus.py checks each
against JAX and against the function run on Python numbers (Python's own result).

The JAX twin of a function is this same source run by JAX eagerly with `sg` bound to
`jax.numpy` (JAX's eager mode follows Python control flow on concrete values).
"""

import contextlib
import functools

import numpy as np

import srcgrad as sg  # the twin replaces this line: import jax.numpy as sg

TWIN = False
CASES: dict = {}


def case(*args, max_iters=None, second=False, also=None):
    """Register a corpus function with its arguments (argument 0 is differentiated);
    `max_iters` bounds its loops under jax.jit; `also`: a second argument 0 that takes the
    other side of the function's traced conditions (registered as `<name>@2`)."""

    def deco(fn):
        CASES[fn.__name__] = (fn, args, max_iters, second)
        if also is not None:
            CASES[fn.__name__ + "@2"] = (fn, (also,) + args[1:], max_iters, second)
        return fn

    return deco


V3 = np.array([0.7, -1.3, 2.1])
V5 = np.array([0.5, 1.5, -0.25, 2.0, 0.8])


class Box:
    """A user object with attributes (and a method that changes one)."""

    def __init__(self, value):
        self.value = value
        self.scale = 2.0

    def bump(self, by):
        self.value = self.value + by


# -------------------------------------------------------------- items and attributes in branches


@case(3.0, also=-2.0)
def dict_item_each_branch(a):
    x = {"a": a}
    if x["a"] > 0:
        x["b"] = 1.0
    else:
        x["b"] = -1.0
    return x["a"] * x["b"]


@case(1.5, also=-0.5)
def dict_item_traced_value(a):
    x = {"a": a, "b": 0.0}
    if a > 0:
        x["b"] = a * a
    return x["a"] + x["b"] * 3.0


@case(2.0, also=-1.0)
def list_item_one_branch(a):
    x = [a, 1.0, a * 2]
    if a < 0:
        x[1] = -1.0
        x[2] = x[2] * a
    return x[0] * x[1] + x[2]


@case(0.6, also=-0.6)
def nested_containers(a):
    state = {"hist": [a, a * a], "n": (1.0, 2.0)}
    if a > 0:
        state["hist"][1] = state["hist"][1] * 3.0
        state["n"] = (state["n"][1], a)
    return state["hist"][0] * state["hist"][1] + state["n"][0] * state["n"][1]


@case(-1.0, also=2.0)
def attribute_one_branch(c):
    x = Box(c)
    x.b = 2.0
    if c > 0:
        x.b = 7.0
    return x.b * c


class Pair:
    """A user object without a __dict__."""

    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b


@case(2.0, also=-2.0)
def slotted_attribute_one_branch(x):
    p = Pair(x, 1.0)
    if x > 0:
        p.b = x * 3.0
    return p.a * p.b


@case(0.8, also=-0.3)
def method_changes_attribute(c):
    box = Box(c * c)
    if c > 0:
        box.bump(c)
    else:
        box.scale = c
    return box.value * box.scale


def _record(log, value):
    log[0] = log[0] + value


@case(1.2, also=-1.2)
def helper_writes_argument(x):
    log = [0.0]
    if x > 0:
        _record(log, x * x)
    else:
        _record(log, -x)
    _record(log, x)
    return log[0]


WEIGHTS = {"w": 1.0}


def _set_weight(v):
    WEIGHTS["w"] = v


def _weight():
    return WEIGHTS["w"]


@case(2.0, also=-2.0)
def helper_changes_a_global(x):
    _set_weight(1.0)
    if x > 0:
        _set_weight(x * 3.0)
    return _weight() * x


CALLS = 0.0


def _count(v):
    global CALLS
    CALLS = CALLS + v


@case(2.0, also=-2.0)
def global_rebound_by_a_helper(x):
    global CALLS
    CALLS = 1.0
    if x > 0:
        _count(x)
    return x * CALLS


def _tally():
    count = 0.0

    def add(v):
        nonlocal count
        count = count + v
        return count

    def reset():
        nonlocal count
        count = 0.0

    return add, reset


_ADD, _RESET = _tally()


@case(2.0, also=-2.0)
def closure_rebound_by_a_helper(x):
    _RESET()
    if x > 0:
        _ADD(x)
    return _ADD(1.0) * x


def _accumulator():
    state = {"n": 0.0}

    def add(v):
        state["n"] = state["n"] + v
        return state["n"]

    return add


@case(2.0, 3, max_iters=8)
def closure_state_in_loop(x, n):
    add = _accumulator()
    total = 0.0
    for i in range(n):
        total = add(x * i) + total
    return total


@case(1.1, also=-0.4)
def tuple_rebinding(x):
    pair = (x, 1.0)
    if x > 0:
        pair = (pair[0] * 2.0, pair[1] + x)
    return pair[0] * pair[1]


@case(0.5, also=-0.5)
def alias_sees_the_join(x):
    params = {"w": x}
    same = params
    if x > 0:
        params["w"] = x * 3.0
    return same["w"] * x


# ------------------------------------------------------------------ operands, returns, del, with


@case(1.5, also=0.5)
def or_returns_an_operand(x):
    y = (x > 1) or 2.0  # True, or 2.0
    z = x or 5.0
    return y * x + z * (x and 3.0)


@case(0.5, also=-0.5)
def bool_operators_still_bools(x):
    if x > 0 and x < 1 or x < -2:
        return x * x
    return -x


@case(3.0, also=0.5)
def return_in_finally(x):
    if x > 0:
        try:
            return x * 2
        finally:
            if x > 1:
                return x * 3
    return x


@case(3.0, also=1.5)
def break_in_finally_discards_return(x):
    for _ in range(2):
        try:
            return x * 2
        finally:
            if x > 2:
                break
    return x * 5


@case(3.0, also=0.5)
def continue_in_finally_discards_return(x):
    for _ in range(2):
        try:
            if x > 0:
                return x * 2
        finally:
            if x > 1:
                return x * 3
            continue
    return x


@case(3.0, also=-3.0)
def try_else_returns(x):
    try:
        if x > 0:
            return x * 2
    except ValueError:
        return -x
    else:
        return x * 3


@case(2.0, also=-1.0)
def with_every_path_returns(x):
    with contextlib.nullcontext():
        if x > 0:
            return x * 2
        return -x * x


@case(2.0, also=-1.0)
def try_finally_every_path_returns(x):
    total = x
    try:
        if x > 0:
            return total * 2
        return total * total
    finally:
        total = 0.0


@case(3.0, also=-3.0)
def del_in_branch(x):
    y = x * 2
    if x < 0:
        del y
        return 0.5 * x
    return y * x


@case(0.7, also=-0.7)
def del_temporary(x):
    tmp = x * 2
    if x > 0:
        y = tmp + 1
        del tmp
    else:
        y = tmp - 1
    return y * x


@case(np.array([1.0, 2.0, 4.0]), also=np.array([1.0, 3.0, 4.0]))
def in_traced_array(xs):
    if 2.0 in sg.round(xs):
        return sg.sum(xs * xs)
    return -sg.sum(xs)


# ------------------------------------------------------------------ closures, nonlocal, global


@case(3.5, max_iters=8)
def closure_reads_loop_variable(n):
    i = 0.0
    s = 0.0
    get_i = lambda: i
    while i < n:
        s = s + get_i() * n
        i += 1
    return s


@case(0.9, 4, max_iters=8, also=2.5)
def nested_def_reads_loop_variable(x, n):
    k = 0
    acc = x

    def term():
        return acc * 0.5 + k

    while k < n:
        acc = term() * x
        k += 1
    return acc


@case(0.8, also=-0.8)
def nonlocal_counter_in_branch(x):
    total = x

    def add(v):
        nonlocal total
        total = total + v

    if x > 0:
        add(x * x)
    else:
        add(1.0)
    return total * x


GLOBAL_SUM = 0.0


@case(1.5, 3, max_iters=8)
def global_updated_in_loop(x, n):
    global GLOBAL_SUM
    GLOBAL_SUM = 0.0
    for i in range(n):
        GLOBAL_SUM = GLOBAL_SUM + x * i
    return GLOBAL_SUM


class Counter:
    """A callable object that reads its own state."""

    def __init__(self):
        self.i = 0.0

    def __call__(self):
        return self.i


@case(3.5, max_iters=8)
def callable_object_reads_loop_state(n):
    c = Counter()
    s = 0.0
    while c.i < n:
        s = s + c() * n
        c.i = c.i + 1.0
    return s


# ------------------------------------------------------------------ state carried by loops


@case(1.5, 3, max_iters=8)
def attribute_in_traced_loop(x, n):
    acc = Box(0.0)
    for i in range(n):
        acc.value = acc.value + x * acc.scale
    return acc.value


@case(0.9, max_iters=40)
def dict_item_in_while(x):
    d = {"s": x, "steps": 0}
    while d["s"] < 10.0:
        d["s"] = d["s"] * 1.5 + x
        d["steps"] = d["steps"] + 1
    return d["s"] * d["steps"]


@case(2.0, 3, max_iters=8)
def list_indexed_by_traced_counter(x, n):
    t = [0.0, 0.0, 0.0]
    for i in range(n):
        t[i] = x * i
    s = 0.0
    for i in range(1, n):
        s = s + t[i - 1] * t[i]
    return s + t[0] + t[1] + t[2]


@case(V5)
def int_start_with_continue(xs):
    s = 0
    for x in xs:
        if x < 0:
            continue
        s += x * x
    return s


@case(V5)
def dict_item_with_continue(xs):
    stats = {"sum": 0.0, "sq": 0.0}
    for x in xs:
        if x < 0:
            continue
        stats["sum"] = stats["sum"] + x
        stats["sq"] = stats["sq"] + x * x
    return stats["sq"] - stats["sum"]


@case(0.3, max_iters=30, also=2.5)
def attribute_with_break(x):
    box = Box(x)
    while box.value < 50.0:
        if box.value * x > 4.0:
            break
        box.value = box.value * 2.0 + x
        box.scale = box.scale + 1.0
    return box.value * box.scale


@case(V5)
def int_start_with_break(xs):
    s = 0
    for x in xs:
        if x > 1.8:
            break
        s = s + x
    return s


@case(2.0, 3, max_iters=8)
def range_through_a_parameter(x, n, count=range):
    s = 0.0
    for i in count(n):
        s = s + x * (i + 1)
    return s


def _steps(n):
    return range(n)


@case(2.0, 3, max_iters=8)
def range_from_a_helper(x, n):
    s = x
    for _ in _steps(n):
        s = s * x
    return s


@case(3.0, max_iters=20, also=0.9)
def walrus_in_while_test(x):
    s = 0.0
    while (y := x * 2) < 100:
        x = y
        s = s + x
    return s + y


@case(0.6, max_iters=40, also=7.0)
def while_else_break(x):
    steps = 0.0
    while x < 5.0:
        x = x * 1.7
        steps = steps + 1.0
        if steps > 3:
            break
    else:
        x = x * 10.0
    return x + steps


@case(V5, also=V5[::-1].copy())
def return_from_loop_with_state(xs):
    seen = {"last": 0.0}
    for x in xs:
        if x > 1.8:
            return x * seen["last"]
        seen["last"] = x
    return seen["last"]


# ------------------------------------------------------------------ methods, decorators, callables


class Base:
    def f(self, x):
        return x * 2.0


class Derived(Base):
    def f(self, x):
        if x > 0:
            return super().f(x) + x
        return -x * x


@case(1.5, also=-1.5)
def zero_argument_super(x):
    return Derived().f(x)


def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args):
        return fn(*args)

    return wrapper


@_logged
def _wrapped_branch(x):
    if x > 0:
        return x * 2.0
    return -x


@case(2.0, also=-2.0)
def functools_wraps_decorator(x):
    return _wrapped_branch(x) * x


class Doubler:
    def __call__(self, x):
        while x < 10.0:
            x = x * 2.0
        return x


@case(3.0, max_iters=10, also=0.7)
def callable_object_with_while(x):
    return Doubler()(x)
