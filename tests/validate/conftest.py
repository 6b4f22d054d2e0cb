import pytest

from tests.pki import Authority


@pytest.fixture(scope="session")
def authority() -> Authority:
    return Authority.create()
