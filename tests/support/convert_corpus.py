"""The conversion corpus, part 1: branches on values (`if`/`elif`/`else`, conditional
expressions, `and`/`or`/`not`, early returns), written as people write NumPy code.
srcgrad converts them (srcgrad.convert); tests/convert/test_convert_corpus.py checks each against
JAX.

The JAX twin of a function is this same source run by JAX eagerly with `sg` bound to
`jax.numpy` (JAX's eager mode follows Python control flow on concrete values).
"""

import numpy as np

import srcgrad as sg  # the twin replaces this line: import jax.numpy as sg

TWIN = False
CASES: dict = {}


def case(*args, max_iters=None, second=True):
    """Register a corpus function with its arguments (argument 0 is differentiated);
    `max_iters` bounds its loops under jax.jit."""

    def deco(fn):
        CASES[fn.__name__] = (fn, args, max_iters, second)
        return fn

    return deco


V3 = np.array([0.7, -1.3, 2.1])
V5 = np.array([0.5, 1.5, -0.25, 2.0, 0.8])
M23 = np.array([[0.3, -0.8, 1.2], [1.1, 0.4, -0.6]])


# ------------------------------------------------------------------ branches on values


@case(1.3)
def relu_square(x):
    if x > 0:
        return x * x
    else:
        return 0.1 * x


@case(-0.4)
def relu_square_neg(x):
    return relu_square(x) + relu_square(x + 1.0)


@case(0.6)
def piecewise3(x):
    if x < -1:
        y = -x - 0.5
    elif x < 1:
        y = 0.5 * x * x
    else:
        y = x - 0.5
    return y * sg.exp(x)


@case(-1.7)
def abs_cubed(x):
    if x < 0:
        x = -x
    return x * x * x


@case(2.5)
def clip_manual(x):
    lo, hi = -1.0, 2.0
    if x > hi:
        x = hi + 0.1 * (x - hi)
    elif x < lo:
        x = lo
    return x * sg.sin(x)


@case(0.4)
def cond_expression(x):
    y = x * x if x > 1 else sg.sin(x)
    return y + (2.0 * x if y > 0 else -x)


@case(1.4)
def nested_if(x):
    if x > 0:
        if x > 1:
            r = x**3
        else:
            r = x**2
    else:
        if x < -1:
            r = -x
        else:
            r = x * 0.5
    return r


@case(V3)
def branch_on_sum(x):
    if sg.sum(x) > 0:
        y = x * 2
    else:
        y = x * x
    return sg.sum(y * sg.cos(x))


@case(V3 * 0.2)
def huber(x):
    total = 0.0
    for v in x:
        if abs(v) < 0.25:
            total = total + 0.5 * v * v
        else:
            total = total + 0.25 * (abs(v) - 0.125)
    return total


@case(0.8)
def and_condition(x):
    if x > 0 and x < 2:
        return sg.sin(x) * x
    return x


@case(-2.3)
def or_not_condition(x):
    if not x > -2 or x > 5:
        y = x * x
    else:
        y = -x
    return y * 3.0


@case(V5)
def branch_many_vars(x):
    m = sg.mean(x)
    a, b = x * 1.0, 0.0
    if m > 0.5:
        a = x - m
        b = m * m
    else:
        b = -m
    return sg.sum(a * a) + b


@case(0.9, "tanh")
def python_flag(x, mode):
    if mode == "tanh":
        y = sg.tanh(x)
    else:
        y = x
    if y > 0.5:
        y = y * 2
    return y


@case(0.5)
def chained_compare(x):
    if 0 < x < 1:
        return x * (1 - x)
    return x * 0.0


@case(V3)
def shape_branch(x):
    if x.shape[0] > 2 and sg.max(x) > 1:
        return sg.sum(x**2)
    return sg.sum(x)


@case(1.2, 0.7)
def max_of_two(x, y):
    if x > y:
        m = x
    else:
        m = y
    return m * x


@case(V5)
def soft_threshold(x):
    out = 0.0
    for v in x:
        if v > 0.6:
            out = out + (v - 0.6)
        elif v < -0.6:
            out = out + (v + 0.6)
    return out * out


@case(0.7)
def tuple_assign_branch(x):
    a, b = (x, x * 2) if x > 0 else (x * x, x)
    return a * b


@case(3.0)
def early_return(x):
    if x > 2:
        return sg.log(x)
    y = x * x
    return y


@case(0.3)
def many_returns(x):
    if x < -1:
        return -x
    if x < 0:
        return x * x
    if x < 1:
        return sg.sin(x)
    return x


def _helper_branch(t):
    if t > 1:
        return t * t
    return t


@case(0.8)
def calls_branchy_helper(x):
    return _helper_branch(x * 2) + _helper_branch(x)


@case(0.35)
def elif_chain(x):
    if x < 0.1:
        k = 1.0
    elif x < 0.2:
        k = 2.0
    elif x < 0.3:
        k = 3.0
    elif x < 0.4:
        k = 4.0
    else:
        k = 5.0
    return k * x * x


@case(0.3)
def smoothstep(x):
    if x <= 0:
        return x * 0
    elif x >= 1:
        return x * 0 + 1
    return x * x * (3 - 2 * x)
