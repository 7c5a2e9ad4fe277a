"""Fixtures of the simulator's tests."""

import pytest

from autoplan.sim import simulate


@pytest.fixture(scope="module")
def extend_short_steps_too():
    """The tiny GPT's steps are short: extend them from samples as long ones are (``score``'s cost floor,
    ``simulate.EXTENDED_FROM_PASSES``, lifted), so that the extension is what a module's tests hold to the full
    simulation (``pytestmark = pytest.mark.usefixtures("extend_short_steps_too")``)."""
    was = simulate.EXTENDED_FROM_PASSES
    simulate.EXTENDED_FROM_PASSES = 0
    yield
    simulate.EXTENDED_FROM_PASSES = was
