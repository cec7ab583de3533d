"""How an op is declared and called: the registry, the builder, the one dispatch, the verifier.

Layer L2 (core): see docs/design.md.
"""
