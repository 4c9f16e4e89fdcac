"""Dagster assets of Jarvis, one module per layer; ``definitions`` wires them."""
