// RUN: import | canonicalize,raise-attention
// A scale after the scores MatMul (Div) and a K that exists only in 4-D: q
// and v are read as the projections wrote them, [batch, seq, heads*size];
// K^T's transpose is absorbed; the result is 3-D, so no transpose is left.
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,4] x, float[1,2,3,2] k, float[1,1,3,3] mask) => (float[1,3,4] y)
<float[4,4] wq = {1,0,2,0,0,1,0,2,1,1,0,0,0,0,1,1}, float[4,4] wv = {0,1,0,1,1,0,1,0,2,0,0,1,0,2,1,0},
 float c = {1.4142135}, int64[4] split = {1,3,2,2}, int64[3] merge = {1,3,4}> {
  qp = MatMul(x, wq)
  qs = Reshape(qp, split)
  q = Transpose<perm = [0, 2, 1, 3]>(qs)
  kt = Transpose<perm = [0, 1, 3, 2]>(k)
  s = MatMul(q, kt)
  d = Div(s, c)
  a = Add(d, mask)
  p = Softmax<axis = -1>(a)
  vp = MatMul(x, wv)
  vs = Reshape(vp, split)
  v = Transpose<perm = [0, 2, 1, 3]>(vs)
  o = MatMul(p, v)
  ot = Transpose<perm = [0, 2, 1, 3]>(o)
  y = Reshape(ot, merge)
}
// CHECK:
func.func @main(%x: tensor<1x3x4xf32>, %k: tensor<1x2x3x2xf32>, %mask: tensor<1x1x3x3xf32>) -> (tensor<1x3x4xf32> {name = "y"}) {
  %wq = "const"() {value = dense_resource<wq>} : () -> tensor<4x4xf32>
  %0 = "nn.matmul"(%x, %wq) : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32> loc("MatMul_0" : "MatMul")
  %wv = "const"() {value = dense_resource<wv>} : () -> tensor<4x4xf32>
  %1 = "nn.matmul"(%x, %wv) : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32> loc("MatMul_8" : "MatMul")
  %2 = "nn.attention"(%0, %k, %1, %mask) {braze.raised_by = "attention", braze.raised_from = ["Transpose_2", "Reshape_1", "Transpose_3", "Transpose_10", "Reshape_9", "MatMul_4", "Div_5", "Add_6", "Softmax_7", "MatMul_11", "Transpose_12", "Reshape_13"], kv_heads = 2, q_heads = 2, scale = 0.7071067932881648} : (tensor<1x3x4xf32>, tensor<1x2x3x2xf32>, tensor<1x3x4xf32>, tensor<1x1x3x3xf32>) -> tensor<1x3x4xf32> loc("MatMul_11" : "Attention")
  "func.return"(%2) : (tensor<1x3x4xf32>) -> ()
}

// -----
// K^T given as it is: the op reads K, so a transpose of K^T is made.
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,3,2] q, float[1,2,2,3] kt, float[1,2,3,2] v) => (float[1,2,3,2] y)
<float c = {2}> {
  s = MatMul(q, kt)
  d = Mul(s, c)
  p = Softmax<axis = 3>(d)
  y = MatMul(p, v)
}
// CHECK:
func.func @main(%q: tensor<1x2x3x2xf32>, %kt: tensor<1x2x2x3xf32>, %v: tensor<1x2x3x2xf32>) -> (tensor<1x2x3x2xf32> {name = "y"}) {
  %0 = "tensor.transpose"(%kt) {perm = [0, 1, 3, 2]} : (tensor<1x2x2x3xf32>) -> tensor<1x2x3x2xf32> loc("MatMul_3/transpose_k" : "Transpose")
  %1 = "nn.attention"(%q, %0, %v) {braze.raised_by = "attention", braze.raised_from = ["MatMul_0", "Mul_1", "Softmax_2", "MatMul_3"], kv_heads = 2, q_heads = 2, scale = 2.0} : (tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>) -> tensor<1x2x3x2xf32> loc("MatMul_3" : "Attention")
  "func.return"(%1) : (tensor<1x2x3x2xf32>) -> ()
}

// -----
// The dynamo exporter's form: q and K^T each scaled by d**-0.25, K^T made
// by Transpose(0, 2, 3, 1) of the reshaped projection, Softmax's NaN guard.
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,4] x, float[1,3,4] kp, float[1,3,4] v) => (float[1,2,3,2] y)
<float c = {0.8408964}, float z = {0}, int64[4] split = {1,3,2,2}> {
  qs = Reshape(x, split)
  q = Transpose<perm = [0, 2, 1, 3]>(qs)
  qc = Mul(q, c)
  ks = Reshape(kp, split)
  kt = Transpose<perm = [0, 2, 3, 1]>(ks)
  kc = Mul(c, kt)
  s = MatMul(qc, kc)
  p = Softmax<axis = -1>(s)
  n = IsNaN(p)
  g = Where(n, z, p)
  vs = Reshape(v, split)
  vt = Transpose<perm = [0, 2, 1, 3]>(vs)
  y = MatMul(g, vt)
}
// CHECK:
func.func @main(%x: tensor<1x3x4xf32>, %kp: tensor<1x3x4xf32>, %v: tensor<1x3x4xf32>) -> (tensor<1x2x3x2xf32> {name = "y"}) {
  %0 = "tensor.reshape"(%x) {shape = [1, 3, 2, 2]} : (tensor<1x3x4xf32>) -> tensor<1x3x2x2xf32> loc("Reshape_0" : "Reshape")
  %1 = "tensor.transpose"(%0) {perm = [0, 2, 1, 3]} : (tensor<1x3x2x2xf32>) -> tensor<1x2x3x2xf32> loc("Transpose_1" : "Transpose")
  %2 = "nn.attention"(%1, %kp, %v) {braze.raised_by = "attention", braze.raised_from = ["Mul_2", "Mul_5", "Transpose_4", "Reshape_3", "Transpose_11", "Reshape_10", "MatMul_6", "Softmax_7", "IsNaN_8", "Where_9", "MatMul_12"], kv_heads = 2, q_heads = 2, scale = 0.7071068020032136} : (tensor<1x2x3x2xf32>, tensor<1x3x4xf32>, tensor<1x3x4xf32>) -> tensor<1x2x3x2xf32> loc("MatMul_12" : "Attention")
  "func.return"(%2) : (tensor<1x2x3x2xf32>) -> ()
}

