"""ONNX recurrences: RNN, GRU and LSTM, every direction, layout and
activation onnx defines.

A recurrence becomes plain IR ops, so fusion and scheduling treat it like
any other graph:
- the input projections of all time steps are one matmul, ``X @ W^T``,
  with both biases folded in;
- each time step is unrolled: ``H @ R^T``, the gates and the new state, a
  handful of ops that fusion puts in one or two kernels (the matmul with
  its gate epilogue).

The sequence length must be static (it is the number of unrolled steps).
``sequence_lens`` may be a run-time input: steps past a sequence's end keep
its state and write zeros to ``Y``, and a reverse direction reads each
sequence backwards from its own end, as onnx defines.
"""

from __future__ import annotations

import numpy as np

from ..registry import converter

#: gates per cell kind, in ONNX's weight order
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
#: activations per direction, and their defaults
_DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}
#: ONNX's activation functions that read alpha / beta, with their defaults
_ALPHA = {"Affine": 1.0, "LeakyRelu": 0.01, "ThresholdedRelu": 1.0, "ScaledTanh": 1.0, "HardSigmoid": 0.2,
          "Elu": 1.0}
_BETA = {"Affine": 0.0, "ScaledTanh": 1.0, "HardSigmoid": 0.5}


@converter("RNN", since=7)
def rnn(ctx, X, W, R, B=None, sequence_lens=None, initial_h=None, *, activation_alpha=(), activation_beta=(),
        activations=None, clip=None, direction="forward", hidden_size=None, layout=0):
    return _Recurrence(ctx, "RNN", activations, activation_alpha, activation_beta, clip, direction,
                       hidden_size, layout).run(X, W, R, B, sequence_lens, initial_h)


@converter("GRU", since=7)
def gru(ctx, X, W, R, B=None, sequence_lens=None, initial_h=None, *, activation_alpha=(), activation_beta=(),
        activations=None, clip=None, direction="forward", hidden_size=None, layout=0, linear_before_reset=0):
    cell = _Recurrence(ctx, "GRU", activations, activation_alpha, activation_beta, clip, direction, hidden_size,
                       layout)
    cell.linear_before_reset = bool(linear_before_reset)
    return cell.run(X, W, R, B, sequence_lens, initial_h)


@converter("LSTM", since=7)
def lstm(ctx, X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None, *,
         activation_alpha=(), activation_beta=(), activations=None, clip=None, direction="forward",
         hidden_size=None, input_forget=0, layout=0):
    cell = _Recurrence(ctx, "LSTM", activations, activation_alpha, activation_beta, clip, direction, hidden_size,
                       layout)
    cell.input_forget = bool(input_forget)
    return cell.run(X, W, R, B, sequence_lens, initial_h, initial_c, P)


