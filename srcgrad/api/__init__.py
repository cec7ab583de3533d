"""The functional API: grad, jit, jvp and the Jacobians, custom rules, the Fluid program API.

Layer L6 (front ends): see docs/design.md.
"""
