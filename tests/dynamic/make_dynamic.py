"""Export the small dynamic-axes models the gear tests use (tests/dynamic/).

Run with a Python that has torch 2.13 (CPU) and onnx, e.g. the
venv of ../shared/models/README.md:

    ~/.venvs/braze-models/bin/python tests/dynamic/make_dynamic.py tests/dynamic

- ``cnn-dyn.onnx``: conv/BN/ReLU/depthwise/pool/linear, input ``[N, 3, 32, 32]``,
  the batch dynamic (torch's exporter names it);
- ``bert-dyn.onnx``: a 2-layer, 64-wide BERT-style encoder (``Encoder``), inputs
  ``input_ids`` and ``attention_mask`` ``[B, S]``, batch and sequence dynamic;
- with ``--base``, the full-size ones for benchmarks/gears.py (keep them in a
  cache folder, not the repo): ``bert-base-dyn.onnx``, the same encoder at
  BERT-base's size, and ``resnet50-dyn.onnx``, ResNet-50's layout
  (``ResNet50``), input ``[N, 3, 224, 224]``.

Weights are random (seeded), biases and norms perturbed so that a dropped
bias would show. The same torch version gives the same files.
"""

import sys
from pathlib import Path

import torch


def perturb(model: torch.nn.Module, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name.lower() or "LayerNorm" in name:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)


class Cnn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU6(),
            torch.nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 1), torch.nn.SiLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.body(x))


class Bottleneck(torch.nn.Module):
    """ResNet's 1x1 -> 3x3 -> 1x1 block with its projection shortcut."""

    def __init__(self, cin: int, width: int, stride: int):
        super().__init__()

        def conv_bn(a, b, k, s=1):
            return [torch.nn.Conv2d(a, b, k, s, k // 2, bias=False), torch.nn.BatchNorm2d(b)]

        self.body = torch.nn.Sequential(*conv_bn(cin, width, 1), torch.nn.ReLU(),
                                        *conv_bn(width, width, 3, stride), torch.nn.ReLU(),
                                        *conv_bn(width, 4 * width, 1))
        self.short = (torch.nn.Sequential(*conv_bn(cin, 4 * width, 1, stride))
                      if stride != 1 or cin != 4 * width else torch.nn.Identity())

    def forward(self, x):
        return torch.relu(self.body(x) + self.short(x))


class ResNet50(torch.nn.Module):
    """ResNet-50's layout (3, 4, 6, 3 bottlenecks), 224x224 inputs, 1000 classes."""

    def __init__(self):
        super().__init__()
        layers = [torch.nn.Conv2d(3, 64, 7, 2, 3, bias=False), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
                  torch.nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(blocks):
                layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = 4 * width
        self.body = torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten())
        self.head = torch.nn.Linear(cin, 1000)

    def forward(self, x):
        return self.head(self.body(x))


def export_resnet(out: Path) -> None:
    torch.manual_seed(0)
    model = ResNet50().eval()
    perturb(model, 3)
    with torch.no_grad():  # running statistics that are not the identity
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    batch = torch.export.Dim("N", min=1, max=64)
    torch.onnx.export(model, (torch.randn(2, 3, 224, 224),), str(out / "resnet50-dyn.onnx"), dynamo=True,
                      input_names=["x"], output_names=["y"], dynamic_shapes={"x": {0: batch}})


def export_cnn(out: Path) -> None:
    torch.manual_seed(0)
    model = Cnn().eval()
    perturb(model, 1)
    x = torch.randn(2, 3, 32, 32)
    batch = torch.export.Dim("N", min=1, max=64)
    torch.onnx.export(model, (x,), str(out / "cnn-dyn.onnx"), dynamo=True, input_names=["x"],
                      output_names=["y"], dynamic_shapes={"x": {0: batch}})


class Encoder(torch.nn.Module):
    """BERT's encoder in miniature: token + position + segment embeddings,
    LayerNorm, two layers of masked multi-head attention and a GELU FFN
    (post-norm, as BERT), written out so that the export needs only torch."""

    def __init__(self, vocab=512, width=64, heads=2, layers=2, ffn=128, positions=256):
        super().__init__()
        self.heads = heads
        self.tokens = torch.nn.Embedding(vocab, width)
        self.positions = torch.nn.Embedding(positions, width)
        self.norm = torch.nn.LayerNorm(width, eps=1e-12)
        self.layers = torch.nn.ModuleList(torch.nn.ModuleDict({
            "qkv": torch.nn.Linear(width, 3 * width), "out": torch.nn.Linear(width, width),
            "norm1": torch.nn.LayerNorm(width, eps=1e-12), "up": torch.nn.Linear(width, ffn),
            "down": torch.nn.Linear(ffn, width), "norm2": torch.nn.LayerNorm(width, eps=1e-12)})
            for _ in range(layers))

    def forward(self, input_ids, attention_mask):
        b, s = input_ids.shape
        x = self.norm(self.tokens(input_ids) + self.positions(torch.arange(s)).unsqueeze(0))
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            q, k, v = layer["qkv"](x).view(b, s, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
            scores = q @ k.transpose(-1, -2) / (q.shape[-1] ** 0.5) + bias
            context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, -1)
            x = layer["norm1"](x + layer["out"](context))
            x = layer["norm2"](x + layer["down"](torch.nn.functional.gelu(layer["up"](x))))
        return x


def export_bert(out: Path, base: bool = False) -> None:
    torch.manual_seed(0)
    model = (Encoder(vocab=30522, width=768, heads=12, layers=12, ffn=3072, positions=512) if base
             else Encoder()).eval()
    perturb(model, 2)
    ids = torch.randint(0, 512, (2, 16))
    mask = torch.ones(2, 16, dtype=torch.int64)
    b, s = torch.export.Dim("B", min=1, max=32), torch.export.Dim("S", min=2, max=256)
    torch.onnx.export(model, (ids, mask), str(out / ("bert-base-dyn.onnx" if base else "bert-dyn.onnx")), dynamo=True,
                      input_names=["input_ids", "attention_mask"], output_names=["hidden"],
                      dynamic_shapes={"input_ids": {0: b, 1: s}, "attention_mask": {0: b, 1: s}})


if __name__ == "__main__":
    # --base: the BERT-base-sized encoder (12 layers, 768 wide, 30522 tokens; 440 MB)
    # for benchmarks/gears.py, into a cache folder outside the repo
    base = "--base" in sys.argv
    paths = [a for a in sys.argv[1:] if a != "--base"]
    out = Path(paths[0] if paths else Path(__file__).parent)
    out.mkdir(parents=True, exist_ok=True)
    if base:
        export_bert(out, base=True)
        export_resnet(out)
    else:
        export_cnn(out)
        export_bert(out)
    import onnx

    for name in (("bert-base-dyn.onnx", "resnet50-dyn.onnx") if base else ("cnn-dyn.onnx", "bert-dyn.onnx")):
        m = onnx.load(str(out / name))  # the exporter may put the weights beside it: one file instead
        onnx.save(m, str(out / name), save_as_external_data=False)
        (out / (name + ".data")).unlink(missing_ok=True)
        print(name, [(i.name, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim])
                     for i in m.graph.input], f"{(out / name).stat().st_size} bytes")
