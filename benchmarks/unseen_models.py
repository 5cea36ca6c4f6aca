#!/usr/bin/env python
"""Eighteen real architectures with random weights, for checking braze on
models it was never tuned on.

    python benchmarks/unseen_models.py [NAME ...]      (default: all)

Needs torch, torchvision and transformers (not braze's dependencies: e.g.
the virtualenv that shared/models/make_models.py uses). Each model is built
in its own subprocess from its architecture code (torchvision ``weights=None``,
transformers configs), BatchNorm statistics gathered on random batches,
exported with ``torch.onnx.export`` (opset 17, batch 1) and checked against
torch with onnxruntime; writes NAME.onnx and NAME.inputs.npz into
$BRAZE_UNSEEN (default ~/.cache/braze-unseen). Then, for each:

    braze bench ~/.cache/braze-unseen/NAME.onnx --inputs ~/.cache/braze-unseen/NAME.inputs.npz --threads 2
"""
import os, sys, types, json, time, subprocess, traceback

OUT = os.environ.get("BRAZE_UNSEEN", os.path.expanduser("~/.cache/braze-unseen"))
SEQ = 128

CNNS = ["efficientnet_b0", "convnext_tiny", "regnet_y_800mf", "shufflenet_v2_x1_0",
        "densenet121", "mnasnet1_0", "googlenet", "squeezenet1_1",
        "resnext50_32x4d", "mobilenet_v3_large"]
HF = ["gpt2", "distilbert", "roberta", "albert", "t5_encoder", "whisper_encoder",
      "swin_tiny", "vit_small"]
ALL = CNNS + HF


def import_torchvision():
    # The venv's torchvision 0.28.0 wheel is a CUDA build (its _C.so needs
    # libc10_cuda.so) while torch is 2.13.0+cpu, so `import torchvision` dies
    # registering fake kernels for torchvision::nms.  The model zoo needs none
    # of the custom ops, so skip the two registration modules.
    for m in ("torchvision._meta_registrations", "torchvision._autograd_registrations"):
        sys.modules.setdefault(m, types.ModuleType(m))
    import torchvision
    return torchvision


def build_cnn(name, torch):
    tv = import_torchvision()
    kw = {"weights": None}
    if name == "googlenet":
        kw.update(aux_logits=False, init_weights=True)
    model = getattr(tv.models, name)(**kw)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if bns:
        for m in bns:
            m.momentum = None          # cumulative average of batch stats
            m.reset_running_stats()
        model.train()
        g = torch.Generator().manual_seed(1)
        with torch.no_grad():
            for _ in range(4):
                model(torch.randn(8, 3, 224, 224, generator=g))
    model.eval()
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    return model, {"input": x}, {"bn_layers": len(bns)}


