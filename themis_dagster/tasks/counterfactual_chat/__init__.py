"""Counterfactual chat: the same request asked by different users (docs/counterfactuals.md)."""
