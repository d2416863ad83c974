"""Fixtures shared by the Python API tests."""
import pytest

import accl


@pytest.fixture
def comm1():
    """A one-rank communicator."""
    with accl.Communicator(1, accl.get_unique_id(), 0) as comm:
        yield comm
