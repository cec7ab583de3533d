"""Program → Program passes (reverse mode, simplification) and the JAX lowering."""
