"""Imperative mode: Tensor, the recording tape, the tiers of its backward, layers, optimizers.

Layer L6 (front ends): see docs/design.md.
"""
