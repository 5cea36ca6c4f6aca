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
// -----
// RUN: import | canonicalize
// BatchNormalization folds into the conv before it.
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,4,4] x) => (float[1,3,4,4] y)
<float[3,2,1,1] w = {1,2,3,4,5,6}, float[3] b = {0.1,0.2,0.3},
 float[3] s = {1,2,0.5}, float[3] t = {0,1,-1}, float[3] mu = {0.5,0,1}, float[3] var = {1,4,0.25}> {
  c = Conv(x, w, b)
  y = BatchNormalization<epsilon = 0.0>(c, s, t, mu, var)
}
// CHECK:
// -----
// RUN: import | canonicalize
// A BatchNormalization after a Gemm folds into the matmul weights and one bias add.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,2] y)
<float[2,3] w = {1,2,3,4,5,6}, float[2] c = {1,-1},
 float[2] s = {2,3}, float[2] t = {1,0}, float[2] mu = {0,1}, float[2] var = {3,8}> {
  g1 = Gemm<transB = 1>(x, w, c)
  y = BatchNormalization<epsilon = 1.0>(g1, s, t, mu, var)
}
// CHECK:
// -----
// RUN: import | canonicalize
// A BatchNormalization with nothing to fold into becomes a per-channel scale and shift.
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,3] x) => (float[1,2,3] y)
<float[2] s = {1,2}, float[2] t = {0,1}, float[2] mu = {0,0}, float[2] var = {1,1}> {
  y = BatchNormalization<epsilon = 0.0>(x, s, t, mu, var)
}
// CHECK:
