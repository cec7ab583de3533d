"""Tools for looking at programs: Graphviz pictures.

Layer L6 (front ends): see docs/design.md.
"""
