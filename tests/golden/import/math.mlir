// RUN: import
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x, float[3] b) => (float[2,3] y) {
  t = Add(x, b)
  y = Relu(t)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32> {name = "y"}) {
  %0 = "math.add"(%x, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("Add_0" : "Add")
  %1 = "math.relu"(%0) : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("Relu_1" : "Relu")
  "func.return"(%1) : (tensor<2x3xf32>) -> ()
}

// -----
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x, float[4] b) => (float[2,3] y) {
  y = Add(x, b)
}
// ERROR: do not broadcast

// -----
// Pow: a float base takes the exponent cast to its type; an integer base with a
// float exponent is computed in f64 and truncated, as onnxruntime does.
<ir_version: 10, opset_import: ["" : 15]>
g (float[2,3] x, int64[3] e, int32[3] n, float[3] f) => (float[2,3] y, int32[3] z) {
  y = Pow(x, e)
  z = Pow(n, f)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>, %e: tensor<3xi64>, %n: tensor<3xi32>, %f: tensor<3xf32>) -> (tensor<2x3xf32> {name = "y"}, tensor<3xi32> {name = "z"}) {
  %0 = "math.cast"(%e) {to = "f32"} : (tensor<3xi64>) -> tensor<3xf32> loc("Pow_0" : "Pow")
  %1 = "math.pow"(%x, %0) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("Pow_0" : "Pow")
  %2 = "math.cast"(%n) {to = "f64"} : (tensor<3xi32>) -> tensor<3xf64> loc("Pow_1" : "Pow")
  %3 = "math.cast"(%f) {to = "f64"} : (tensor<3xf32>) -> tensor<3xf64> loc("Pow_1" : "Pow")
  %4 = "math.pow"(%2, %3) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64> loc("Pow_1" : "Pow")
  %5 = "math.cast"(%4) {to = "i32"} : (tensor<3xf64>) -> tensor<3xi32> loc("Pow_1" : "Pow")
  "func.return"(%1, %5) : (tensor<2x3xf32>, tensor<3xi32>) -> ()
}

