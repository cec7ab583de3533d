"""Every public name of jax.numpy is in `sg`, or excluded here with its reason, or listed as
not yet built (PENDING, issue 26: a name leaves that list when it arrives)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

import srcgrad as sg

#: Names that mean nothing for differentiable array code in srcgrad, with the reason.
EXCLUDED = {
    "ComplexWarning": "a warning class for complex casts; srcgrad's values are real",
    "array_repr": "printing",
    "array_str": "printing",
    "get_printoptions": "printing options",
    "set_printoptions": "printing options",
    "printoptions": "printing options",
    "savez": "file I/O",
    "fromfile": "file I/O",
    "frombuffer": "construction from raw bytes (I/O)",
    "fromstring": "construction from text (I/O)",
    "fromiter": "construction from a Python iterator (I/O)",
    "from_dlpack": "array interchange with other libraries (I/O)",
    "frompyfunc": "ufunc machinery",
    "ufunc": "ufunc machinery",
    "vectorize": "ufunc machinery (use jax.vmap around srcgrad functions)",
    "ndarray": "the jax.Array type; srcgrad's traced values are sg.Variable",
    "fft": "complex-valued transforms; srcgrad's values are real",
    "sort_complex": "complex-valued; srcgrad's values are real",
    "roots": "complex-valued eigenvalues of the companion matrix",
    "einsum_path": "contraction-order planning, no array result (sg.einsum plans its own)",
    "packbits": "bit packing of uint8 data",
    "unpackbits": "bit packing of uint8 data",
    "trim_zeros": "a result whose length depends on the values (no size= in jax.numpy)",
    "place": "in-place mutation of a NumPy array (jax.numpy raises)",
    "put": "in-place mutation (jax.numpy's requires inplace=False; use x.at[...].set)",
    "fill_diagonal": "in-place mutation (jax.numpy's requires inplace=False; use x.at[...].set)",
}

#: Names of jax.numpy that srcgrad does not have yet, each with the reason (none left).
PENDING: dict[str, str] = {}


def _public_names() -> list[str]:
    return sorted(n for n in dir(jnp) if not n.startswith("_"))


def test_every_jax_numpy_name_is_in_sg_or_listed() -> None:
    unaccounted = [
        n for n in _public_names() if not hasattr(sg, n) and n not in EXCLUDED and n not in PENDING
    ]
    assert not unaccounted, f"jax.numpy names neither in sg nor listed: {unaccounted}"


def test_the_lists_are_current() -> None:
    names = set(_public_names())
    assert not EXCLUDED.keys() & PENDING
    for n in sorted(EXCLUDED.keys() | PENDING):
        assert n in names, f"{n!r} is no longer a jax.numpy name: drop it from this file"
        assert not hasattr(sg, n), f"sg.{n} exists now: drop it from EXCLUDED/PENDING"
    assert all(reason.strip() for reason in [*EXCLUDED.values(), *PENDING.values()])


def test_constants_and_dtype_names_are_jax_numpy_s() -> None:
    for n in ("e", "pi", "inf", "euler_gamma"):
        assert getattr(sg, n) == getattr(jnp, n)
    assert np.isnan(sg.nan) and sg.newaxis is None
    for n in (
        "float32",
        "int32",
        "bool_",
        "float64",
        "uint8",
        "bfloat16",
        "floating",
        "finfo",
        "promote_types",
        "s_",
    ):
        assert getattr(sg, n) is getattr(jnp, n), n
    out = sg.jit(lambda x: sg.zeros((2,), sg.float32) + x[sg.newaxis, 0] * sg.pi)(
        np.ones(3, np.float32)
    )
    assert out.dtype == np.float32 and out.shape == (2,)


def test_shape_and_dtype_utilities_on_traced_values() -> None:
    seen = {}

    def f(x: sg.Variable) -> sg.Variable:
        seen.update(
            ndim=sg.ndim(x),
            shape=sg.shape(x),
            size=sg.size(x),
            size1=sg.size(x, 1),
            result=sg.result_type(x, 1.0),
            scalar=sg.isscalar(x),
            iterable=sg.iterable(x),
            real=sg.isrealobj(x),
            complex=sg.iscomplexobj(x),
            tril=sg.tril_indices_from(x)[0].shape,
        )
        return x

    sg.jit(f)(np.ones((2, 3), np.float32))
    want = dict(
        ndim=2,
        shape=(2, 3),
        size=6,
        size1=3,
        result=jnp.result_type(jnp.zeros((2, 3), np.float32), 1.0),
        scalar=False,
        iterable=True,
        real=True,
        complex=False,
        tril=(3,),
    )
    assert seen == want, seen
    assert sg.broadcast_shapes((2, 1), (3,)) == (2, 3)
    assert sg.triu_indices_from(np.ones((3, 3)))[1].tolist() == [0, 1, 2, 1, 2, 2]
    assert sg.diag_indices_from(np.ones((2, 2)))[0].tolist() == [0, 1]
