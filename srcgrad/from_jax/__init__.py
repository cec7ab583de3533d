"""The JAX front end: sg.from_jax (a jaxpr translated into srcgrad ops) and sg.jax_op.

Layer L6 (front ends): see docs/design.md.
"""
