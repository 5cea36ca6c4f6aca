// RUN: import | canonicalize,fuse{level=2}
// Level 2: injective producers are inlined into their consumer. The
// Reshape and Transpose become the prologue of the matmul, whose bias add
// is its epilogue: one kernel, named after the anchor.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3,2] x) => (float[3,2] y)
<float[4,2] w = {1,2,3,4,5,6,7,8}, float[2] b = {0.5,-0.5}, int64[2] shape = {4,3}> {
  r = Reshape(x, shape)
  t = Transpose<perm = [1, 0]>(r)
  m = MatMul(t, w)
  y = Add(m, b)
}
// CHECK:
func.func @main(%x: tensor<2x3x2xf32>) -> (tensor<3x2xf32> {name = "y"}) {
  %w = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]>} : () -> tensor<4x2xf32>
  %b = "const"() {value = dense<[0.5, -0.5]>} : () -> tensor<2xf32>
  %0 = "fuse.group"(%x, %w, %b) ({
  ^bb0(%1: tensor<2x3x2xf32>, %2: tensor<4x2xf32>, %3: tensor<2xf32>):
    %4 = "tensor.reshape"(%1) {shape = [4, 3]} : (tensor<2x3x2xf32>) -> tensor<4x3xf32> loc("Reshape_0" : "Reshape")
    %5 = "tensor.transpose"(%4) {perm = [1, 0]} : (tensor<4x3xf32>) -> tensor<3x4xf32> loc("Transpose_1" : "Transpose")
    %6 = "nn.matmul"(%5, %2) : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32> loc("MatMul_2" : "MatMul")
    %7 = "math.add"(%6, %3) : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32> loc("Add_3" : "Add")
    "fuse.yield"(%7) : (tensor<3x2xf32>) -> ()
  }) {level = 2, name = "MatMul_2.injective_producer", rule = "injective_producer"} : (tensor<2x3x2xf32>, tensor<4x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  "func.return"(%0) : (tensor<3x2xf32>) -> ()
}

