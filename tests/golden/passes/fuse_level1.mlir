// RUN: import | canonicalize,fuse{level=1}
// Level 1: a conv with its epilogue. BatchNorm folds into the conv's weights
// (canonicalize); the ReLU and the residual add join the conv's kernel. The
// residual input x is an operand of the group; the weights are operands too.
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,4,4] x) => (float[1,2,4,4] y)
<float[2,2,1,1] w = {1,2,3,4}, float[2] b = {0.1,0.2},
 float[2] s = {1,2}, float[2] t = {0,1}, float[2] mu = {0.5,0}, float[2] var = {1,1}> {
  c = Conv(x, w, b)
  n = BatchNormalization<epsilon = 0.0>(c, s, t, mu, var)
  r = Relu(n)
  y = Add(r, x)
}
// CHECK:
func.func @main(%x: tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32> {name = "y"}) {
  %Conv_0.weight = "const"() {value = dense<[1.0, 2.0, 6.0, 8.0]>} : () -> tensor<2x2x1x1xf32> loc("Conv_0" : "Conv")
  %Conv_0.bias = "const"() {value = dense<[-0.4, 1.4]>} : () -> tensor<2xf32> loc("Conv_0" : "Conv")
  %0 = "fuse.group"(%x, %Conv_0.weight, %Conv_0.bias) ({
  ^bb0(%1: tensor<1x2x4x4xf32>, %2: tensor<2x2x1x1xf32>, %3: tensor<2xf32>):
    %4 = "nn.conv"(%1, %2, %3) {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32> loc("Conv_0" : "Conv")
    %5 = "math.relu"(%4) : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("Relu_2" : "Relu")
    %6 = "math.add"(%5, %1) : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> loc("Add_3" : "Add")
    "fuse.yield"(%6) : (tensor<1x2x4x4xf32>) -> ()
  }) {level = 1, name = "Conv_0.conv_epilogue", rule = "conv_epilogue"} : (tensor<1x2x4x4xf32>, tensor<2x2x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
  "func.return"(%0) : (tensor<1x2x4x4xf32>) -> ()
}

// -----
// RUN: import | canonicalize,fuse{level=1}
// Gemm is a matmul and a bias add after canonicalize: both, and the Tanh,
// make one matmul_epilogue kernel named after the Gemm node.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,2] y)
<float[3,2] w = {1,2,3,4,5,6}, float[2] b = {0.5,-0.5}> {
  h = Gemm(x, w, b)
  y = Tanh(h)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x2xf32> {name = "y"}) {
  %w = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]>} : () -> tensor<3x2xf32>
  %b = "const"() {value = dense<[0.5, -0.5]>} : () -> tensor<2xf32>
  %0 = "fuse.group"(%x, %w, %b) ({
  ^bb0(%1: tensor<2x3xf32>, %2: tensor<3x2xf32>, %3: tensor<2xf32>):
    %4 = "nn.matmul"(%1, %2) : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32> loc("Gemm_0" : "Gemm")
    %5 = "math.add"(%4, %3) : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32> loc("Gemm_0" : "Gemm")
    %6 = "math.tanh"(%5) : (tensor<2x2xf32>) -> tensor<2x2xf32> loc("Tanh_1" : "Tanh")
    "fuse.yield"(%6) : (tensor<2x2xf32>) -> ()
  }) {level = 1, name = "Gemm_0.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x3xf32>, tensor<3x2xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  "func.return"(%0) : (tensor<2x2xf32>) -> ()
}

// -----
// RUN: import | canonicalize,fuse{level=1}
// A chain of elementwise ops, with a diamond inside (x*sigmoid(x) reads x
// twice), is one elemwise_chain kernel.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,3] y) {
  e = Exp(x)
  s = Sigmoid(e)
  m = Mul(e, s)
  y = Neg(m)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32> {name = "y"}) {
  %0 = "fuse.group"(%x) ({
  ^bb0(%1: tensor<2x3xf32>):
    %2 = "math.exp"(%1) : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("Exp_0" : "Exp")
    %3 = "math.sigmoid"(%2) : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("Sigmoid_1" : "Sigmoid")
    %4 = "math.mul"(%2, %3) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> loc("Mul_2" : "Mul")
    %5 = "math.neg"(%4) : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("Neg_3" : "Neg")
    "fuse.yield"(%5) : (tensor<2x3xf32>) -> ()
  }) {level = 1, name = "Exp_0.elemwise_chain", rule = "elemwise_chain"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  "func.return"(%0) : (tensor<2x3xf32>) -> ()
}

// -----
// RUN: import | canonicalize,fuse{level=1}
// MaxPool takes an elementwise epilogue (pool_epilogue). The Transpose is
// injective: joining it to anything needs level 2, so it stays alone.
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,4,4] x) => (float[1,1,2,2] y) {
  t = Transpose<perm = [0, 1, 3, 2]>(x)
  p = MaxPool<kernel_shape = [2, 2], strides = [2, 2]>(t)
  y = Relu(p)
}
// CHECK:
func.func @main(%x: tensor<1x1x4x4xf32>) -> (tensor<1x1x2x2xf32> {name = "y"}) {
  %0 = "tensor.transpose"(%x) {perm = [0, 1, 3, 2]} : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> loc("Transpose_0" : "Transpose")
  %1 = "fuse.group"(%0) ({
  ^bb0(%2: tensor<1x1x4x4xf32>):
    %3 = "nn.max_pool"(%2) {ceil_mode = false, dilations = [1, 1], kernel = [2, 2], pads = [0, 0, 0, 0], strides = [2, 2]} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32> loc("MaxPool_1" : "MaxPool")
    %4 = "math.relu"(%3) : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> loc("Relu_2" : "Relu")
    "fuse.yield"(%4) : (tensor<1x1x2x2xf32>) -> ()
  }) {level = 1, name = "MaxPool_1.pool_epilogue", rule = "pool_epilogue"} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32>
  "func.return"(%1) : (tensor<1x1x2x2xf32>) -> ()
}

// -----
// RUN: import | canonicalize,fuse{level=1}
// One output per group at levels 1-2: the matmul's result also feeds a
// second consumer, so the Relu epilogue would make a second output. The
// matmul stays alone, and the two elementwise consumers chain up instead.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,2] x) => (float[2,2] y)
<float[2,2] w = {1,2,3,4}> {
  h = MatMul(x, w)
  r = Relu(h)
  n = Neg(h)
  y = Add(r, n)
}
// CHECK:
func.func @main(%x: tensor<2x2xf32>) -> (tensor<2x2xf32> {name = "y"}) {
  %w = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0]>} : () -> tensor<2x2xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32> loc("MatMul_0" : "MatMul")
  %1 = "fuse.group"(%0) ({
  ^bb0(%2: tensor<2x2xf32>):
    %3 = "math.relu"(%2) : (tensor<2x2xf32>) -> tensor<2x2xf32> loc("Relu_1" : "Relu")
    %4 = "math.neg"(%2) : (tensor<2x2xf32>) -> tensor<2x2xf32> loc("Neg_2" : "Neg")
    %5 = "math.add"(%3, %4) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32> loc("Add_3" : "Add")
    "fuse.yield"(%5) : (tensor<2x2xf32>) -> ()
  }) {level = 1, name = "Relu_1.elemwise_chain", rule = "elemwise_chain"} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  "func.return"(%1) : (tensor<2x2xf32>) -> ()
}

