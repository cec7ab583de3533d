"""The base layer: errors, dtypes, settings, the caches of compiled code, the hooks.

Layer L0 (base): see docs/design.md.
"""
