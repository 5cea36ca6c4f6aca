// RUN: import
// Gemm: transposes, alpha and beta*C become explicit ops
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] a, float[4,3] b, float[4] c) => (float[2,4] y) {
  y = Gemm <transB=1, alpha=0.5, beta=2.0> (a, b, c)
}
// CHECK:
func.func @main(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>, %c: tensor<4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %0 = "tensor.transpose"(%b) {perm = [1, 0]} : (tensor<4x3xf32>) -> tensor<3x4xf32> loc("Gemm_0" : "Gemm")
  %1 = "nn.matmul"(%a, %0) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32> loc("Gemm_0" : "Gemm")
  %2 = "const"() {value = dense<[0.5]>} : () -> tensor<f32> loc("Gemm_0" : "Gemm")
  %3 = "math.mul"(%1, %2) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32> loc("Gemm_0" : "Gemm")
  %4 = "const"() {value = dense<[2.0]>} : () -> tensor<f32> loc("Gemm_0" : "Gemm")
  %5 = "math.mul"(%c, %4) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32> loc("Gemm_0" : "Gemm")
  %6 = "math.add"(%3, %5) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("Gemm_0" : "Gemm")
  "func.return"(%6) : (tensor<2x4xf32>) -> ()
}

// -----
// Softmax before opset 13 views the input as 2-D at `axis`
<ir_version: 8, opset_import: ["" : 11]>
g (float[2,3,4] x) => (float[2,3,4] y, float[2,3,4] z) {
  y = Softmax <axis=1> (x)
  z = LogSoftmax <axis=-1> (x)
}
// CHECK:
func.func @main(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32> {name = "y"}, tensor<2x3x4xf32> {name = "z"}) {
  %0 = "tensor.reshape"(%x) {shape = [2, 12]} : (tensor<2x3x4xf32>) -> tensor<2x12xf32> loc("Softmax_0" : "Softmax")
  %1 = "nn.softmax"(%0) {axis = 1} : (tensor<2x12xf32>) -> tensor<2x12xf32> loc("Softmax_0" : "Softmax")
  %2 = "tensor.reshape"(%1) {shape = [2, 3, 4]} : (tensor<2x12xf32>) -> tensor<2x3x4xf32> loc("Softmax_0" : "Softmax")
  %3 = "nn.log_softmax"(%x) {axis = 2} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32> loc("LogSoftmax_1" : "LogSoftmax")
  "func.return"(%2, %3) : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> ()
}