class _Recurrence:
    def __init__(self, ctx, kind, activations, alpha, beta, clip, direction, hidden_size, layout):
        self.ctx, self.kind, self.clip, self.layout = ctx, kind, clip, layout
        if direction not in ("forward", "reverse", "bidirectional"):
            raise ctx.error(f"direction '{direction}' is not one of forward, reverse, bidirectional")
        self.directions = ["forward", "reverse"] if direction == "bidirectional" else [direction]
        per = len(_DEFAULT_ACTIVATIONS[kind])
        names = tuple(activations) if activations else _DEFAULT_ACTIVATIONS[kind] * len(self.directions)
        if len(names) != per * len(self.directions):
            raise ctx.error(f"needs {per * len(self.directions)} activations for {direction} {kind}, "
                            f"got {len(names)}: {', '.join(names)}")
        alpha, beta = list(alpha or ()), list(beta or ())
        self.activations = []
        for name in names:
            if name not in _ALPHA and name not in _BETA and name not in _PLAIN:
                raise ctx.error(f"activation '{name}' is not one onnx defines for {kind}")
            a = alpha.pop(0) if name in _ALPHA and alpha else _ALPHA.get(name)
            b = beta.pop(0) if name in _BETA and beta else _BETA.get(name)
            self.activations.append((name, a, b))
        self.hidden_size = hidden_size
        self.linear_before_reset = False
        self.input_forget = False

    # --- the whole node -----------------------------------------------------------------
    def run(self, X, W, R, B, sequence_lens, initial_h, initial_c=None, P=None):
        ctx = self.ctx
        if X.type.rank != 3:
            raise ctx.error(f"X must be 3-D, got {X.type}")
        if self.layout:  # batch-major: X [batch, seq, input], states [batch, directions, hidden]
            X, initial_h, initial_c = (None if v is None else ctx.op("tensor.transpose", [v], perm=(1, 0, 2))
                                       for v in (X, initial_h, initial_c))
        seq, batch, _ = X.type.shape
        gates = _GATES[self.kind]
        hidden = W.type.shape[1] // gates
        if self.hidden_size is not None and hidden != self.hidden_size:
            raise ctx.error(f"W has {W.type.shape[1]} rows, {gates} gates of {hidden}, but hidden_size is "
                            f"{self.hidden_size}")
        if W.type.shape[0] != len(self.directions):
            raise ctx.error(f"W holds {W.type.shape[0]} directions; {len(self.directions)} expected")
        self.hidden, self.batch, self.dtype = hidden, batch, X.type.np_dtype
        lens = None
        if sequence_lens is not None:
            known = ctx.maybe_value(sequence_lens)
            if known is None or np.any(known != seq):
                lens = ctx.op("math.cast", [sequence_lens], to="i64")
        ys, hs, cs = [], [], []
        per = len(_DEFAULT_ACTIVATIONS[self.kind])
        for d, direction in enumerate(self.directions):
            self.acts = self.activations[d * per:(d + 1) * per]
            y, h, c = self.direction(X, W, R, B, lens, initial_h, initial_c, P, d, direction == "reverse", seq)
            ys.append(ctx.op("tensor.reshape", [y], shape=(seq, 1, batch, hidden)))
            hs.append(ctx.op("tensor.reshape", [h], shape=(1, batch, hidden)))
            if c is not None:
                cs.append(ctx.op("tensor.reshape", [c], shape=(1, batch, hidden)))
        Y, Y_h = self.cat(ys, 1), self.cat(hs, 0)
        Y_c = self.cat(cs, 0) if cs else None
        if self.layout:
            Y = ctx.op("tensor.transpose", [Y], perm=(2, 0, 1, 3))
            Y_h = ctx.op("tensor.transpose", [Y_h], perm=(1, 0, 2))
            Y_c = ctx.op("tensor.transpose", [Y_c], perm=(1, 0, 2)) if Y_c is not None else None
        return (Y, Y_h, Y_c) if self.kind == "LSTM" else (Y, Y_h)

    def direction(self, X, W, R, B, lens, initial_h, initial_c, P, d, reverse, seq):
        """One direction: (Y [seq, batch, hidden] in time order, last H, last C)."""
        ctx, hidden, batch = self.ctx, self.hidden, self.batch
        gates = _GATES[self.kind]
        Wt = self.transposed(self.row(W, d))  # [input, gates*hidden]
        Rt = self.transposed(self.row(R, d))  # [hidden, gates*hidden]
        Wb = Rb = None
        if B is not None:
            b = self.row(B, d)
            Wb = self.part(b, 0, gates * hidden)
            Rb = self.part(b, gates * hidden, 2 * gates * hidden)
        if reverse and lens is not None:  # each sequence backwards from its own end
            X = self.reverse_within(X, lens)
        # every step's input projection in one matmul
        flat = ctx.op("tensor.reshape", [X], shape=(seq * batch, X.type.shape[2]))
        xp = ctx.op("nn.matmul", [flat, Wt])
        bias = self.input_bias(Wb, Rb)
        if bias is not None:
            xp = ctx.op("math.add", [xp, bias])
        xp = ctx.op("tensor.reshape", [xp], shape=(seq, batch, gates * hidden))
        H = self.state(initial_h, d)
        C = self.state(initial_c, d) if self.kind == "LSTM" else None
        peep = None if P is None else [self.part(self.row(P, d), i * hidden, (i + 1) * hidden) for i in range(3)]
        steps = range(seq - 1, -1, -1) if reverse and lens is None else range(seq)
        ys = {}
        for t in steps:
            step = ctx.op("tensor.slice", [xp], starts=(t, 0, 0), ends=(t + 1, batch, gates * hidden), steps=(1, 1, 1))
            x_t = ctx.op("tensor.reshape", [step], shape=(batch, gates * hidden))
            H_new, C_new = self.step(x_t, H, C, Rt, Rb, peep)
            if lens is not None:
                live = ctx.op("tensor.reshape", [ctx.op("math.less", [ctx.const(np.array(t, np.int64)), lens])],
                              shape=(batch, 1))
                ys[t] = ctx.op("math.where", [live, H_new, self.zeros((batch, hidden))])
                H_new = ctx.op("math.where", [live, H_new, H])
                if C is not None:
                    C_new = ctx.op("math.where", [live, C_new, C])
            else:
                ys[t] = H_new
            H, C = H_new, C_new
        Y = self.cat([ctx.op("tensor.reshape", [ys[t]], shape=(1, batch, hidden)) for t in range(seq)], 0)
        if reverse and lens is not None:
            Y = self.reverse_within(Y, lens)
        return Y, H, C

    def step(self, x_t, H, C, Rt, Rb, peep):
        """One time step of the cell: (H, C) after it."""
        ctx, h = self.ctx, self.hidden
        if self.kind == "GRU":
            return self.gru_step(x_t, H, Rt, Rb), None
        g = ctx.op("math.add", [x_t, ctx.op("nn.matmul", [H, Rt])])
        if self.kind == "RNN":
            return self.act(0, g), None
        i, o, f, c = (self.part(g, k * h, (k + 1) * h) for k in range(4))
        if peep is not None:
            i = ctx.op("math.add", [i, ctx.op("math.mul", [peep[0], C])])
            f = ctx.op("math.add", [f, ctx.op("math.mul", [peep[2], C])])
        i = self.act(0, i)
        f = ctx.op("math.sub", [self.ones(), i]) if self.input_forget else self.act(0, f)
        c = self.act(1, c)
        C_new = ctx.op("math.add", [ctx.op("math.mul", [f, C]), ctx.op("math.mul", [i, c])])
        if peep is not None:
            o = ctx.op("math.add", [o, ctx.op("math.mul", [peep[1], C_new])])
        o = self.act(0, o)
        return ctx.op("math.mul", [o, self.act(2, C_new)]), C_new

    def gru_step(self, x_t, H, Rt, Rb):
        ctx, h = self.ctx, self.hidden
        xz, xr, xh = (self.part(x_t, k * h, (k + 1) * h) for k in range(3))
        Rzr = ctx.op("tensor.slice", [Rt], starts=(0, 0), ends=(h, 2 * h), steps=(1, 1))
        Rh = ctx.op("tensor.slice", [Rt], starts=(0, 2 * h), ends=(h, 3 * h), steps=(1, 1))
        hzr = ctx.op("nn.matmul", [H, Rzr])
        z = self.act(0, ctx.op("math.add", [xz, self.part(hzr, 0, h)]))
        r = self.act(0, ctx.op("math.add", [xr, self.part(hzr, h, 2 * h)]))
        Rbh = None if Rb is None else self.part(Rb, 2 * h, 3 * h)
        if self.linear_before_reset:
            hh = ctx.op("nn.matmul", [H, Rh])
            if Rbh is not None:
                hh = ctx.op("math.add", [hh, Rbh])
            hh = ctx.op("math.mul", [r, hh])
        else:
            hh = ctx.op("nn.matmul", [ctx.op("math.mul", [r, H]), Rh])
            if Rbh is not None:
                hh = ctx.op("math.add", [hh, Rbh])
        candidate = self.act(1, ctx.op("math.add", [xh, hh]))
        # (1 - z) * candidate + z * H
        return ctx.op("math.add", [candidate, ctx.op("math.mul", [z, ctx.op("math.sub", [H, candidate])])])

    # --- pieces -------------------------------------------------------------------------
    def input_bias(self, Wb, Rb):
        """The bias added to every step's input projection: Wb + Rb, except
        the GRU's hidden gate's Rbh, which goes with the recurrent product."""
        ctx, h = self.ctx, self.hidden
        if Wb is None:
            return None
        if self.kind != "GRU":
            return ctx.op("math.add", [Wb, Rb])
        zr = ctx.op("math.add", [self.part(Wb, 0, 2 * h), self.part(Rb, 0, 2 * h)])
        return self.cat([zr, self.part(Wb, 2 * h, 3 * h)], 0)

    def act(self, k: int, x):
        """The k-th activation of this direction's list, on x (after clip)."""
        ctx = self.ctx
        if self.clip is not None:
            x = ctx.op("math.clip", [x], min=-float(self.clip), max=float(self.clip))
        name, a, b = self.acts[k]
        if name in _PLAIN:
            return ctx.op(_PLAIN[name], [x])
        if name == "LeakyRelu":
            return ctx.op("math.leaky_relu", [x], alpha=a)
        if name == "Elu":
            return ctx.op("math.elu", [x], alpha=a)
        if name == "HardSigmoid":
            return ctx.op("math.hard_sigmoid", [x], alpha=a, beta=b)
        if name == "Affine":
            return ctx.op("math.add", [ctx.op("math.mul", [x, self.scalar(a)]), self.scalar(b)])
        if name == "ScaledTanh":
            return ctx.op("math.mul", [self.scalar(a), ctx.op("math.tanh", [ctx.op("math.mul", [x, self.scalar(b)])])])
        # ThresholdedRelu
        return ctx.op("math.where", [ctx.op("math.greater", [x, self.scalar(a)]), x, self.scalar(0)])

    def row(self, w, d):
        """Direction d of a [directions, ...] weight, without that axis."""
        shape = w.type.shape
        part = self.ctx.op("tensor.slice", [w], starts=(d,) + (0,) * (len(shape) - 1), ends=(d + 1,) + shape[1:],
                           steps=(1,) * len(shape))
        return self.ctx.op("tensor.reshape", [part], shape=shape[1:])

    def part(self, x, begin: int, end: int):
        """Columns begin:end of the last axis."""
        shape = x.type.shape
        return self.ctx.op("tensor.slice", [x], starts=(0,) * (len(shape) - 1) + (begin,),
                           ends=shape[:-1] + (end,), steps=(1,) * len(shape))

    def transposed(self, w):
        return self.ctx.op("tensor.transpose", [w], perm=(1, 0))

    def state(self, initial, d):
        if initial is None:
            return self.zeros((self.batch, self.hidden))
        return self.row(initial, d)

    def reverse_within(self, x, lens):
        """x [seq, batch, ...] with each batch's first lens[b] steps reversed
        (ReverseSequence along time); the steps past the end stay."""
        ctx = self.ctx
        seq, batch = x.type.shape[:2]
        t = ctx.const(np.arange(seq, dtype=np.int64).reshape(seq, 1))
        n = ctx.op("tensor.reshape", [lens], shape=(1, batch))
        back = ctx.op("math.sub", [ctx.op("math.sub", [n, ctx.const(np.array(1, np.int64))]), t])
        index = ctx.op("math.where", [ctx.op("math.less", [t, n]), back, t])  # [seq, batch]
        index = ctx.op("tensor.reshape", [index], shape=(seq, batch) + (1,) * (x.type.rank - 2))
        index = ctx.op("tensor.broadcast_to", [index], shape=x.type.shape)
        return ctx.op("tensor.gather_elements", [x, index], axis=0)

    def cat(self, parts, axis):
        return parts[0] if len(parts) == 1 else self.ctx.op("tensor.concat", parts, axis=axis)

    def zeros(self, shape):
        return self.ctx.const(np.zeros(shape, self.dtype))

    def ones(self):
        return self.scalar(1)

    def scalar(self, v):
        return self.ctx.const(np.array(v, self.dtype))


_PLAIN = {"Relu": "math.relu", "Tanh": "math.tanh", "Sigmoid": "math.sigmoid", "Softsign": "math.softsign",
          "Softplus": "math.softplus"}
