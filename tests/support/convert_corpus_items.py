"""The conversion corpus, part 3: item assignment, lists, recursion unrolled by Python, helpers,
methods, closures and nesting, written as people write NumPy code.
srcgrad converts them (srcgrad.convert); tests/convert/test_convert_corpus.py checks each against
JAX.

The JAX twin of a function is this same source run by JAX eagerly with `sg` bound to
`jax.numpy` (JAX's eager mode follows Python control flow on concrete values); a function
that assigns items or builds arrays from lists has a hand-written twin `<name>_jax` using
`.at[]` and `jnp.stack`, defined only in the twin (under `if TWIN:`).
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


# ------------------------------------------------------------------ item assignment


@case(V3)
def fill_buffer(x):
    y = sg.zeros(3)
    for i in range(3):
        y[i] = x[i] * 2 + y[i - 1]
    y[0] += x[2]
    return sg.sum(y * y)


@case(V5)
def manual_cumsum(x):
    out = sg.zeros_like(x)
    out[0] = x[0]
    for i in range(1, x.shape[0]):
        out[i] = out[i - 1] + x[i]
    return sg.sum(out * sg.cos(out))


@case(V5)
def slice_assign(x):
    y = x * 1.0
    y[1:3] = x[:2] * 2
    y[3:] += 1.0
    return sg.sum(y**3)


@case(V5)
def mask_assign(x):
    y = x * x
    y[x < 0] = 0.0
    return sg.sum(y * x)


@case(M23)
def assign_2d(m):
    out = sg.zeros((2, 3))
    for i in range(2):
        for j in range(3):
            out[i, j] = m[i, j] * (i + j + 1)
    return sg.sum(out * out)


@case(V5)
def conditional_item_update(x):
    y = x * 1.0
    for i in range(5):
        if x[i] > 0.6:
            y[i] = x[i] ** 2
        else:
            y[i] = -x[i]
    return sg.sum(y)


@case(V3)
def numpy_buffer(x):
    out = np.zeros(3)
    for i in range(3):
        out[i] = x[i] * (i + 1)
    return sg.sum(out * out)


@case(V5)
def swap_items(x):
    y = x * 1.0
    y[0], y[4] = x[4], x[0]
    return sg.sum(y * sg.arange(5.0))


@case(V5)
def prefix_product(x):
    p = sg.ones(5)
    for i in range(1, 5):
        p[i] = p[i - 1] * x[i - 1]
    return sg.sum(p)


@case(V5)
def stencil(x):
    d = sg.zeros(5)
    for i in range(1, 4):
        d[i] = x[i - 1] - 2 * x[i] + x[i + 1]
    return sg.sum(d * d)


@case(np.array([1.0, 2.0, 3.0, 4.0]))
def thomas_solve(dvec):
    n = 4
    a, b, c = -1.0, 4.0, -1.0
    cp = sg.zeros(n)
    dp = sg.zeros(n)
    cp[0] = c / b
    dp[0] = dvec[0] / b
    for i in range(1, n):
        m = b - a * cp[i - 1]
        cp[i] = c / m
        dp[i] = (dvec[i] - a * dp[i - 1]) / m
    x = sg.zeros(n)
    x[n - 1] = dp[n - 1]
    for i in range(n - 2, -1, -1):
        x[i] = dp[i] - cp[i] * x[i + 1]
    return sg.sum(x * x)


@case(V5, 3, max_iters=8)
def item_assign_traced_loop(x, n):
    y = x * 1.0
    for i in range(n):
        y[i] = y[i] * y[i + 1]
    return sg.sum(y)


@case(V5, max_iters=6)
def assign_in_while(x):
    y = x * 1.0
    i = 0
    while y[i] > 0:
        y[i] = -y[i] * 0.5
        i += 1
    return sg.sum(y * x)


# ------------------------------------------------------------------ lists and recursion


@case(1.5)
def list_of_numbers_and_arrays(a):
    return sg.sum([1.0, a * a, 2.0]) + sg.sum(sg.array([a, 2 * a]) ** 2)


@case(V5)
def append_then_stack(x):
    out = []
    for i in range(5):
        out.append(x[i] ** 2 + i)
    return sg.sum(sg.stack(out) * x)


@case(V5)
def list_comprehension(x):
    parts = [sg.sin(v) * v for v in x if True]
    return sg.sum(sg.stack(parts))


@case(0.7)
def polynomial_from_list(x):
    coeffs = [1.0, -2.0, 0.5, 3.0]
    y = 0.0
    for c in coeffs:
        y = y * x + c
    return y


@case(V3)
def concat_pieces(x):
    pieces = [x, x * 2, sg.sin(x)]
    return sg.sum(sg.concatenate(pieces) ** 2)


@case(0.9)
def tuple_results(x):
    def stats(v):
        return v * v, sg.sin(v)

    a, b = stats(x)
    if a > b:
        return a - b
    return b - a


def _fib_like(x, n):
    if n <= 1:
        return x
    return _fib_like(x, n - 1) * 0.5 + _fib_like(x, n - 2) * sg.sin(x)


@case(0.6)
def recursion_unrolled(x):
    return _fib_like(x, 5)


def _power(x, n):
    if n == 0:
        return x * 0 + 1
    half = _power(x, n // 2)
    if n % 2 == 0:
        return half * half
    return half * half * x


@case(1.1)
def recursive_power(x):
    return _power(x, 7)


def _clamp_rec(x, depth):
    if depth == 0 or x < 1:
        return x
    return _clamp_rec(x / 2, depth - 1) + 0.1


@case(6.3)
def recursion_branch_on_value(x):
    return _clamp_rec(x, 5)


@case(V5)
def moving_average(x):
    avgs = []
    for i in range(3):
        avgs.append((x[i] + x[i + 1] + x[i + 2]) / 3)
    return sg.sum(sg.stack(avgs) ** 2)


@case(V3)
def list_of_pairs(x):
    pairs = [(x[0], x[1]), (x[1], x[2])]
    s = 0.0
    for a, b in pairs:
        if a > b:
            s = s + a * b
        else:
            s = s + a - b
    return s


# ------------------------------------------------------------------ misc


@case(np.array([[0.1, 0.2], [0.3, -0.1], [0.2, 0.4]]))
def rnn_over_rows(xs):
    h = sg.zeros(2)
    w = np.array([[0.5, -0.3], [0.2, 0.8]])
    for x in xs:
        h = sg.tanh(h @ w + x)
        if sg.sum(h) > 0.5:
            h = h * 0.9
    return sg.sum(h * h)


@case(0.6, max_iters=20)
def while_in_for(x):
    total = 0.0
    for k in range(3):
        y = x + k
        while y > 0.5:
            y = y * 0.6
        total = total + y
    return total


@case(0.8)
def method_with_branch(x):
    class Scaler:
        def __init__(self, s):
            self.s = s

        def apply(self, v):
            if v > 0.5:
                return v * self.s
            return v

    return Scaler(3.0).apply(x) + Scaler(2.0).apply(x * x)


@case(0.7)
def closure_with_branch(x):
    k = 2.0

    def inner(v):
        if v > 0.5:
            return v * k
        return v / k

    return inner(x) * inner(x * 0.5)


@case(0.4)
def lambda_with_conditional(x):
    f = lambda v: v * v if v > 0.3 else v
    return f(x) + f(x * 0.5)


@case(0.5, max_iters=40)
def while_with_and(x):
    i = 0
    y = x
    while i < 30 and y < 2.0:
        y = y * 1.2 + 0.05
        i += 1
    return y


@case(V5)
def loop_over_array_accumulate(xs):
    s = 0.0
    m = 1.0
    for v in xs:
        s = s + v * m
        m = m * 0.5
    return s * s


@case(V5)
def argmax_by_loop(xs):
    best, best_i = xs[0], 0
    for i in range(1, 5):
        if xs[i] > best:
            best, best_i = xs[i], i
    return best * (best_i + 1)


@case(0.3, max_iters=50)
def logistic_map_until(x):
    r = 3.2
    y = x
    n = 0
    while n < 40:
        y = r * y * (1 - y)
        n += 1
        if y > 0.79:
            break
    return y


@case(1.3)
def nested_helpers(x):
    def sq(v):
        return v * v

    def choose(v):
        if sq(v) > 1:
            return sq(v) - 1
        return 1 - sq(v)

    return choose(x) + choose(x / 2)


@case(V3)
def norm_normalize(x):
    n = sg.sqrt(sg.sum(x * x))
    if n > 1:
        x = x / n
    return sg.sum(x * sg.arange(3.0))


@case(0.45)
def deep_nesting(x):
    y = x
    for i in range(3):
        if y > 0.5:
            for j in range(2):
                if j == 1 and y > 1:
                    break
                y = y * 1.3
        else:
            y = y + 0.2
    return y


if TWIN:  # the hand-written JAX twins (see the module docstring)

    def fill_buffer_jax(x):
        y = sg.zeros(3)
        for i in range(3):
            y = y.at[i].set(x[i] * 2 + y[i - 1])
        y = y.at[0].add(x[2])
        return sg.sum(y * y)

    def manual_cumsum_jax(x):
        out = sg.zeros_like(x)
        out = out.at[0].set(x[0])
        for i in range(1, x.shape[0]):
            out = out.at[i].set(out[i - 1] + x[i])
        return sg.sum(out * sg.cos(out))

    def slice_assign_jax(x):
        y = x * 1.0
        y = y.at[1:3].set(x[:2] * 2)
        y = y.at[3:].add(1.0)
        return sg.sum(y**3)

    def mask_assign_jax(x):
        y = sg.where(x < 0, 0.0, x * x)
        return sg.sum(y * x)

    def assign_2d_jax(m):
        out = sg.zeros((2, 3))
        for i in range(2):
            for j in range(3):
                out = out.at[i, j].set(m[i, j] * (i + j + 1))
        return sg.sum(out * out)

    def conditional_item_update_jax(x):
        y = x * 1.0
        for i in range(5):
            y = y.at[i].set(x[i] ** 2 if x[i] > 0.6 else -x[i])
        return sg.sum(y)

    def numpy_buffer_jax(x):
        out = sg.zeros(3)
        for i in range(3):
            out = out.at[i].set(x[i] * (i + 1))
        return sg.sum(out * out)

    def swap_items_jax(x):
        y = (x * 1.0).at[0].set(x[4]).at[4].set(x[0])
        return sg.sum(y * sg.arange(5.0))

    def prefix_product_jax(x):
        p = sg.ones(5)
        for i in range(1, 5):
            p = p.at[i].set(p[i - 1] * x[i - 1])
        return sg.sum(p)

    def stencil_jax(x):
        d = sg.zeros(5)
        for i in range(1, 4):
            d = d.at[i].set(x[i - 1] - 2 * x[i] + x[i + 1])
        return sg.sum(d * d)

    def thomas_solve_jax(dvec):
        n = 4
        a, b, c = -1.0, 4.0, -1.0
        cp, dp = sg.zeros(n), sg.zeros(n)
        cp = cp.at[0].set(c / b)
        dp = dp.at[0].set(dvec[0] / b)
        for i in range(1, n):
            m = b - a * cp[i - 1]
            cp = cp.at[i].set(c / m)
            dp = dp.at[i].set((dvec[i] - a * dp[i - 1]) / m)
        x = sg.zeros(n).at[n - 1].set(dp[n - 1])
        for i in range(n - 2, -1, -1):
            x = x.at[i].set(dp[i] - cp[i] * x[i + 1])
        return sg.sum(x * x)

    def item_assign_traced_loop_jax(x, n):
        y = x * 1.0
        for i in range(n):
            y = y.at[i].set(y[i] * y[i + 1])
        return sg.sum(y)

    def assign_in_while_jax(x):
        y = x * 1.0
        i = 0
        while y[i] > 0:
            y = y.at[i].set(-y[i] * 0.5)
            i += 1
        return sg.sum(y * x)

    def list_of_numbers_and_arrays_jax(a):
        return sg.sum(sg.stack([1.0, a * a, 2.0])) + sg.sum(sg.stack([a, 2 * a]) ** 2)
