// RUN: import | canonicalize,fuse{level=3}
// Level 3: the whole attention, QK^T -> scale -> mask add -> Softmax -> NaN
// guard -> V, is one kernel; the transpose of K is its prologue.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3,4] q, float[2,3,4] k, float[2,3,4] v, float[1,3,3] mask) => (float[2,3,4] y)
<float c = {2}, float z = {0}> {
  kt = Transpose<perm = [0, 2, 1]>(k)
  s = MatMul(q, kt)
  d = Div(s, c)
  a = Add(d, mask)
  p = Softmax<axis = -1>(a)
  n = IsNaN(p)
  g = Where(n, z, p)
  y = MatMul(g, v)
}
// CHECK:
func.func @main(%q: tensor<2x3x4xf32>, %k: tensor<2x3x4xf32>, %v: tensor<2x3x4xf32>, %mask: tensor<1x3x3xf32>) -> (tensor<2x3x4xf32> {name = "y"}) {
  %c = "const"() {value = dense<[2.0]>} : () -> tensor<f32>
  %z = "const"() {value = dense<[0.0]>} : () -> tensor<f32>
  %0 = "fuse.group"(%k, %q, %c, %mask, %z, %v) ({
  ^bb0(%1: tensor<2x3x4xf32>, %2: tensor<2x3x4xf32>, %3: tensor<f32>, %4: tensor<1x3x3xf32>, %5: tensor<f32>, %6: tensor<2x3x4xf32>):
    %7 = "tensor.transpose"(%1) {perm = [0, 2, 1]} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32> loc("Transpose_0" : "Transpose")
    %8 = "nn.matmul"(%2, %7) : (tensor<2x3x4xf32>, tensor<2x4x3xf32>) -> tensor<2x3x3xf32> loc("MatMul_1" : "MatMul")
    %9 = "math.div"(%8, %3) : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32> loc("Div_2" : "Div")
    %10 = "math.add"(%9, %4) : (tensor<2x3x3xf32>, tensor<1x3x3xf32>) -> tensor<2x3x3xf32> loc("Add_3" : "Add")
    %11 = "nn.softmax"(%10) {axis = 2} : (tensor<2x3x3xf32>) -> tensor<2x3x3xf32> loc("Softmax_4" : "Softmax")
    %12 = "math.isnan"(%11) : (tensor<2x3x3xf32>) -> tensor<2x3x3xi1> loc("IsNaN_5" : "IsNaN")
    %13 = "math.where"(%12, %5, %11) : (tensor<2x3x3xi1>, tensor<f32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32> loc("Where_6" : "Where")
    %14 = "nn.matmul"(%13, %6) : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32> loc("MatMul_7" : "MatMul")
    "fuse.yield"(%14) : (tensor<2x3x4xf32>) -> ()
  }) {level = 3, name = "MatMul_1.attention", rule = "attention"} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<f32>, tensor<1x3x3xf32>, tensor<f32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  "func.return"(%0) : (tensor<2x3x4xf32>) -> ()
}

// -----
// RUN: import | canonicalize,fuse{level=3}
// Horizontal fusion: the three matmuls read the same input (Q, K, V
// projections) and become one kernel with three results.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,2] x) => (float[2,2] q, float[2,2] k, float[2,2] v)
<float[2,2] wq = {1,2,3,4}, float[2,2] wk = {5,6,7,8}, float[2,2] wv = {9,10,11,12}, float[2] b = {1,-1}> {
  q = MatMul(x, wq)
  m = MatMul(x, wk)
  k = Add(m, b)
  v = MatMul(x, wv)
}
// CHECK:
func.func @main(%x: tensor<2x2xf32>) -> (tensor<2x2xf32> {name = "q"}, tensor<2x2xf32> {name = "k"}, tensor<2x2xf32> {name = "v"}) {
  %wq = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0]>} : () -> tensor<2x2xf32>
  %wk = "const"() {value = dense<[5.0, 6.0, 7.0, 8.0]>} : () -> tensor<2x2xf32>
  %b = "const"() {value = dense<[1.0, -1.0]>} : () -> tensor<2xf32>
  %wv = "const"() {value = dense<[9.0, 10.0, 11.0, 12.0]>} : () -> tensor<2x2xf32>
  %0, %1, %2 = "fuse.group"(%x, %wq, %wk, %b, %wv) ({
  ^bb0(%3: tensor<2x2xf32>, %4: tensor<2x2xf32>, %5: tensor<2x2xf32>, %6: tensor<2xf32>, %7: tensor<2x2xf32>):
    %8 = "nn.matmul"(%3, %4) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32> loc("MatMul_0" : "MatMul")
    %9 = "nn.matmul"(%3, %5) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32> loc("MatMul_1" : "MatMul")
    %10 = "math.add"(%9, %6) : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32> loc("Add_2" : "Add")
    %11 = "nn.matmul"(%3, %7) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32> loc("MatMul_3" : "MatMul")
    "fuse.yield"(%8, %10, %11) : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) -> ()
  }) {level = 3, name = "MatMul_0.horizontal_matmul", rule = "horizontal_matmul"} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xf32>, tensor<2x2xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>)
  "func.return"(%0, %1, %2) : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>) -> ()
}