def build_hf(name, torch):
    import numpy as np
    import_torchvision()          # transformers imports torchvision too
    import transformers as T

    class Wrap(torch.nn.Module):
        def __init__(self, m, keys):
            super().__init__()
            self.m, self.keys = m, keys

        def forward(self, *args):
            return self.m(**dict(zip(self.keys, args))).last_hidden_state

    rng = np.random.default_rng(0)

    def tokens(vocab):
        ids = torch.from_numpy(rng.integers(1000, vocab, size=(1, SEQ), dtype=np.int64))
        return {"input_ids": ids, "attention_mask": torch.ones(1, SEQ, dtype=torch.int64)}

    attn = os.environ.get("ATTN_IMPL")  # None -> library default (sdpa)
    extra = {} if attn is None else {"attn_implementation": attn}
    if name == "gpt2":
        cfg = T.GPT2Config(n_layer=6, n_embd=768, n_head=12, n_positions=1024,
                           vocab_size=50257, use_cache=False, **extra)
        m = T.GPT2Model(cfg); inp = tokens(cfg.vocab_size)
    elif name == "distilbert":
        cfg = T.DistilBertConfig(n_layers=6, dim=768, n_heads=12, hidden_dim=3072,
                                 vocab_size=30522, **extra)
        m = T.DistilBertModel(cfg); inp = tokens(cfg.vocab_size)
    elif name == "roberta":
        cfg = T.RobertaConfig(vocab_size=50265, hidden_size=768, num_hidden_layers=6,
                              num_attention_heads=12, intermediate_size=3072,
                              max_position_embeddings=514, type_vocab_size=1,
                              pad_token_id=1, bos_token_id=0, eos_token_id=2, **extra)
        m = T.RobertaModel(cfg, add_pooling_layer=False); inp = tokens(cfg.vocab_size)
    elif name == "albert":
        cfg = T.AlbertConfig(vocab_size=30000, embedding_size=128, hidden_size=768,
                             num_hidden_layers=12, num_attention_heads=12,
                             intermediate_size=3072, **extra)
        m = T.AlbertModel(cfg, add_pooling_layer=False); inp = tokens(cfg.vocab_size)
    elif name == "t5_encoder":
        cfg = T.T5Config(vocab_size=32128, d_model=768, d_kv=64, d_ff=3072,
                         num_layers=6, num_heads=12, use_cache=False, **extra)
        m = T.T5EncoderModel(cfg); inp = tokens(cfg.vocab_size)
    elif name == "whisper_encoder":
        cfg = T.WhisperConfig(d_model=512, encoder_layers=6, encoder_attention_heads=8,
                              encoder_ffn_dim=2048, decoder_layers=6,
                              decoder_attention_heads=8, decoder_ffn_dim=2048,
                              num_mel_bins=80, max_source_positions=1500,
                              use_cache=False, **extra)
        m = T.WhisperModel(cfg).get_encoder()
        inp = {"input_features": torch.randn(1, 80, 3000, generator=torch.Generator().manual_seed(0))}
    elif name == "swin_tiny":
        cfg = T.SwinConfig(image_size=224, patch_size=4, embed_dim=96, depths=[2, 2, 6, 2],
                           num_heads=[3, 6, 12, 24], window_size=7, **extra)
        m = T.SwinModel(cfg, add_pooling_layer=False)
        inp = {"pixel_values": torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))}
    elif name == "vit_small":
        cfg = T.ViTConfig(image_size=224, patch_size=16, hidden_size=384, num_hidden_layers=12,
                          num_attention_heads=6, intermediate_size=1536, **extra)
        m = T.ViTModel(cfg, add_pooling_layer=False)
        inp = {"pixel_values": torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0))}
    else:
        raise KeyError(name)
    m.eval()
    info = {"attn_implementation": getattr(cfg, "_attn_implementation", None),
            "layers": getattr(cfg, "num_hidden_layers", None),
            "params_M": round(sum(p.numel() for p in m.parameters()) / 1e6, 1)}
    return Wrap(m, list(inp)).eval(), inp, info


def build_one(name):
    import numpy as np, torch, onnx, onnxruntime as ort
    torch.manual_seed(0)
    t0 = time.time()
    model, inputs, info = (build_cnn if name in CNNS else build_hf)(name, torch)
    names = list(inputs)
    args = tuple(inputs[k] for k in names)
    path = os.path.join(OUT, name + ".onnx")
    with torch.no_grad():
        ref = model(*args)
        torch.onnx.export(model, args, path, dynamo=False, opset_version=17,
                          do_constant_folding=True, input_names=names,
                          output_names=["output"])
    ref = (ref[0] if isinstance(ref, (tuple, list)) else ref).numpy()
    g = onnx.load(path)
    onnx.checker.check_model(g)
    gin = [i.name for i in g.graph.input]
    feed = {k: inputs[k].numpy() for k in gin}
    np.savez(os.path.join(OUT, name + ".inputs.npz"), **feed)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    out = sess.run(None, feed)[0]
    err = float(np.abs(out - ref).max())
    info.update(name=name, inputs={k: list(v.shape) for k, v in feed.items()},
                dropped_inputs=[k for k in names if k not in gin],
                output=list(out.shape), ort_vs_torch_maxabs=err,
                mb=round(os.path.getsize(path) / 2**20, 1), nodes=len(g.graph.node),
                seconds=round(time.time() - t0, 1))
    print("RESULT " + json.dumps(info), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one":
        build_one(sys.argv[2]); sys.exit(0)
    todo = sys.argv[1:] or ALL
    os.makedirs(OUT, exist_ok=True)
    for n in todo:
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--one", n],
                           capture_output=True, text=True)
        res = [l for l in r.stdout.splitlines() if l.startswith("RESULT ")]
        if r.returncode == 0 and res:
            print(res[-1], flush=True)
        else:
            print(f"FAILED {n} rc={r.returncode}\n" + "\n".join(r.stderr.splitlines()[-30:]), flush=True)
