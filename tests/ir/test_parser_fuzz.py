"""Fuzzing the IR parser: any text gives a module or a typed error."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from braze.errors import ParseError, VerifyError
from braze.ir import parse_module, print_module, verify

SEED_TEXT = (Path(__file__).parents[1] / "golden/ir/roundtrip.mlir").read_text().split("// CHECK:")[1]

TOKENS = ['func.func', '@main', '(', ')', '{', '}', '[', ']', '<', '>', ',', ':', '=', '->', '%0', '%x',
          '"math.add"', '"const"', '"fuse.group"', '"func.return"', 'tensor<2x3xf32>', 'tensor<f32>',
          'dense<', 'dense_resource<', 'loc(', '"a"', '1', '-2.5e3', 'nan', 'inf', 'true', '^bb0', '\n', ' ',
          '// c\n', '"\\u12"', 'tensor<2x', 'x', 'f32', '{name = "y"}']


def check(text: str) -> None:
    try:
        module = parse_module(text)
    except ParseError as e:
        assert e.line >= 1 and e.column >= 1
        return
    try:
        verify(module)
    except VerifyError:
        return
    again = print_module(module)
    assert print_module(verify(parse_module(again))) == again


settings_ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings_
@given(st.lists(st.sampled_from(TOKENS), max_size=60))
def test_token_soup(tokens):
    check(" ".join(tokens))


@settings_
@given(st.text(max_size=200))
def test_random_text(text):
    check(text)


@settings_
@given(st.lists(st.tuples(st.integers(0, len(SEED_TEXT)), st.integers(0, 8), st.text(max_size=6)),
                min_size=1, max_size=4))
def test_mutated_valid_text(edits):
    text = SEED_TEXT
    for pos, cut, insert in edits:
        pos = min(pos, len(text))
        text = text[:pos] + insert + text[pos + cut:]
    check(text)


def test_deep_nesting_is_a_parse_error():
    """5000 nested brackets: a ParseError at the first bracket too deep (not a
    RecursionError, not a module)."""
    text = 'func.func @main() -> () { "func.return"() {a = ' + "[" * 5000 + "]" * 5000 + "} : () -> () }"
    with pytest.raises(ParseError, match="nesting deeper than") as info:
        parse_module(text)
    line, column = info.value.line, info.value.column
    assert line == 1 and text[column - 1] == "[" and column - 1 - text.index("[") >= 199  # at the 200th