// -----
// RUN: import | canonicalize,fuse{level=3}
// Multi-output groups: the add feeds the LayerNorm and a later add, so
// level 2 keeps it apart from the norm; level 3 fuses it and the group
// returns both values.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,4] x, float[2,4] r) => (float[2,4] y)
<float[4] s = {1,1,2,2}, float[4] t = {0,0,1,1}, float[4,4] w = {1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1}> {
  a = Add(x, r)
  n = LayerNormalization<axis = -1, epsilon = 0.00001>(a, s, t)
  m = MatMul(n, w)
  y = Add(m, a)
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>, %r: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %s = "const"() {value = dense<[1.0, 1.0, 2.0, 2.0]>} : () -> tensor<4xf32>
  %t = "const"() {value = dense<[0.0, 0.0, 1.0, 1.0]>} : () -> tensor<4xf32>
  %0, %1 = "fuse.group"(%x, %r, %s, %t) ({
  ^bb0(%2: tensor<2x4xf32>, %3: tensor<2x4xf32>, %4: tensor<4xf32>, %5: tensor<4xf32>):
    %6 = "math.add"(%2, %3) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("Add_0" : "Add")
    %7 = "nn.layer_norm"(%6, %4, %5) {axis = 1, epsilon = 9.999999747378752e-06} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("LayerNormalization_1" : "LayerNormalization")
    "fuse.yield"(%6, %7) : (tensor<2x4xf32>, tensor<2x4xf32>) -> ()
  }) {level = 3, name = "LayerNormalization_1.multi_output", rule = "multi_output"} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
  %w = "const"() {value = dense_resource<w>} : () -> tensor<4x4xf32>
  %8 = "fuse.group"(%1, %w, %0) ({
  ^bb0(%9: tensor<2x4xf32>, %10: tensor<4x4xf32>, %11: tensor<2x4xf32>):
    %12 = "nn.matmul"(%9, %10) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("MatMul_2" : "MatMul")
    %13 = "math.add"(%12, %11) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("Add_3" : "Add")
    "fuse.yield"(%13) : (tensor<2x4xf32>) -> ()
  }) {level = 3, name = "MatMul_2.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  "func.return"(%8) : (tensor<2x4xf32>) -> ()
}

// -----
// RUN: import | canonicalize,fuse{level=2}
// The same graph at level 2, for comparison: the residual add stays alone
// (a group with two outputs needs level 3); the matmul takes the second add.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,4] x, float[2,4] r) => (float[2,4] y)
<float[4] s = {1,1,2,2}, float[4] t = {0,0,1,1}, float[4,4] w = {1,0,0,0,0,1,0,0,0,0,1,0,0,0,0,1}> {
  a = Add(x, r)
  n = LayerNormalization<axis = -1, epsilon = 0.00001>(a, s, t)
  m = MatMul(n, w)
  y = Add(m, a)
}
// CHECK:
func.func @main(%x: tensor<2x4xf32>, %r: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %0 = "math.add"(%x, %r) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("Add_0" : "Add")
  %s = "const"() {value = dense<[1.0, 1.0, 2.0, 2.0]>} : () -> tensor<4xf32>
  %t = "const"() {value = dense<[0.0, 0.0, 1.0, 1.0]>} : () -> tensor<4xf32>
  %1 = "nn.layer_norm"(%0, %s, %t) {axis = 1, epsilon = 9.999999747378752e-06} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("LayerNormalization_1" : "LayerNormalization")
  %w = "const"() {value = dense_resource<w>} : () -> tensor<4x4xf32>
  %2 = "fuse.group"(%1, %w, %0) ({
  ^bb0(%3: tensor<2x4xf32>, %4: tensor<4x4xf32>, %5: tensor<2x4xf32>):
    %6 = "nn.matmul"(%3, %4) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("MatMul_2" : "MatMul")
    %7 = "math.add"(%6, %5) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("Add_3" : "Add")
    "fuse.yield"(%7) : (tensor<2x4xf32>) -> ()
  }) {level = 2, name = "MatMul_2.matmul_epilogue", rule = "matmul_epilogue"} : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  "func.return"(%2) : (tensor<2x4xf32>) -> ()
}

