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
