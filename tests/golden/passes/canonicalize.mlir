// RUN: canonicalize
// No-op data movement disappears; chains merge.
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32> {name = "y"}, tensor<3x2xf32> {name = "z"}) {
  %0 = "tensor.identity"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "tensor.reshape"(%0) {shape = [6]} : (tensor<2x3xf32>) -> tensor<6xf32>
  %2 = "tensor.reshape"(%1) {shape = [2, 3]} : (tensor<6xf32>) -> tensor<2x3xf32>
  %3 = "tensor.transpose"(%2) {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %4 = "tensor.transpose"(%3) {perm = [1, 0]} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  %5 = "math.cast"(%4) {to = "f32"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %6 = "tensor.transpose"(%5) {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  "func.return"(%5, %6) : (tensor<2x3xf32>, tensor<3x2xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32> {name = "y"}, tensor<3x2xf32> {name = "z"}) {
  %0 = "tensor.transpose"(%x) {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  "func.return"(%x, %0) : (tensor<2x3xf32>, tensor<3x2xf32>) -> ()
}

// -----
// Adding zero and multiplying by one are dropped unless they broadcast.
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32> {name = "y"}, tensor<4x2x3xf32> {name = "z"}) {
  %zero = "const"() {value = dense<0.0>} : () -> tensor<3xf32>
  %one = "const"() {value = dense<1.0>} : () -> tensor<2x1xf32>
  %big = "const"() {value = dense<0.0>} : () -> tensor<4x1x1xf32>
  %0 = "math.add"(%zero, %x) : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "math.mul"(%0, %one) : (tensor<2x3xf32>, tensor<2x1xf32>) -> tensor<2x3xf32>
  %2 = "math.add"(%1, %big) : (tensor<2x3xf32>, tensor<4x1x1xf32>) -> tensor<4x2x3xf32>
  "func.return"(%1, %2) : (tensor<2x3xf32>, tensor<4x2x3xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32> {name = "y"}, tensor<4x2x3xf32> {name = "z"}) {
  %big = "const"() {value = dense<0.0>} : () -> tensor<4x1x1xf32>
  %0 = "math.add"(%x, %big) : (tensor<2x3xf32>, tensor<4x1x1xf32>) -> tensor<4x2x3xf32>
  "func.return"(%x, %0) : (tensor<2x3xf32>, tensor<4x2x3xf32>) -> ()
}

// -----
// Constant folding: ops on constants become constants; chained constant adds merge.
func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32> {name = "y"}) {
  %a = "const"() {value = dense<[1.0, 2.0, 3.0]>} : () -> tensor<3xf32>
  %b = "const"() {value = dense<[0.5, 0.5, 1.0]>} : () -> tensor<3xf32>
  %0 = "math.mul"(%a, %b) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %1 = "math.add"(%x, %0) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %2 = "math.add"(%1, %a) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  "func.return"(%2) : (tensor<3xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<3xf32>) -> (tensor<3xf32> {name = "y"}) {
  %combined = "const"() {value = dense<[1.5, 3.0, 6.0]>} : () -> tensor<3xf32>
  %0 = "math.add"(%x, %combined) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  "func.return"(%0) : (tensor<3xf32>) -> ()
}

// -----
// RUN: import | canonicalize
// The Shape -> Gather -> Unsqueeze -> Concat -> Reshape chain of exporters folds to a static reshape.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3,4] x) => (float[2,12] y) {
  s = Shape(x)
  i = Constant<value = int64[1] {0}>()
  d = Gather<axis = 0>(s, i)
  m = Constant<value = int64[1] {-1}>()
  shape = Concat<axis = 0>(d, m)
  y = Reshape(x, shape)
}
// CHECK:
func.func @main(%x: tensor<2x3x4xf32>) -> (tensor<2x12xf32> {name = "y"}) {
  %0 = "tensor.reshape"(%x) {shape = [2, 12]} : (tensor<2x3x4xf32>) -> tensor<2x12xf32> loc("Reshape_5" : "Reshape")
  "func.return"(%0) : (tensor<2x12xf32>) -> ()
}

// -----
// RUN: import | canonicalize
// BatchNormalization folds into the conv before it.
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,4,4] x) => (float[1,3,4,4] y)
<float[3,2,1,1] w = {1,2,3,4,5,6}, float[3] b = {0.1,0.2,0.3},
 float[3] s = {1,2,0.5}, float[3] t = {0,1,-1}, float[3] mu = {0.5,0,1}, float[3] var = {1,1,1}> {
  c = Conv(x, w, b)
  y = BatchNormalization<epsilon = 0.0>(c, s, t, mu, var)
}
// CHECK:
func.func @main(%x: tensor<1x2x4x4xf32>) -> (tensor<1x3x4x4xf32> {name = "y"}) {
  %Conv_0.weight = "const"() {value = dense<[1.0, 2.0, 6.0, 8.0, 2.5, 3.0]>} : () -> tensor<3x2x1x1xf32> loc("Conv_0" : "Conv")
  %Conv_0.bias = "const"() {value = dense<[-0.4, 1.4, -1.35]>} : () -> tensor<3xf32> loc("Conv_0" : "Conv")
  %0 = "nn.conv"(%x, %Conv_0.weight, %Conv_0.bias) {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x2x4x4xf32>, tensor<3x2x1x1xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32> loc("Conv_0" : "Conv")
  "func.return"(%0) : (tensor<1x3x4x4xf32>) -> ()
}

// -----
// RUN: import | canonicalize
// A BatchNormalization after a Gemm folds into the matmul weights and one bias add.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,2] y)
<float[2,3] w = {1,2,3,4,5,6}, float[2] c = {1,-1},
 float[2] s = {2,3}, float[2] t = {1,0}, float[2] mu = {0,1}, float[2] var = {3,3}> {
  g1 = Gemm<transB = 1>(x, w, c)
  y = BatchNormalization<epsilon = 1.0>(g1, s, t, mu, var)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x2xf32> {name = "y"}) {
  %Gemm_0.weight = "const"() {value = dense<[1.0, 6.0, 2.0, 7.5, 3.0, 9.0]>} : () -> tensor<3x2xf32> loc("Gemm_0" : "Gemm")
  %0 = "nn.matmul"(%x, %Gemm_0.weight) : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32> loc("Gemm_0" : "Gemm")
  %combined = "const"() {value = dense<[2.0, -3.0]>} : () -> tensor<2xf32> loc("BatchNormalization_1" : "BatchNormalization")
  %1 = "math.add"(%0, %combined) : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32> loc("BatchNormalization_1" : "BatchNormalization")
  "func.return"(%1) : (tensor<2x2xf32>) -> ()
}

// -----
// RUN: import | canonicalize
// A BatchNormalization with nothing to fold into becomes a per-channel scale and shift.
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,3] x) => (float[1,2,3] y)
<float[2] s = {1,2}, float[2] t = {0,1}, float[2] mu = {0,0}, float[2] var = {1,1}> {
  y = BatchNormalization<epsilon = 0.0>(x, s, t, mu, var)
}
// CHECK:
func.func @main(%x: tensor<1x2x3xf32>) -> (tensor<1x2x3xf32> {name = "y"}) {
  %BatchNormalization_0.scale = "const"() {value = dense<[1.0, 2.0]>} : () -> tensor<2x1xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %0 = "math.mul"(%x, %BatchNormalization_0.scale) : (tensor<1x2x3xf32>, tensor<2x1xf32>) -> tensor<1x2x3xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %BatchNormalization_0.shift = "const"() {value = dense<[0.0, 1.0]>} : () -> tensor<2x1xf32> loc("BatchNormalization_0" : "BatchNormalization")
  %1 = "math.add"(%0, %BatchNormalization_0.shift) : (tensor<1x2x3xf32>, tensor<2x1xf32>) -> tensor<1x2x3xf32> loc("BatchNormalization_0" : "BatchNormalization")
  "func.return"(%1) : (tensor<1x2x3xf32>) -> ()
}

