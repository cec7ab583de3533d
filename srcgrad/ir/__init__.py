"""The IR: Program, Block, Op, Variable; the printer and the analyses every layer uses.

Layer L1 (the IR): see docs/design.md.
"""