// -----
// Variadic ops chain binary ops; Mean divides the sum by N.
<ir_version: 10, opset_import: ["" : 13]>
g (float[2,3] a, float[3] b, float[1] c) => (float[2,3] y, float[2,3] z, float[2,3] m) {
  y = Mean(a, b, c)
  z = Max(a, b)
  m = Min(a)
}
// CHECK:
func.func @main(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %c: tensor<1xf32>) -> (tensor<2x3xf32> {name = "y"}, tensor<2x3xf32> {name = "z"}, tensor<2x3xf32> {name = "m"}) {
  %0 = "math.add"(%a, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("Mean_0" : "Mean")
  %1 = "math.add"(%0, %c) : (tensor<2x3xf32>, tensor<1xf32>) -> tensor<2x3xf32> loc("Mean_0" : "Mean")
  %2 = "const"() {value = dense<[3.0]>} : () -> tensor<f32> loc("Mean_0" : "Mean")
  %3 = "math.div"(%1, %2) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32> loc("Mean_0" : "Mean")
  %4 = "math.max"(%a, %b) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("Max_1" : "Max")
  "func.return"(%3, %4, %a) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> ()
}

// -----
// Comparisons and predicates return i1.
<ir_version: 10, opset_import: ["" : 16]>
g (float[2,3] x, float[3] t) => (float[2,3] y, bool[2,3] inf) {
  big = GreaterOrEqual(x, t)
  small = Not(big)
  y = Where(small, x, t)
  inf = IsInf<detect_negative=0>(x)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>, %t: tensor<3xf32>) -> (tensor<2x3xf32> {name = "y"}, tensor<2x3xi1> {name = "inf"}) {
  %0 = "math.greater_equal"(%x, %t) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1> loc("GreaterOrEqual_0" : "GreaterOrEqual")
  %1 = "math.not"(%0) : (tensor<2x3xi1>) -> tensor<2x3xi1> loc("Not_1" : "Not")
  %2 = "math.where"(%1, %x, %t) : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("Where_2" : "Where")
  %3 = "math.isinf"(%x) {detect_negative = false, detect_positive = true} : (tensor<2x3xf32>) -> tensor<2x3xi1> loc("IsInf_3" : "IsInf")
  "func.return"(%2, %3) : (tensor<2x3xf32>, tensor<2x3xi1>) -> ()
}

// -----
// Integer Div and Mod, Cast.
<ir_version: 10, opset_import: ["" : 13]>
g (int32[4] a, int32[4] b) => (int32[4] q, int32[4] r, bool[4] nz) {
  q = Div(a, b)
  r = Mod<fmod=1>(a, b)
  nz = Cast<to=9>(r)
}
// CHECK:
func.func @main(%a: tensor<4xi32>, %b: tensor<4xi32>) -> (tensor<4xi32> {name = "q"}, tensor<4xi32> {name = "r"}, tensor<4xi1> {name = "nz"}) {
  %0 = "math.div"(%a, %b) : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32> loc("Div_0" : "Div")
  %1 = "math.mod"(%a, %b) {fmod = true} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32> loc("Mod_1" : "Mod")
  %2 = "math.cast"(%1) {to = "i1"} : (tensor<4xi32>) -> tensor<4xi1> loc("Cast_2" : "Cast")
  "func.return"(%0, %1, %2) : (tensor<4xi32>, tensor<4xi32>, tensor<4xi1>) -> ()
}

// -----
// Activations with attributes; Clip bounds become attributes (inputs since opset 11).
<ir_version: 10, opset_import: ["" : 20]>
g (float[2,3] x, float[3] s) => (float[2,3] y) <float lo = {-1.5}> {
  a = LeakyRelu<alpha=0.5>(x)
  b = Gelu<approximate="tanh">(a)
  c = Clip(b, lo)
  y = PRelu(c, s)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>, %s: tensor<3xf32>) -> (tensor<2x3xf32> {name = "y"}) {
  %0 = "math.leaky_relu"(%x) {alpha = 0.5} : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("LeakyRelu_0" : "LeakyRelu")
  %1 = "math.gelu"(%0) {approximate = "tanh"} : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("Gelu_1" : "Gelu")
  %lo = "const"() {value = dense<[-1.5]>} : () -> tensor<f32>
  %2 = "math.clip"(%1) {max = 3.4028234663852886e+38, min = -1.5} : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("Clip_2" : "Clip")
  %3 = "math.prelu"(%2, %s) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32> loc("PRelu_3" : "PRelu")
  "func.return"(%3) : (tensor<2x3xf32>) -> ()
}

// -----
<ir_version: 10, opset_import: ["" : 9]>
g (float[2,3] x) => (float[2,3] y) {
  y = Clip<min=0.0, max=6.0>(x)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32> {name = "y"}) {
  %0 = "math.clip"(%x) {max = 6.0, min = 0.0} : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("Clip_0" : "Clip")
  "func.return"(%0) : (tensor<2x3xf32>) -> ()
}

// -----
// Before opset 7, B broadcasts from `axis` on: it is reshaped to line up.
<ir_version: 10, opset_import: ["" : 6]>
g (float[2,3,4] a, float[3] b) => (float[2,3,4] y) {
  y = Add<broadcast=1, axis=1>(a, b)
}
// CHECK:
func.func @main(%a: tensor<2x3x4xf32>, %b: tensor<3xf32>) -> (tensor<2x3x4xf32> {name = "y"}) {
  %0 = "tensor.reshape"(%b) {shape = [3, 1]} : (tensor<3xf32>) -> tensor<3x1xf32> loc("Add_0" : "Add")
  %1 = "math.add"(%a, %0) : (tensor<2x3x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32> loc("Add_0" : "Add")
  "func.return"(%1) : (tensor<2x3x4xf32>) -> ()
}

// -----
<ir_version: 10, opset_import: ["" : 6]>
g (float[2,3,4] a, float[4] b) => (float[2,3,4] y) {
  y = Mul(a, b)
}
// ERROR: node Mul_0 (Mul): inputs of shapes [2, 3, 4] and [4] differ, but broadcast=0 needs equal shapes

// -----
<ir_version: 10, opset_import: ["" : 6]>
g (float[2,3,4] a, float[3] b) => (float[2,3,4] y) {
  y = Sub<broadcast=1, axis=2>(a, b)
}
// ERROR: node Sub_0 (Sub): input B of shape [3] does not match the dims of A [2, 3, 4] starting at axis 2

// -----
<ir_version: 10, opset_import: ["" : 13]>
g (float[3] a, float[3] b) => (float[3] y) {
  y = Mod(a, b)
}
// ERROR: node Mod_0 (Mod): Mod of float tensors needs fmod=1

// -----
<ir_version: 10, opset_import: ["" : 13]>
g (float[2,3] x, float[1] lo) => (float[2,3] y) {
  y = Clip(x, lo)
}
// ERROR: node Clip_0 (Clip): input 'min' is computed at run time

// -----
<ir_version: 10, opset_import: ["" : 13]>
g (float[3] x, float[2,3] s) => (float[3] y) {
  y = PRelu(x, s)
}
// ERROR: slope tensor<2x3xf32> must broadcast to the shape of x tensor<3xf32>

// -----
<ir_version: 10, opset_import: ["" : 19]>
g (float[3] x) => (float[3] y) {
  y = Cast<to=17>(x)
}
// ERROR: node Cast_0 (Cast): attribute 'to' has element type FLOAT8E4M3FN, which braze does not support

// -----
// Before opset 6, Cast names its target type.
<ir_version: 3, opset_import: ["" : 5]>
g (int32[3] x) => (float[3] y) {
  y = Cast<to="FLOAT">(x)
}
// CHECK:
func.func @main(%x: tensor<3xi32>) -> (tensor<3xf32> {name = "y"}) {
  %0 = "math.cast"(%x) {to = "f32"} : (tensor<3xi32>) -> tensor<3xf32> loc("Cast_0" : "Cast")
  "func.return"(%0) : (tensor<3xf32>) -> ()
}

