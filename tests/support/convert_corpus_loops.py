"""The conversion corpus, part 2: loops to a tolerance (Newton, bisection, fixed points),
`break`, `continue` and `return` in loops, traced `range` bounds, written as people write
NumPy code.
srcgrad converts them (srcgrad.convert); tests/convert/test_convert_corpus.py checks each against
JAX.

The JAX twin of a function is this same source run by JAX eagerly with `sg` bound to
`jax.numpy` (JAX's eager mode follows Python control flow on concrete values).
"""

import math

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


# ------------------------------------------------------------------ loops to a tolerance


@case(2.0, max_iters=60)
def newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-12:
        x = x - (x * x - a) / (2 * x)
    return x


@case(5.0, max_iters=80)
def newton_cbrt(a):
    x = 1.0
    err = 1.0
    while err > 1e-13:
        x_new = x - (x**3 - a) / (3 * x**2)
        err = abs(x_new - x)
        x = x_new
    return x


@case(0.8, max_iters=200)
def fixed_point_cos(a):
    x = 0.5
    for _ in range(500):
        x_new = a * sg.cos(x)
        if abs(x_new - x) < 1e-12:
            break
        x = x_new
    return x


@case(3.0, max_iters=80)
def bisection_sqrt(a):
    lo, hi = 0.0, a + 1.0
    while hi - lo > 1e-7:
        mid = 0.5 * (lo + hi)
        if mid * mid > a:
            hi = mid
        else:
            lo = mid
    x = 0.5 * (lo + hi)
    return x - (x * x - a) / (2 * x)  # one Newton step: the derivative of the root


@case(0.7, max_iters=80)
def bisection_cubic(a):
    lo, hi = 0.0, 2.0
    while hi - lo > 1e-7:
        mid = (lo + hi) / 2
        if mid**3 + a * mid - 1 > 0:
            hi = mid
        else:
            lo = mid
    return lo - (lo**3 + a * lo - 1) / (3 * lo**2 + a)


@case(13.7, max_iters=20)
def halve_until_small(x):
    n = 0
    while x > 1:
        x = x / 2
        n = n + 1
    return x * n


@case(1.3, max_iters=60)
def exp_series(x):
    term = 1.0 + 0 * x
    total = term
    k = 1
    while abs(term) > 1e-14:
        term = term * x / k
        total = total + term
        k = k + 1
    return total


@case(V3, max_iters=300)
def gradient_descent(c):
    x = c * 0.0
    step = 0.1
    while True:
        g = 2 * (x - c) + 0.1 * x
        x = x - step * g
        if sg.sum(g * g) < 1e-16:
            break
    return sg.sum(x * c)


@case(np.array([[2.0, 0.5], [0.5, 1.0]]), max_iters=200)
def power_iteration(m):
    v = sg.ones(2) / math.sqrt(2.0)
    lam = 0.0
    while True:
        w = m @ v
        new = sg.sqrt(sg.sum(w * w))
        v = w / new
        if abs(new - lam) < 1e-13:
            break
        lam = new
    return new


@case(10.0, max_iters=60)
def babylonian_counted(a):
    x = a / 2
    i = 0
    while i < 50 and abs(x * x - a) > 1e-12:
        x = 0.5 * (x + a / x)
        i += 1
    return x + 0.0 * i


@case(0.6, max_iters=60)
def while_true_break(x):
    y = x
    while True:
        y = y * y + 0.1
        if y > 0.9 or y < 0.05:
            break
        y = y + 0.2
    return y


@case(1.5, max_iters=40)
def continued_fraction(x):
    v = x
    n = 0
    while n < 30:
        v = x + 1.0 / (1.0 + v)
        n += 1
    return v


@case(0.5, max_iters=60)
def secant(a):
    x0, x1 = 0.0, 1.0
    while abs(x1 - x0) > 1e-6:
        f0 = x0**3 + a * x0 - 1
        f1 = x1**3 + a * x1 - 1
        x0, x1 = x1, x1 - f1 * (x1 - x0) / (f1 - f0)
    return x1


@case(2.0, max_iters=100)
def kepler(e_scale):
    e = 0.3 * sg.tanh(e_scale)
    m = 1.2
    ecc = m
    delta = 1.0
    while abs(delta) > 1e-13:
        delta = (ecc - e * sg.sin(ecc) - m) / (1 - e * sg.cos(ecc))
        ecc = ecc - delta
    return ecc


@case(4.0, max_iters=40)
def newton_with_iteration_cap(a):
    x = a
    for it in range(40):
        fx = x * x - a
        if abs(fx) < 1e-12:
            break
        x = x - fx / (2 * x)
    return x * sg.log(a)


# ------------------------------------------------------------------ loops with break / continue


@case(0.9)
def sum_until_exceeds(x):
    s = 0.0
    for i in range(20):
        s = s + x * i
        if s > 10:
            break
    return s


@case(V5)
def skip_negatives(xs):
    s = 0.0
    for v in xs:
        if v < 0:
            continue
        s = s + v * v
    return s


@case(V5)
def first_crossing(xs):
    acc = 0.0
    for v in xs:
        acc = acc + v
        if acc > 1.5:
            return acc * 2
    return acc


@case(0.3)
def for_else(x):
    y = x
    for i in range(5):
        y = y * 1.5
        if y > 10:
            break
    else:
        y = y - 1
    return y


@case(0.4)
def nested_break(x):
    total = 0.0
    for i in range(4):
        for j in range(4):
            if j > i:
                break
            total = total + x ** (i + j)
    return total


@case(V5)
def loop_early_return(xs):
    for i in range(5):
        if xs[i] < 0:
            return sg.sum(xs[:2]) * i
    return sg.sum(xs)


@case(V5)
def running_max(xs):
    best = xs[0]
    for i in range(1, len(xs)):
        if xs[i] > best:
            best = xs[i]
    return best * sg.sum(xs)


@case(M23)
def rows_with_condition(m):
    total = 0.0
    for row in m:
        if sg.sum(row) > 0.5:
            total = total + sg.sum(row * row)
        else:
            total = total - sg.sum(row)
    return total


@case(1.1, max_iters=20)
def product_until(x):
    p = 1.0
    k = 0
    while p < 100:
        p = p * (x + k)
        k += 1
    return p


@case(0.7, 6, max_iters=8)
def traced_range_bound(x, n):
    s = x
    for i in range(n):
        s = s * 0.9 + sg.sin(s) * i
    return s


@case(0.7, 2, 7, max_iters=8)
def traced_range_start_stop(x, lo, hi):
    s = 0.0
    for i in range(lo, hi):
        s = s + x**2 / (i + 1)
    return s


@case(V5)
def enumerate_weighted(xs):
    s = 0.0
    for i, v in enumerate(xs):
        if i % 2 == 0:
            s = s + v * i
        else:
            s = s - v
    return s * s


@case(V5)
def continue_and_break(xs):
    s = 0.0
    for v in xs:
        if v < 0:
            continue
        if v > 1.8:
            break
        s = s + sg.exp(v)
    return s