// -----
// a transformer block's pieces
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,5,8] x, float[8] s, float[8] b, float[8,8] w) => (float[2,5,5] y) {
  n = LayerNormalization <axis=-1, epsilon=1e-12> (x, s, b)
  q = MatMul(n, w)
  t = Einsum <equation="bid,bjd->bij"> (q, n)
  y = Softmax <axis=-1> (t)
}
// CHECK:
func.func @main(%x: tensor<2x5x8xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>, %w: tensor<8x8xf32>) -> (tensor<2x5x5xf32> {name = "y"}) {
  %0 = "nn.layer_norm"(%x, %s, %b) {axis = 2, epsilon = 9.999999960041972e-13} : (tensor<2x5x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x5x8xf32> loc("LayerNormalization_0" : "LayerNormalization")
  %1 = "nn.matmul"(%0, %w) : (tensor<2x5x8xf32>, tensor<8x8xf32>) -> tensor<2x5x8xf32> loc("MatMul_1" : "MatMul")
  %2 = "nn.einsum"(%1, %0) {equation = "bid,bjd->bij"} : (tensor<2x5x8xf32>, tensor<2x5x8xf32>) -> tensor<2x5x5xf32> loc("Einsum_2" : "Einsum")
  %3 = "nn.softmax"(%2) {axis = 2} : (tensor<2x5x5xf32>) -> tensor<2x5x5xf32> loc("Softmax_3" : "Softmax")
  "func.return"(%3) : (tensor<2x5x5xf32>) -> ()
}

// -----
<ir_version: 8, opset_import: ["" : 9]>
g (float[1,3,4,4] x, float[3] s, float[3] b, float[3] m, float[3] v) => (float[1,3,4,4] y) {
  n = BatchNormalization <epsilon=0.001> (x, s, b, m, v)
  i = InstanceNormalization (n, s, b)
  y = LRN <size=3> (i)
}
// CHECK:
func.func @main(%x: tensor<1x3x4x4xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> (tensor<1x3x4x4xf32> {name = "y"}) {
  %0 = "nn.batch_norm"(%x, %s, %b, %m, %v) {epsilon = 0.0010000000474974513} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %1 = "nn.instance_norm"(%0, %s, %b) {epsilon = 1e-05} : (tensor<1x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32> loc("InstanceNormalization_1" : "InstanceNormalization")
  %2 = "nn.lrn"(%1) {alpha = 0.0001, beta = 0.75, bias = 1.0, size = 3} : (tensor<1x3x4x4xf32>) -> tensor<1x3x4x4xf32> loc("LRN_2" : "LRN")
  "func.return"(%2) : (tensor<1x3x4x4xf32>) -> ()
}

// -----
// TopK's K and CumSum's axis are constant inputs; they become attributes
<ir_version: 8, opset_import: ["" : 11]>
g (float[3,5] x) => (float[3,2] values, int64[3,2] indices, float[3,5] c) <int64[1] k = {2}, int32 axis = {-1}> {
  values, indices = TopK <largest=0> (x, k)
  c = CumSum <exclusive=1, reverse=1> (x, axis)
}
// CHECK:
func.func @main(%x: tensor<3x5xf32>) -> (tensor<3x2xf32> {name = "values"}, tensor<3x2xi64> {name = "indices"}, tensor<3x5xf32> {name = "c"}) {
  %k = "const"() {value = dense<[2]>} : () -> tensor<1xi64>
  %0, %1 = "nn.topk"(%x) {axis = 1, k = 2, largest = false, sorted = true} : (tensor<3x5xf32>) -> (tensor<3x2xf32>, tensor<3x2xi64>) loc("TopK_0" : "TopK")
  %axis = "const"() {value = dense<[-1]>} : () -> tensor<i32>
  %2 = "nn.cumsum"(%x) {axis = 1, exclusive = true, reverse = true} : (tensor<3x5xf32>) -> tensor<3x5xf32> loc("CumSum_1" : "CumSum")
  "func.return"(%0, %1, %2) : (tensor<3x2xf32>, tensor<3x2xi64>, tensor<3x5xf32>) -> ()
}

// -----
<ir_version: 8, opset_import: ["" : 11]>
g (float[3,5] x, int64[1] k) => (values, indices) {
  values, indices = TopK (x, k)
}
// ERROR: input 'K' is computed at run time

// -----
<ir_version: 8, opset_import: ["" : 15]>
g (float[2,3] x, float[3] s, float[3] b, float[3] m, float[3] v) => (y) {
  y = BatchNormalization <training_mode=1> (x, s, b, m, v)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>, %s: tensor<3xf32>, %b: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>) -> (tensor<2x3xf32> {name = "y"}) {
  %0 = "reduce.mean"(%x) {axes = [0], keepdims = true} : (tensor<2x3xf32>) -> tensor<1x3xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %1 = "math.sub"(%x, %0) : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %2 = "math.mul"(%1, %1) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %3 = "reduce.mean"(%2) {axes = [0], keepdims = true} : (tensor<2x3xf32>) -> tensor<1x3xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %4 = "tensor.reshape"(%s) {shape = [1, 3]} : (tensor<3xf32>) -> tensor<1x3xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %5 = "tensor.reshape"(%b) {shape = [1, 3]} : (tensor<3xf32>) -> tensor<1x3xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %6 = "const"() {value = dense<[1e-05]>} : () -> tensor<f32> loc("BatchNormalization_0" : "BatchNormalization")
  %7 = "math.add"(%3, %6) : (tensor<1x3xf32>, tensor<f32>) -> tensor<1x3xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %8 = "math.sqrt"(%7) : (tensor<1x3xf32>) -> tensor<1x3xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %9 = "math.div"(%1, %8) : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %10 = "math.mul"(%9, %4) : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %11 = "math.add"(%10, %5) : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<2x3xf32> loc("BatchNormalization_0" : "BatchNormalization")
  "func.return"(%11) : (tensor<2x3xf32>) -> ()
}

// -----
// the statistics outputs, in float32 (stash_type=1)
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,8] x, float[8] s) => (y, mean) {
  y, mean = LayerNormalization (x, s)
}
// CHECK:
func.func @main(%x: tensor<2x8xf32>, %s: tensor<8xf32>) -> (tensor<2x8xf32> {name = "y"}, tensor<2x1xf32> {name = "mean"}) {
  %0 = "nn.layer_norm"(%x, %s) {axis = 1, epsilon = 1e-05} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32> loc("LayerNormalization_0" : "LayerNormalization")
  %1 = "reduce.mean"(%x) {axes = [1], keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32> loc("LayerNormalization_0" : "LayerNormalization")
  %2 = "math.sub"(%x, %1) : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32> loc("LayerNormalization_0" : "LayerNormalization")
  %3 = "math.mul"(%2, %2) : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32> loc("LayerNormalization_0" : "LayerNormalization")
  %4 = "reduce.mean"(%3) {axes = [1], keepdims = true} : (tensor<2x8xf32>) -> tensor<2x1xf32> loc("LayerNormalization_0" : "LayerNormalization")
  %5 = "const"() {value = dense<[1e-05]>} : () -> tensor<f32> loc("LayerNormalization_0" : "LayerNormalization")
  %6 = "math.add"(%4, %5) : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32> loc("LayerNormalization_0" : "LayerNormalization")
  %7 = "math.sqrt"(%6) : (tensor<2x1xf32>) -> tensor<2x1xf32> loc("LayerNormalization_0" : "LayerNormalization")
  %8 = "math.reciprocal"(%7) : (tensor<2x1xf32>) -> tensor<2x1xf32> loc("LayerNormalization_0" : "LayerNormalization")
  "func.return"(%0, %1) : (tensor<2x8xf32>, tensor<2x1xf32>) -> ()
}

// -----
<ir_version: 8, opset_import: ["" : 12]>
g (float[2,3] a, float[4,3] b) => (y) {
  y = Einsum <equation="ij,jk->ik"> (a, b)
}
// ERROR: label 'j' has sizes 3 and 4

// -----
// RUN: roundtrip
func.func @main(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) -> (tensor<2x5xf32> {name = "y"}) {
  %0 = "nn.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  "func.return"(%0) : (tensor<2x5xf32>) -> ()
}
// ERROR: contracted dims differ
