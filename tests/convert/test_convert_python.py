"""Converted Python keeps Python's meaning (issue 37): what a traced condition decides about
Python state that cannot be staged is refused with the variable and the line; a `raise` or
`assert` under a traced condition is raised when the program runs; exceptions of the branch
not taken never reach the user's `except`. The constructs that do convert are checked
against Python and JAX in tests/convert_corpus_state.py."""

from __future__ import annotations

import inspect

import jax
import numpy as np
import pytest

import srcgrad as sg


def _line(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, l in enumerate(lines) if text in l)


def _at(fn, text: str) -> str:
    return f"test_convert_python.py:{_line(fn, text)}"


# ------------------------------------------------------------------ state that cannot be staged


def keep_positives(xs):
    v = []
    for x in xs:
        if x < 0:
            continue
        v.append(x)
    return sum(v)


def double_until(x):
    lst = []
    while True:
        if x > 5:
            break
        lst.append(x)
        x = x * 2
    return sum(lst)


def pop_n(n, x):
    l = [x, 2 * x]
    for i in range(n):
        l.pop()
    return sum(l) * x


def grow_while(x):
    l = [x]
    while sg.sum(sg.stack(l)) < 10:
        l.append(x)
    return sg.sum(sg.stack(l))


def key_in_one_branch(a):
    x = {"a": a}
    if a < 0:
        x["b"] = -1.0
    return x["a"]


class Point:
    def __init__(self, x):
        self.x = x


def attribute_in_one_branch(a):
    p = Point(a)
    if a > 0:
        p.y = a
    return p.x


def concat_n(x, n):
    out = []
    for i in range(n):
        out += [x * i]
    return sum(out)


def tag_positive(x):
    seen = set()
    if x > 0:
        seen.add("positive")
    return x * 2


