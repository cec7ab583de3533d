"""Compiled code: the transformed function's cache and jit, the eager interpreter.

Layer L5 (compiled): see docs/design.md.
"""