// -----
// RUN: import | canonicalize,fuse{level=2}
// Residual add + LayerNorm: the add is the norm's elementwise prologue.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,4] x, float[2,4] r) => (float[2,4] y)
<float[4] s = {1,1,2,2}, float[4] t = {0,0,1,1}> {
  a = Add(x, r)
  y = LayerNormalization<axis = -1, epsilon = 0.00001>(a, s, t)
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>, %r: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %s = "const"() {value = dense<[1.0, 1.0, 2.0, 2.0]>} : () -> tensor<4xf32>
  %t = "const"() {value = dense<[0.0, 0.0, 1.0, 1.0]>} : () -> tensor<4xf32>
  %0 = "fuse.group"(%x, %r, %s, %t) ({
  ^bb0(%1: tensor<2x4xf32>, %2: tensor<2x4xf32>, %3: tensor<4xf32>, %4: tensor<4xf32>):
    %5 = "math.add"(%1, %2) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("Add_0" : "Add")
    %6 = "nn.layer_norm"(%5, %3, %4) {axis = 1, epsilon = 9.999999747378752e-06} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("LayerNormalization_1" : "LayerNormalization")
    "fuse.yield"(%6) : (tensor<2x4xf32>) -> ()
  }) {level = 2, name = "LayerNormalization_1.norm_prologue", rule = "norm_prologue"} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  "func.return"(%0) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: import | canonicalize,fuse{level=2}
// Softmax with its NaN guard (IsNaN, Where) as its epilogue; the scale
// before it as its prologue.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,4] x) => (float[2,4] y)
<float z = {0}, float c = {0.5}> {
  d = Mul(x, c)
  s = Softmax<axis = -1>(d)
  n = IsNaN(s)
  y = Where(n, z, s)
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %c = "const"() {value = dense<[0.5]>} : () -> tensor<f32>
  %z = "const"() {value = dense<[0.0]>} : () -> tensor<f32>
  %0 = "fuse.group"(%x, %c, %z) ({
  ^bb0(%1: tensor<2x4xf32>, %2: tensor<f32>, %3: tensor<f32>):
    %4 = "math.mul"(%1, %2) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32> loc("Mul_0" : "Mul")
    %5 = "nn.softmax"(%4) {axis = 1} : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("Softmax_1" : "Softmax")
    %6 = "math.isnan"(%5) : (tensor<2x4xf32>) -> tensor<2x4xi1> loc("IsNaN_2" : "IsNaN")
    %7 = "math.where"(%6, %3, %5) : (tensor<2x4xi1>, tensor<f32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("Where_3" : "Where")
    "fuse.yield"(%7) : (tensor<2x4xf32>) -> ()
  }) {level = 2, name = "Softmax_1.norm_epilogue", rule = "norm_epilogue"} : (tensor<2x4xf32>, tensor<f32>, tensor<f32>) -> tensor<2x4xf32>
  "func.return"(%0) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: import | canonicalize,fuse{level=2}
// erf-GELU into the epilogue of the matmul before it: the bias add feeds
// both the Div and the last Mul, so level 1 could not take it.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,2] x) => (float[2,2] y)
<float[2,2] w = {1,2,3,4}, float[2] b = {0.5,-0.5}, float sq = {1.4142135}, float one = {1}, float half = {0.5}> {
  m = MatMul(x, w)
  h = Add(m, b)
  d = Div(h, sq)
  e = Erf(d)
  p = Add(e, one)
  q = Mul(h, p)
  y = Mul(q, half)
}
// CHECK:
func.func @main(%x: tensor<2x2xf32>) -> (tensor<2x2xf32> {name = "y"}) {
  %w = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0]>} : () -> tensor<2x2xf32>
  %b = "const"() {value = dense<[0.5, -0.5]>} : () -> tensor<2xf32>
  %sq = "const"() {value = dense<[1.4142135]>} : () -> tensor<f32>
  %one = "const"() {value = dense<[1.0]>} : () -> tensor<f32>
  %half = "const"() {value = dense<[0.5]>} : () -> tensor<f32>
  %0 = "fuse.group"(%x, %w, %b, %sq, %one, %half) ({
  ^bb0(%1: tensor<2x2xf32>, %2: tensor<2x2xf32>, %3: tensor<2xf32>, %4: tensor<f32>, %5: tensor<f32>, %6: tensor<f32>):
    %7 = "nn.matmul"(%1, %2) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32> loc("MatMul_0" : "MatMul")
    %8 = "math.add"(%7, %3) : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32> loc("Add_1" : "Add")
    %9 = "math.div"(%8, %4) : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32> loc("Div_2" : "Div")
    %10 = "math.erf"(%9) : (tensor<2x2xf32>) -> tensor<2x2xf32> loc("Erf_3" : "Erf")
    %11 = "math.add"(%10, %5) : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32> loc("Add_4" : "Add")
    %12 = "math.mul"(%8, %11) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32> loc("Mul_5" : "Mul")
    %13 = "math.mul"(%12, %6) : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32> loc("Mul_6" : "Mul")
    "fuse.yield"(%13) : (tensor<2x2xf32>) -> ()
  }) {level = 2, name = "MatMul_0.gelu_epilogue", rule = "gelu_epilogue"} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<2x2xf32>
  "func.return"(%0) : (tensor<2x2xf32>) -> ()
}

// -----
// RUN: import | canonicalize,fuse{level=2}
// Conv + ReLU + MaxPool, and a global average pool after a conv: the
// pooling joins the conv's kernel (conv_pool).
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,4,4] x) => (float[1,1,2,2] y, float[1,1,1,1] z)
<float[1,1,1,1] w = {2}, float[1,1,1,1] v = {3}> {
  c = Conv(x, w)
  r = Relu(c)
  y = MaxPool<kernel_shape = [2, 2], strides = [2, 2]>(r)
  k = Conv(x, v)
  z = GlobalAveragePool(k)
}
// CHECK:
func.func @main(%x: tensor<1x1x4x4xf32>) -> (tensor<1x1x2x2xf32> {name = "y"}, tensor<1x1x1x1xf32> {name = "z"}) {
  %w = "const"() {value = dense<[2.0]>} : () -> tensor<1x1x1x1xf32>
  %0 = "fuse.group"(%x, %w) ({
  ^bb0(%1: tensor<1x1x4x4xf32>, %2: tensor<1x1x1x1xf32>):
    %3 = "nn.conv"(%1, %2) {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x1x4x4xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x4x4xf32> loc("Conv_0" : "Conv")
    %4 = "math.relu"(%3) : (tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> loc("Relu_1" : "Relu")
    %5 = "nn.max_pool"(%4) {ceil_mode = false, dilations = [1, 1], kernel = [2, 2], pads = [0, 0, 0, 0], strides = [2, 2]} : (tensor<1x1x4x4xf32>) -> tensor<1x1x2x2xf32> loc("MaxPool_2" : "MaxPool")
    "fuse.yield"(%5) : (tensor<1x1x2x2xf32>) -> ()
  }) {level = 2, name = "Conv_0.conv_pool", rule = "conv_pool"} : (tensor<1x1x4x4xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x2x2xf32>
  %v = "const"() {value = dense<[3.0]>} : () -> tensor<1x1x1x1xf32>
  %6 = "fuse.group"(%x, %v) ({
  ^bb0(%7: tensor<1x1x4x4xf32>, %8: tensor<1x1x1x1xf32>):
    %9 = "nn.conv"(%7, %8) {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x1x4x4xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x4x4xf32> loc("Conv_3" : "Conv")
    %10 = "reduce.mean"(%9) {axes = [2, 3], keepdims = true} : (tensor<1x1x4x4xf32>) -> tensor<1x1x1x1xf32> loc("GlobalAveragePool_4" : "GlobalAveragePool")
    "fuse.yield"(%10) : (tensor<1x1x1x1xf32>) -> ()
  }) {level = 2, name = "Conv_3.conv_pool", rule = "conv_pool"} : (tensor<1x1x4x4xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x1x1xf32>
  "func.return"(%0, %6) : (tensor<1x1x2x2xf32>, tensor<1x1x1x1xf32>) -> ()
}

