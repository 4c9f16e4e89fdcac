"""Retrievers: dense, keyword, identifier and graph leaves; the hybrid composer, grouping by
document (grouping.py) and the composer that puts named documents first (identifiers.py)."""
