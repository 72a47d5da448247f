from __future__ import annotations

import pytest

from tests.security.certs import LocalCa


@pytest.fixture(scope="session")
def ca() -> LocalCa:
    return LocalCa.create("tierlog test CA")
