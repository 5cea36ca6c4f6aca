"""Lowerings of the math ops (elementwise and broadcasting)."""

from tvm import topi

from ..registry import lowering


@lowering("math.add")
def add(lhs, rhs):
    return topi.add(lhs, rhs)


@lowering("math.mul")
def mul(lhs, rhs):
    return topi.multiply(lhs, rhs)


@lowering("math.relu")
def relu(x):
    return topi.nn.relu(x)