@pytest.mark.parametrize(
    "fn, args, message, line",
    [
        (
            keep_positives,
            (np.array([1.0, -2.0, 3.0]),),
            r"`v` has 1 item after the true branch and 0 items after the false branch "
            r"\(list.append at ",
            "v.append(x)",
        ),
        (
            double_until,
            (2.0,),
            r"`lst` has 1 item after the true branch and 0 items after the false branch "
            r"\(list.append at ",
            "lst.append(x)",
        ),
        (pop_n, (np.int32(0), 2.0), r"`l` shrinks in one iteration \(list.pop at ", "l.pop()"),
        (grow_while, (2.0,), r"`l` grows in one iteration \(list.append at ", "l.append(x)"),
        (key_in_one_branch, (1.0,), r"`x` has `x\['b'\]` set or deleted by one branch only", None),
        (attribute_in_one_branch, (1.0,), r"`p` has `p.y` set or deleted by one branch only", None),
        (
            concat_n,
            (1.0, np.int32(3)),
            r"`out` is a list of 0 items before this loop on a traced "
            r"value and a list of 1 item after one iteration",
            None,
        ),
        (
            tag_positive,
            (1.0,),
            r"`seen` gains or loses members \(set.add at ",
            'seen.add("positive")',
        ),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_python_state_a_traced_value_decides_is_refused(fn, args, message, line) -> None:
    argnum = 1 if isinstance(args[0], np.int32) else 0  # (pop_n's count comes first)
    with pytest.raises(sg.SrcgradError, match=message) as e:
        sg.grad(fn, argnums=argnum)(*args)
    if line is not None:
        assert _at(fn, line) in str(e.value)
    assert "test_convert_python.py" in str(e.value)  # the statement's line too


def in_place_numpy(x):
    buf = np.zeros(3)
    if x > 0:
        buf += 1.0
    return x * buf[0]


def test_numpy_array_changed_in_place_in_a_branch_is_refused() -> None:
    with pytest.raises(sg.SrcgradError, match=r"NumPy array \(`buf`\) is changed in place") as e:
        sg.grad(in_place_numpy)(1.0)
    assert _at(in_place_numpy, "if x > 0") in str(e.value)
    assert in_place_numpy(1.0) == 1.0  # and the array was not left read-only


def mixed_returns(x):
    if x > 0:
        return x
    return np.int32(1)


def test_return_types_differ_names_the_paths_not_internals() -> None:
    with pytest.raises(sg.SrcgradError) as e:
        sg.grad(mixed_returns)(1.0)
    text = str(e.value)
    assert "this function returns" in text and "_sg_ret" not in text
    assert "f64[]" in text and "i32[]" in text


def halve_until_small(x):
    if x > 100:
        return x
    return halve_until_small(x * 2)


def test_recursion_on_a_traced_value_is_a_clear_error() -> None:
    with pytest.raises(
        sg.SrcgradError,
        match="recurses without end when traced "
        r"\(`halve_until_small` calls itself",
    ) as e:
        sg.grad(halve_until_small)(3.0)
    assert _at(halve_until_small, "return halve_until_small") in str(e.value)


def scaled(a, b):
    y = a or b
    return sg.sum(y)


def test_or_of_different_shapes_is_refused() -> None:
    with pytest.raises(sg.SrcgradError, match=r"`a or b` on a traced `a`.*f64\[\] or a f64\[3\]"):
        sg.grad(scaled)(1.0, np.ones(3))


def counts_in_test(x):
    box = {"n": 0.0}

    def tick():
        box["n"] = box["n"] + 1.0
        return box["n"]

    while x * tick() < 10:
        x = x * 1.5
    return x


def test_side_effect_in_a_loop_test_is_refused() -> None:
    with pytest.raises(
        sg.SrcgradError,
        match=r"the test of this loop on a traced value changes "
        r"`box\['n'\]`",
    ):
        sg.grad(counts_in_test)(1.0)


# ------------------------------------------------------------------ exceptions and assertions


def checked_square(x):
    if x < 0:
        raise ValueError("negative input")
    return x * x


def asserted(x):
    assert x > 0, "x must be positive"
    return x * 3.0


def diverges(x):
    while x < 100:
        x = x * 2
        if x > 50:
            raise RuntimeError("too big")
    return x


@pytest.mark.parametrize(
    "fn, ok, bad, text",
    [
        (checked_square, 3.0, -3.0, "negative input"),
        (asserted, 2.0, -2.0, "x must be positive"),
        (diverges, 200.0, 3.0, "too big"),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_raise_under_a_traced_condition_is_raised_when_the_program_runs(fn, ok, bad, text) -> None:
    """Python raises only when the program takes the branch: traced, jitted and imperative."""
    want = jax.grad(fn)(ok)
    g = sg.grad(fn)
    np.testing.assert_allclose(g(ok), want)
    jitted = jax.jit(sg.grad(sg.convert(fn, max_iters=16)))
    np.testing.assert_allclose(jitted(ok), want)
    with pytest.raises(Exception, match=text):
        g(bad)
    with pytest.raises(Exception, match=text):
        jitted(bad)
    with pytest.raises(Exception, match=text):
        sg.jit(fn)(bad)
    x = sg.tensor(np.float64(bad))
    x.attach_grad()
    with pytest.raises(type(_python_error(fn, bad)), match=text), sg.autograd.record():
        fn(x)


def _python_error(fn, x) -> BaseException:
    try:
        fn(x)
    except Exception as e:
        return e
    raise AssertionError("expected Python to raise")


def caught(x):
    try:
        if x > 0:
            y = x * 2
        else:
            raise ValueError("neg")
    except ValueError:
        y = -x
    return y


def test_users_except_does_not_catch_the_branch_not_taken() -> None:
    """Python takes the `try` branch at x = 3: 6.0 (the old conversion gave -3.0)."""
    assert caught(3.0) == 6.0
    value, grad = sg.value_and_grad(caught)(3.0)
    assert (float(value), float(grad)) == (6.0, 2.0)
    with pytest.raises(Exception, match="neg"):  # staged: raised at run time, not handled
        sg.jit(caught)(-3.0)


TABLE = {"pos": 2.0}


def lookup(x):
    try:
        if x > 0:
            scale = TABLE["pos"]
        else:
            scale = TABLE["neg"]
    except KeyError:
        scale = 0.0
    return x * scale


def test_a_branch_that_fails_to_trace_is_not_caught_by_the_user() -> None:
    with pytest.raises(
        sg.SrcgradError,
        match=r"the false branch of this `if` on a traced value "
        r"raised KeyError\('neg'\)",
    ) as e:
        sg.grad(lookup)(1.0)
    assert _at(lookup, 'scale = TABLE["neg"]') in str(e.value)


def index_list(x, i):
    l = [x, 2 * x, 3 * x]
    return l[i] * x


def test_list_index_out_of_range_is_raised_when_the_program_runs() -> None:
    np.testing.assert_allclose(sg.grad(index_list)(2.0, np.int32(2)), 12.0)
    np.testing.assert_allclose(sg.grad(index_list)(2.0, np.int32(-1)), 12.0)
    with pytest.raises(Exception, match="list index out of range"):
        sg.grad(index_list)(2.0, np.int32(3))


# ------------------------------------------------------------- sg.no_convert after a conversion


def test_no_convert_after_a_conversion_applies_to_new_transformations() -> None:
    def f(x):
        if x > 0:
            return x * 2
        return -x

    assert float(sg.grad(f)(3.0)) == 2.0
    sg.no_convert(f)
    with pytest.raises(sg.TraceError, match="no Python truth value"):
        sg.grad(f)(3.0)


def int32_sum(xs):
    s = sg.zeros((), np.int32)
    for x in xs:
        if x < 0:
            continue
        s = s + x
    return s


def test_type_change_after_a_lowered_continue_says_so() -> None:
    """The `if not continue_flag:` the lowering adds is not the user's `if`: the message says
    what it guards (it named a "true branch" the user never wrote)."""
    with pytest.raises(
        sg.SrcgradError,
        match=r"`s` is f64\[\] where the statements after a "
        r"`break`, `continue` or `return` run and i32\[\]",
    ) as e:
        sg.grad(int32_sum)(np.array([1.0, -2.0]))
    assert _at(int32_sum, "s = s + x") in str(e.value)


def listed_range(x, n):
    return sum(x * i for i in list(range(n)))


def test_traced_range_outside_a_for_is_a_clear_error() -> None:
    with pytest.raises(
        sg.SrcgradError,
        match=r"a range\(\) with a traced bound can only be "
        "looped over by a `for` statement",
    ) as e:
        sg.grad(listed_range)(1.0, np.int32(3))
    assert _at(listed_range, "return sum") in str(e.value)


def validated(x, y):
    if x > 0:
        if y > 0:
            raise ValueError("y is positive")
        else:
            raise KeyError("y is not positive")
    return x * 3


def test_both_branches_raise_under_a_traced_condition() -> None:
    """Each path raises its own exception when the program runs, as Python."""
    g = sg.grad(validated)
    assert float(g(-1.0, 1.0)) == 3.0
    with pytest.raises(Exception, match="y is positive"):
        g(2.0, 1.0)
    with pytest.raises(Exception, match="y is not positive"):
        g(2.0, -1.0)
