"""Every curation test reads an empty registry of suites unless it registers its own: a `suites/` directory in
the working tree (README's examples write one) never changes what a test builds."""

from __future__ import annotations

import pytest

from replay.curation.build import SUITES_ENV


@pytest.fixture(autouse=True)
def empty_registry(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SUITES_ENV, str(tmp_path_factory.mktemp("no-suites")))
