"""Attention-heavy ONNX models for braze's attention benchmarks, exported from transformers code
with random weights (nothing downloaded), in the style of shared/models/make_modern.py:

    ~/.venvs/braze-models/bin/python benchmarks/attention_models.py ~/.cache/braze-models [--only NAME,...]

The venv is the one shared/models/README.md builds (torch 2.13 CPU, onnx, onnxscript, onnxruntime,
transformers). Writes NAME.onnx, NAME.inputs.npz and NAME.ref.npz (onnxruntime CPU, ORT_ENABLE_ALL)
and prints each model's op histogram, inputs and ORT latency at 2 threads. --list names the models.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

DEFAULT_SHARED = Path(__file__).resolve().parents[1] / ".." / "shared" / "models"
mm = mt = None  # make_models and make_modern, imported from --shared in main()


def whisper_tiny_enc_s1500(rng):
    """Whisper-tiny encoder at 1500 positions, opset 17: decomposed attention, no mask, long sequence.

    4 layers, d=384, 6 heads, ffn 1536; input features [1, 80, 3000] (80 mel bins x 3000 frames)."""
    import transformers as T
    from transformers.models.whisper.modeling_whisper import WhisperEncoder
    cfg = T.WhisperConfig(d_model=384, encoder_layers=4, encoder_attention_heads=6, encoder_ffn_dim=1536,
                          decoder_layers=4, decoder_attention_heads=6, decoder_ffn_dim=1536,
                          num_mel_bins=80, max_source_positions=1500, use_cache=False)
    m = WhisperEncoder(cfg).eval()
    mm.perturb_constant_params(m, 0)
    features = rng.standard_normal((1, 80, 3000)).astype(np.float32)  # log-mel features, roughly N(0, 1)
    return mt._hf(m, {"input_features": features}, ["last_hidden_state"]), 17, {}


def _bert_base_s512(rng):
    import transformers as T
    m = T.BertModel(T.BertConfig()).eval()
    mm.perturb_constant_params(m, 0)
    # 400 real tokens and 112 padding: the same share as make_modern's bert-base-s384 (300 of 384)
    return mt._hf(m, mt._text_inputs(rng, 30522, 512, 400, True), ["last_hidden_state"])


def bert_base_s512(rng):
    """bert-base at 512 tokens (its longest), opset 17: decomposed attention with a padding mask."""
    return _bert_base_s512(rng), 17, {}


def bert_base_s512_op23(rng):
    """The same bert-base, weights and input at opset 23: one ONNX Attention op per layer."""
    return _bert_base_s512(rng), 23, {}


def llama_tiny_op23(rng):
    """2-layer Llama, 128 tokens, opset 23: Attention with GQA and a causal mask, RMSNormalization, rotary.

    d=256, 8 query heads over 2 KV heads, ffn 512, vocab 1000."""
    import transformers as T
    cfg = T.LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                        num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512, use_cache=False)
    m = T.LlamaModel(cfg).eval()
    mm.perturb_constant_params(m, 0)
    ids = rng.integers(0, cfg.vocab_size, size=(1, 128), dtype=np.int64)
    inputs = {"input_ids": ids, "attention_mask": np.ones((1, 128), np.int64)}
    # Under export transformers always materialises the causal mask, and with a mask its sdpa path
    # repeats K/V to 8 heads (Expand) before the Attention op. This switch of transformers' own makes
    # it call SDPA with enable_gqa=True, so the ONNX Attention op gets 2 KV heads.
    return mt._hf(m, inputs, ["last_hidden_state"]), 23, {"TRANSFORMERS_SDPA_FORCE_GQA": "1"}


MODELS = {
    "whisper-tiny-enc-s1500": whisper_tiny_enc_s1500,
    "bert-base-s512": bert_base_s512,
    "bert-base-s512-op23": bert_base_s512_op23,
    "llama-tiny-op23": llama_tiny_op23,
}


@contextlib.contextmanager
def environment(env):
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def describe(path, torch_outs, runs):
    """Checker result, op histogram, inputs, Attention attributes, ORT-vs-torch and ORT latency."""
    import onnx
    m = onnx.load(str(path))
    try:
        onnx.checker.check_model(m, full_check=True)
        checker = "ok"
    except Exception as e:
        checker = f"FAILED {type(e).__name__}: {str(e)[:200]}"
    hist = collections.Counter(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"
                               for n in m.graph.node)
    opset = {o.domain or "ai.onnx": o.version for o in m.opset_import}["ai.onnx"]
    print(f"  opset {opset}, {len(m.graph.node)} nodes, {path.stat().st_size / 2**20:.1f} MiB, checker {checker}")
    print("  ops: " + ", ".join(f"{k} {v}" for k, v in hist.most_common()))
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in m.graph.input}
    print("  inputs: " + ", ".join(f"{k} {v}" for k, v in shapes.items()))
    attn = [n for n in m.graph.node if n.op_type == "Attention"]
    if attn:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in attn[0].attribute}
        vi = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in onnx.shape_inference.infer_shapes(m).graph.value_info}
        print(f"  Attention x{len(attn)}: inputs {[vi.get(i, i) for i in attn[0].input]}, {attrs}")
    del m

    stem = str(path)[: -len(".onnx")]
    feeds, ref = dict(np.load(stem + ".inputs.npz")), dict(np.load(stem + ".ref.npz"))
    for (k, r), t in zip(ref.items(), torch_outs):
        t = t.detach().numpy()
        print(f"  {k} {list(r.shape)}: ORT vs torch max abs {np.abs(r - t).max():.2e} (|max| {np.abs(t).max():.2f})")
    if runs:
        s = mm.ort_session(path, "ALL", threads=2)
        for _ in range(2):
            s.run(None, feeds)
        ts = []
        for _ in range(runs):
            t0 = time.perf_counter()
            s.run(None, feeds)
            ts.append((time.perf_counter() - t0) * 1e3)
        print(f"  ORT ENABLE_ALL, 2 threads: median {np.median(ts):.1f} ms, min {min(ts):.1f} ms ({runs} runs)")


def main():
    global mm, mt
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?")
    ap.add_argument("--only", default="", help="comma-separated model names (default: all)")
    ap.add_argument("--shared", default=str(DEFAULT_SHARED), help="folder with make_models.py, make_modern.py")
    ap.add_argument("--runs", type=int, default=20, help="timed ORT runs per model; 0: no timing")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args()
    if a.list or not a.out:
        print("\n".join(f"{n}: {f.__doc__.splitlines()[0]}" for n, f in MODELS.items()))
        return 0
    only = [n for n in a.only.split(",") if n]
    unknown = [n for n in only if n not in MODELS]
    if unknown:
        ap.error(f"unknown models {unknown}; choose from {list(MODELS)}")
    sys.path.insert(0, os.path.abspath(a.shared))
    import make_models as mm
    import make_modern as mt
    import torch
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    mm.import_torchvision()  # before transformers imports it
    out = Path(a.out).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    failed = 0
    for name, build in MODELS.items():
        if only and name not in only:
            continue
        print(f"{name}:", flush=True)
        torch.manual_seed(0)  # per model, so bert-base-s512 and its op23 twin share weights
        rng = np.random.default_rng(0)
        t0 = time.time()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                (module, inputs, outputs), opset, env = build(rng)
                path = out / f"{name}.onnx"
                with environment(env):
                    with torch.no_grad():
                        torch_outs = module(*[torch.from_numpy(v) for v in inputs.values()])
                    mm.torch_export(module, inputs, outputs, path, opset, True)
                mm.relativize_source_paths(path)
            mt.write_reference(path, inputs)
            print(f"  exported in {time.time() - t0:.0f} s", flush=True)
            describe(path, torch_outs, a.runs)
        except Exception as e:
            failed += 1
            print(f"  FAILED {type(e).__name__}: {str(e)[:500]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
