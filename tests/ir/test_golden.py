"""Runs every golden text case under tests/golden (see golden_runner)."""

import pytest

from braze.errors import BrazeError
from braze.ir import parse_module, print_module
from golden_runner import UPDATE, all_cases, run_case, update


@pytest.mark.parametrize("case", all_cases(), ids=lambda c: c.id)
def test_golden(case):
    if case.error is not None:
        with pytest.raises(BrazeError) as info:
            run_case(case)
        assert case.error in str(info.value)
        return
    output = run_case(case)
    if UPDATE and output.strip() != case.check:
        update(case, output)
        return
    assert output.strip() == case.check
    # print -> parse -> print is the identity on every expected text
    assert print_module(parse_module(case.check)).strip() == case.check
