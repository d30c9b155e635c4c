"""Hugging Face's loading and saving bars, hidden where the caller prints one line per stage."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def progress_bars(shown: bool) -> Iterator[None]:
    """transformers' progress bars off for the block when not `shown`, and on again after it (their default)."""
    from transformers.utils import logging as hf_logging

    if not shown:
        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
