// RUN: fuse{level=1}
// The graph every case below starts from: two layers of matmul + bias + activation;
// at level 1 each layer is one matmul_epilogue kernel.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "fuse.group"(%x, %w, %b) ({
  ^bb0(%1: tensor<2x4xf32>, %2: tensor<4x4xf32>, %3: tensor<4xf32>):
    %4 = "nn.matmul"(%1, %2) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
    %5 = "math.add"(%4, %3) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
    %6 = "math.relu"(%5) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
    "fuse.yield"(%6) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer0/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %7 = "fuse.group"(%0, %w, %b) ({
  ^bb0(%8: tensor<2x4xf32>, %9: tensor<4x4xf32>, %10: tensor<4xf32>):
    %11 = "nn.matmul"(%8, %9) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
    %12 = "math.add"(%11, %10) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
    %13 = "math.tanh"(%12) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
    "fuse.yield"(%13) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer1/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  "func.return"(%7) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1 no-fuse=Relu}
// no_fuse by ONNX op type: the Relu stays alone (blacklisted).
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "fuse.group"(%x, %w, %b) ({
  ^bb0(%1: tensor<2x4xf32>, %2: tensor<4x4xf32>, %3: tensor<4xf32>):
    %4 = "nn.matmul"(%1, %2) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
    %5 = "math.add"(%4, %3) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
    "fuse.yield"(%5) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer0/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %6 = "math.relu"(%0) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %7 = "fuse.group"(%6, %w, %b) ({
  ^bb0(%8: tensor<2x4xf32>, %9: tensor<4x4xf32>, %10: tensor<4xf32>):
    %11 = "nn.matmul"(%8, %9) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
    %12 = "math.add"(%11, %10) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
    %13 = "math.tanh"(%12) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
    "fuse.yield"(%13) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer1/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  "func.return"(%7) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1 no-fuse=nn.matmul}
// no_fuse by braze op name: without the matmuls, each bias add and
// activation still make an elementwise chain.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "fuse.group"(%0, %b) ({
  ^bb0(%2: tensor<2x4xf32>, %3: tensor<4xf32>):
    %4 = "math.add"(%2, %3) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
    %5 = "math.relu"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
    "fuse.yield"(%5) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer0/bias.elemwise_chain", rule = "elemwise_chain"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %6 = "nn.matmul"(%1, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %7 = "fuse.group"(%6, %b) ({
  ^bb0(%8: tensor<2x4xf32>, %9: tensor<4xf32>):
    %10 = "math.add"(%8, %9) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
    %11 = "math.tanh"(%10) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
    "fuse.yield"(%11) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer1/bias.elemwise_chain", rule = "elemwise_chain"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  "func.return"(%7) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1}
// braze.no_fuse in the IR text does the same for one op.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) {braze.no_fuse = true} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "fuse.group"(%x, %w, %b) ({
  ^bb0(%1: tensor<2x4xf32>, %2: tensor<4x4xf32>, %3: tensor<4xf32>):
    %4 = "nn.matmul"(%1, %2) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
    %5 = "math.add"(%4, %3) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
    %6 = "math.relu"(%5) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
    "fuse.yield"(%6) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer0/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %7 = "fuse.group"(%0, %w, %b) ({
  ^bb0(%8: tensor<2x4xf32>, %9: tensor<4x4xf32>, %10: tensor<4xf32>):
    %11 = "nn.matmul"(%8, %9) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
    %12 = "math.add"(%11, %10) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
    "fuse.yield"(%12) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer1/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %13 = "math.tanh"(%7) {braze.no_fuse = true} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%13) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1 only-fuse=MatMul,Add}
// only_fuse: a whitelist; the activations are not in it.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "fuse.group"(%x, %w, %b) ({
  ^bb0(%1: tensor<2x4xf32>, %2: tensor<4x4xf32>, %3: tensor<4xf32>):
    %4 = "nn.matmul"(%1, %2) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
    %5 = "math.add"(%4, %3) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
    "fuse.yield"(%5) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer0/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %6 = "math.relu"(%0) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %7 = "fuse.group"(%6, %w, %b) ({
  ^bb0(%8: tensor<2x4xf32>, %9: tensor<4x4xf32>, %10: tensor<4xf32>):
    %11 = "nn.matmul"(%8, %9) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
    %12 = "math.add"(%11, %10) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
    "fuse.yield"(%12) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer1/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %13 = "math.tanh"(%7) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%13) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1 skip-nodes=layer0/bias}
// skip_nodes: by ONNX node name; layer0 falls apart, layer1 fuses.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "fuse.group"(%2, %w, %b) ({
  ^bb0(%4: tensor<2x4xf32>, %5: tensor<4x4xf32>, %6: tensor<4xf32>):
    %7 = "nn.matmul"(%4, %5) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
    %8 = "math.add"(%7, %6) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
    %9 = "math.tanh"(%8) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
    "fuse.yield"(%9) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer1/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  "func.return"(%3) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1 scope=layer1}
// scope as a glob on node names (a prefix matches): only layer1 fuses.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "fuse.group"(%2, %w, %b) ({
  ^bb0(%4: tensor<2x4xf32>, %5: tensor<4x4xf32>, %6: tensor<4xf32>):
    %7 = "nn.matmul"(%4, %5) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
    %8 = "math.add"(%7, %6) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
    %9 = "math.tanh"(%8) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
    "fuse.yield"(%9) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer1/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  "func.return"(%3) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1 scope="re:^layer0/"}
// scope as a regular expression: only layer0 fuses.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "fuse.group"(%x, %w, %b) ({
  ^bb0(%1: tensor<2x4xf32>, %2: tensor<4x4xf32>, %3: tensor<4xf32>):
    %4 = "nn.matmul"(%1, %2) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
    %5 = "math.add"(%4, %3) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
    %6 = "math.relu"(%5) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
    "fuse.yield"(%6) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer0/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %7 = "nn.matmul"(%0, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %8 = "math.add"(%7, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %9 = "math.tanh"(%8) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%9) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1 scope=index:3-5}
// scope as a range of node indices (ops in function order, from 0).
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "fuse.group"(%2, %w, %b) ({
  ^bb0(%4: tensor<2x4xf32>, %5: tensor<4x4xf32>, %6: tensor<4xf32>):
    %7 = "nn.matmul"(%4, %5) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
    %8 = "math.add"(%7, %6) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
    %9 = "math.tanh"(%8) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
    "fuse.yield"(%9) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer1/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  "func.return"(%3) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1 scope=between:layer0/bias..layer1/fc}
// scope as the subgraph between two nodes: layer0's bias add, its
// Relu and layer1's matmul; only the first two can make a kernel.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "fuse.group"(%0, %b) ({
  ^bb0(%2: tensor<2x4xf32>, %3: tensor<4xf32>):
    %4 = "math.add"(%2, %3) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
    %5 = "math.relu"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
    "fuse.yield"(%5) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer0/bias.elemwise_chain", rule = "elemwise_chain"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %6 = "nn.matmul"(%1, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %7 = "math.add"(%6, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %8 = "math.tanh"(%7) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%8) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1}
// braze.fusion_scope labels: ops with different labels never share a kernel.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) {braze.fusion_scope = "a"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) {braze.fusion_scope = "a"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) {braze.fusion_scope = "a"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) {braze.fusion_scope = "b"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "fuse.group"(%x, %w, %b) ({
  ^bb0(%1: tensor<2x4xf32>, %2: tensor<4x4xf32>, %3: tensor<4xf32>):
    %4 = "nn.matmul"(%1, %2) {braze.fusion_scope = "a"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
    %5 = "math.add"(%4, %3) {braze.fusion_scope = "a"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
    %6 = "math.relu"(%5) {braze.fusion_scope = "a"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
    "fuse.yield"(%6) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer0/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %7 = "fuse.group"(%0, %w, %b) ({
  ^bb0(%8: tensor<2x4xf32>, %9: tensor<4x4xf32>, %10: tensor<4xf32>):
    %11 = "nn.matmul"(%8, %9) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
    %12 = "math.add"(%11, %10) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
    "fuse.yield"(%12) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer1/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %13 = "math.tanh"(%7) {braze.fusion_scope = "b"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%13) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1 scope=b}
// scope also matches braze.fusion_scope labels: only ops labelled b are in scope.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) {braze.fusion_scope = "a"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) {braze.fusion_scope = "b"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) {braze.fusion_scope = "b"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) {braze.fusion_scope = "b"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) {braze.fusion_scope = "a"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "fuse.group"(%2, %w, %b) ({
  ^bb0(%4: tensor<2x4xf32>, %5: tensor<4x4xf32>, %6: tensor<4xf32>):
    %7 = "nn.matmul"(%4, %5) {braze.fusion_scope = "b"} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
    %8 = "math.add"(%7, %6) {braze.fusion_scope = "b"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
    %9 = "math.tanh"(%8) {braze.fusion_scope = "b"} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
    "fuse.yield"(%9) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer1/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  "func.return"(%3) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1 switch=ALL=off,elemwise_chain=on}
// Rule switches: ALL sets the default, a named rule overrides it.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "fuse.group"(%0, %b) ({
  ^bb0(%2: tensor<2x4xf32>, %3: tensor<4xf32>):
    %4 = "math.add"(%2, %3) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
    %5 = "math.relu"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
    "fuse.yield"(%5) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer0/bias.elemwise_chain", rule = "elemwise_chain"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %6 = "nn.matmul"(%1, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %7 = "fuse.group"(%6, %b) ({
  ^bb0(%8: tensor<2x4xf32>, %9: tensor<4xf32>):
    %10 = "math.add"(%8, %9) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
    %11 = "math.tanh"(%10) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
    "fuse.yield"(%11) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer1/bias.elemwise_chain", rule = "elemwise_chain"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  "func.return"(%7) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1 max-group-size=2}
// max_group_size: kernels of at most two ops.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "fuse.group"(%x, %w, %b) ({
  ^bb0(%1: tensor<2x4xf32>, %2: tensor<4x4xf32>, %3: tensor<4xf32>):
    %4 = "nn.matmul"(%1, %2) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
    %5 = "math.add"(%4, %3) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
    "fuse.yield"(%5) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer0/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %6 = "math.relu"(%0) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %7 = "fuse.group"(%6, %w, %b) ({
  ^bb0(%8: tensor<2x4xf32>, %9: tensor<4x4xf32>, %10: tensor<4xf32>):
    %11 = "nn.matmul"(%8, %9) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
    %12 = "math.add"(%11, %10) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
    "fuse.yield"(%12) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer1/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %13 = "math.tanh"(%7) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%13) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1 memory-limit=100}
// memory_limit: a matmul kernel reads x (32 bytes) and w (64) and writes
// 32, too much for 100 bytes with the bias; the bias add and Relu fit (80).
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
  %5 = "math.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "fuse.group"(%0, %b) ({
  ^bb0(%2: tensor<2x4xf32>, %3: tensor<4xf32>):
    %4 = "math.add"(%2, %3) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
    %5 = "math.relu"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
    "fuse.yield"(%5) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer0/bias.elemwise_chain", rule = "elemwise_chain"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %6 = "nn.matmul"(%1, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer1/fc" : "MatMul")
  %7 = "fuse.group"(%6, %b) ({
  ^bb0(%8: tensor<2x4xf32>, %9: tensor<4xf32>):
    %10 = "math.add"(%8, %9) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer1/bias" : "Add")
    %11 = "math.tanh"(%10) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer1/act" : "Tanh")
    "fuse.yield"(%11) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer1/bias.elemwise_chain", rule = "elemwise_chain"} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  "func.return"(%7) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1}
// A value the user asked to keep (an extra graph output) is never fused
// away: layer0's group also returns its bias add.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}, tensor<2x4xf32> {name = "kept"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
  "func.return"(%2, %1) : (tensor<2x4xf32>, tensor<2x4xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}, tensor<2x4xf32> {name = "kept"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0, %1 = "fuse.group"(%x, %w, %b) ({
  ^bb0(%2: tensor<2x4xf32>, %3: tensor<4x4xf32>, %4: tensor<4xf32>):
    %5 = "nn.matmul"(%2, %3) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("layer0/fc" : "MatMul")
    %6 = "math.add"(%5, %4) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("layer0/bias" : "Add")
    %7 = "math.relu"(%6) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("layer0/act" : "Relu")
    "fuse.yield"(%6, %7) : (tensor<2x4xf32>, tensor<2x4xf32>) -> ()
  }) {level = 1, name = "layer0/fc.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  "func.return"(%1, %0) : (tensor<2x4xf32>, tensor<2x4xf32>) -> ()
}

// -----
// RUN: fuse{level=1},fuse{level=2}
// Groups already in the IR stay as they are when fuse runs again.
func.func @main(%x: tensor<2x4xf32>) -> (tensor<4x2xf32> {name = "y"}) {
  %0 = "math.exp"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("e" : "Exp")
  %1 = "math.neg"(%0) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("n" : "Neg")
  %2 = "tensor.transpose"(%1) {perm = [1, 0]} : (tensor<2x4xf32>) -> tensor<4x2xf32> loc("t" : "Transpose")
  "func.return"(%2) : (tensor<4x2xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<4x2xf32> {name = "y"}) {
  %0 = "fuse.group"(%x) ({
  ^bb0(%1: tensor<2x4xf32>):
    %2 = "math.exp"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("e" : "Exp")
    %3 = "math.neg"(%2) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("n" : "Neg")
    "fuse.yield"(%3) : (tensor<2x4xf32>) -> ()
  }) {level = 1, name = "e.elemwise_chain", rule = "elemwise_chain"} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %4 = "tensor.transpose"(%0) {perm = [1, 0]} : (tensor<2x4xf32>) -> tensor<4x2xf32> loc("t" : "Transpose")
  "func.return"(%4) : (tensor<4x2xf32>) -> ()
}

// -----
// RUN: fuse{switch=atention=off}
// A switch naming no rule is an error, not a silent no-op.
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  "func.return"(%x) : (tensor<2xf32>) -> ()
}
// ERROR: rule switch names unknown rule(s) 'atention'

// -----
// RUN: fuse{level=4}
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  "func.return"(%x) : (tensor<2xf32>) -> ()
}
// ERROR: fusion level must be 0 to 3, got 4

// -----
// RUN: fuse{scope="re:("}
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  "func.return"(%x) : (tensor<2xf32>) -> ()
}
// ERROR: scope 're:(' is not a valid regular expression
