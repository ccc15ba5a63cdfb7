"""Cluster resolvers and multi-process start-up (``tps.initialize``, the launcher)."""
