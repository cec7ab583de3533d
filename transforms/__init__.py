"""Program → Program passes (reverse mode, simplification) and the JAX lowering.

Layer L4 (transforms): see docs/design.md.
"""
