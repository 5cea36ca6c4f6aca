// RUN: import | canonicalize,precision{mode=allow_mix_precision}
// Mixed precision: the MatMul (white) runs in f16, its weight converted at
// compile time; the Add (gray) follows its f16 input; the Softmax (black)
// casts back up to f32. The output keeps the model's f32.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,2] y)
<float[3,2] w = {1,2,3,4,5,6}, float[2] b = {0.5,-0.5}> {
  h = MatMul(x, w)
  a = Add(h, b)
  y = Softmax(a)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x2xf32> {name = "y"}) {
  %0 = "math.cast"(%x) {to = "f16"} : (tensor<2x3xf32>) -> tensor<2x3xf16> loc("x/cast_f16" : "Cast")
  %w.f16 = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]>} : () -> tensor<3x2xf16>
  %1 = "nn.matmul"(%0, %w.f16) : (tensor<2x3xf16>, tensor<3x2xf16>) -> tensor<2x2xf16> loc("MatMul_0" : "MatMul")
  %b.f16 = "const"() {value = dense<[0.5, -0.5]>} : () -> tensor<2xf16>
  %2 = "math.add"(%1, %b.f16) : (tensor<2x2xf16>, tensor<2xf16>) -> tensor<2x2xf16> loc("Add_1" : "Add")
  %3 = "math.cast"(%2) {to = "f32"} : (tensor<2x2xf16>) -> tensor<2x2xf32> loc("Add_1/cast_f32" : "Cast")
  %4 = "nn.softmax"(%3) {axis = 1} : (tensor<2x2xf32>) -> tensor<2x2xf32> loc("Softmax_2" : "Softmax")
  "func.return"(%4) : (tensor<2x2xf32>) -> ()
}


// -----
// RUN: import | canonicalize,precision{mode=force_fp16}
// force_fp16: every float op runs in f16, the black Exp too. One cast of x
// down is shared by both of its users; the output is cast back to f32.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,3] y) {
  e = Exp(x)
  y = Add(e, x)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32> {name = "y"}) {
  %0 = "math.cast"(%x) {to = "f16"} : (tensor<2x3xf32>) -> tensor<2x3xf16> loc("x/cast_f16" : "Cast")
  %1 = "math.exp"(%0) : (tensor<2x3xf16>) -> tensor<2x3xf16> loc("Exp_0" : "Exp")
  %2 = "math.add"(%1, %0) : (tensor<2x3xf16>, tensor<2x3xf16>) -> tensor<2x3xf16> loc("Add_1" : "Add")
  %3 = "math.cast"(%2) {to = "f32"} : (tensor<2x3xf16>) -> tensor<2x3xf32> loc("Add_1/cast_f32" : "Cast")
  "func.return"(%3) : (tensor<2x3xf32>) -> ()
}

// -----
// RUN: import | canonicalize,precision{mode=allow_mix_precision keep=MatMul_0}
// --keep-dtype by node name: the MatMul keeps f32, so nothing after it
// turns 16-bit (the Relu is gray and follows its f32 input).
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,2] y)
<float[3,2] w = {1,2,3,4,5,6}> {
  h = MatMul(x, w)
  y = Relu(h)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x2xf32> {name = "y"}) {
  %w = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]>} : () -> tensor<3x2xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32> loc("MatMul_0" : "MatMul")
  %1 = "math.relu"(%0) : (tensor<2x2xf32>) -> tensor<2x2xf32> loc("Relu_1" : "Relu")
  "func.return"(%1) : (tensor<2x2xf32>) -> ()
}

// -----
// RUN: import | canonicalize,precision{mode=allow_mix_precision_bf16 keep=OpType::Relu}
// --keep-dtype by op type: the Relu between two MatMuls keeps f32, so the
// value is cast up for it and down again for the second MatMul (bf16).
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,2] x) => (float[2,2] y)
<float[2,2] w = {1,2,3,4}, float[2,2] v = {1,0,0,1}> {
  h = MatMul(x, w)
  r = Relu(h)
  y = MatMul(r, v)
}
// CHECK:
func.func @main(%x: tensor<2x2xf32>) -> (tensor<2x2xf32> {name = "y"}) {
  %0 = "math.cast"(%x) {to = "bf16"} : (tensor<2x2xf32>) -> tensor<2x2xbf16> loc("x/cast_bf16" : "Cast")
  %w.bf16 = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0]>} : () -> tensor<2x2xbf16>
  %1 = "nn.matmul"(%0, %w.bf16) : (tensor<2x2xbf16>, tensor<2x2xbf16>) -> tensor<2x2xbf16> loc("MatMul_0" : "MatMul")
  %2 = "math.cast"(%1) {to = "f32"} : (tensor<2x2xbf16>) -> tensor<2x2xf32> loc("MatMul_0/cast_f32" : "Cast")
  %3 = "math.relu"(%2) : (tensor<2x2xf32>) -> tensor<2x2xf32> loc("Relu_1" : "Relu")
  %4 = "math.cast"(%3) {to = "bf16"} : (tensor<2x2xf32>) -> tensor<2x2xbf16> loc("Relu_1/cast_bf16" : "Cast")
  %v.bf16 = "const"() {value = dense<[1.0, 0.0, 0.0, 1.0]>} : () -> tensor<2x2xbf16>
  %5 = "nn.matmul"(%4, %v.bf16) : (tensor<2x2xbf16>, tensor<2x2xbf16>) -> tensor<2x2xbf16> loc("MatMul_2" : "MatMul")
  %6 = "math.cast"(%5) {to = "f32"} : (tensor<2x2xbf16>) -> tensor<2x2xf32> loc("MatMul_2/cast_f32" : "Cast")
  "func.return"(%6) : (tensor<2x2xf32>) -> ()
}

