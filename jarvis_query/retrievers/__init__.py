"""Retrievers: dense, keyword and graph leaves, and the hybrid composer (see base.py)."""
