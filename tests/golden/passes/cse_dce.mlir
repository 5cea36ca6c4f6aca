// RUN: cse
// Identical ops and identical constants merge.
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  %a = "const"() {value = dense<[1.0, 2.0]>} : () -> tensor<2xf32>
  %b = "const"() {value = dense<[1.0, 2.0]>} : () -> tensor<2xf32>
  %0 = "math.add"(%x, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = "math.add"(%x, %b) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %2 = "math.mul"(%0, %1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  "func.return"(%2) : (tensor<2xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  %a = "const"() {value = dense<[1.0, 2.0]>} : () -> tensor<2xf32>
  %0 = "math.add"(%x, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = "math.mul"(%0, %0) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  "func.return"(%1) : (tensor<2xf32>) -> ()
}

// -----
// RUN: dce
// Unused ops and constants go; used ones stay.
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  %a = "const"() {value = dense<[1.0, 2.0]>} : () -> tensor<2xf32>
  %0 = "math.add"(%x, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %1 = "math.exp"(%0) : (tensor<2xf32>) -> tensor<2xf32>
  %2 = "math.relu"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  "func.return"(%2) : (tensor<2xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  %0 = "math.relu"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  "func.return"(%0) : (tensor<2xf32>) -> ()
}