// -----
// RUN: import | canonicalize,precision{mode=allow_mix_precision}
// A gray op whose only float operand is a constant table, indexed by a
// computed integer (an embedding Gather), runs in f16: the table is stored
// in 16 bits, as a white op's weights are.
<ir_version: 8, opset_import: ["" : 17]>
g (int64[2] i) => (float[2,2] y)
<float[3,2] t = {1,2,3,4,5,6}> {
  y = Gather(t, i)
}
// CHECK:
func.func @main(%i: tensor<2xi64>) -> (tensor<2x2xf32> {name = "y"}) {
  %t.f16 = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]>} : () -> tensor<3x2xf16>
  %0 = "tensor.gather"(%t.f16, %i) {axis = 0} : (tensor<3x2xf16>, tensor<2xi64>) -> tensor<2x2xf16> loc("Gather_0" : "Gather")
  %1 = "math.cast"(%0) {to = "f32"} : (tensor<2x2xf16>) -> tensor<2x2xf32> loc("Gather_0/cast_f32" : "Cast")
  "func.return"(%1) : (tensor<2x2xf32>) -> ()
}

// -----
// RUN: import | canonicalize,precision{mode=allow_mix_precision}
// One f16 value read by a black op and a white one: only the black Tanh
// reads it cast up; the second MatMul reads the f16 value itself.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,2] x) => (float[2,2] y, float[2,2] z)
<float[2,2] w = {1,2,3,4}, float[2,2] v = {1,0,0,1}> {
  h = MatMul(x, w)
  y = Tanh(h)
  z = MatMul(h, v)
}
// CHECK:
func.func @main(%x: tensor<2x2xf32>) -> (tensor<2x2xf32> {name = "y"}, tensor<2x2xf32> {name = "z"}) {
  %0 = "math.cast"(%x) {to = "f16"} : (tensor<2x2xf32>) -> tensor<2x2xf16> loc("x/cast_f16" : "Cast")
  %w.f16 = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0]>} : () -> tensor<2x2xf16>
  %1 = "nn.matmul"(%0, %w.f16) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xf16> loc("MatMul_0" : "MatMul")
  %2 = "math.cast"(%1) {to = "f32"} : (tensor<2x2xf16>) -> tensor<2x2xf32> loc("MatMul_0/cast_f32" : "Cast")
  %3 = "math.tanh"(%2) : (tensor<2x2xf32>) -> tensor<2x2xf32> loc("Tanh_1" : "Tanh")
  %v.f16 = "const"() {value = dense<[1.0, 0.0, 0.0, 1.0]>} : () -> tensor<2x2xf16>
  %4 = "nn.matmul"(%1, %v.f16) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xf16> loc("MatMul_2" : "MatMul")
  %5 = "math.cast"(%4) {to = "f32"} : (tensor<2x2xf16>) -> tensor<2x2xf32> loc("MatMul_2/cast_f32" : "Cast")
  "func.return"(%3, %5) : (tensor<2x2xf32>, tensor<2x2xf32>) -> ()
}

// -----
// RUN: import | canonicalize,fuse{level=1},precision{mode=force_fp16}
// The pass runs before fusion: a module with fused groups is an error.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,3] y) {
  e = Exp(x)
  y = Relu(e)
}
// ERROR: the precision pass runs before fusion

// -----
// RUN: import | canonicalize,precision{mode=allow_mix_precision keep=NoSuchNode}
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,3] y) {
  y = Relu(x)
}
// ERROR: --keep-dtype names no node called 'NoSuchNode'

// -----
// RUN: precision{mode=allow_mix_precision}
// IR text written by hand has no ONNX op types: the IR op decides the list
// (nn.matmul white, nn.softmax black, math.relu gray).
func.func @main(%x: tensor<2x2xf32>) -> (tensor<2x2xf32> {name = "y"}) {
  %w = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0]>} : () -> tensor<2x2xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %1 = "math.relu"(%0) : (tensor<2x2xf32>) -> tensor<2x2xf32>
  %2 = "nn.softmax"(%1) {axis = 1} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  "func.return"(%2) : (tensor<2x2xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2x2xf32>) -> (tensor<2x2xf32> {name = "y"}) {
  %0 = "math.cast"(%x) {to = "f16"} : (tensor<2x2xf32>) -> tensor<2x2xf16> loc("x/cast_f16" : "Cast")
  %w.f16 = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0]>} : () -> tensor<2x2xf16>
  %1 = "nn.matmul"(%0, %w.f16) : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xf16>
  %2 = "math.relu"(%1) : (tensor<2x2xf16>) -> tensor<2x2xf16>
  %3 = "math.cast"(%2) {to = "f32"} : (tensor<2x2xf16>) -> tensor<2x2xf32> loc("input/cast_f32" : "Cast")
  %4 = "nn.softmax"(%3) {axis = 1} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  "func.return"(%4) : (tensor<2x2xf32>) -> ()
}

