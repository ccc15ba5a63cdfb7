"""Placeholder, replaced below."""


def install() -> None:
    return None
