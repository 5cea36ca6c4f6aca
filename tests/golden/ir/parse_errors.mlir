// RUN: roundtrip
// Parser errors: each names line:column and what was expected.
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  %0 = "math.relu"(%y) : (tensor<2xf32>) -> tensor<2xf32>
  "func.return"(%0) : (tensor<2xf32>) -> ()
}
// ERROR: 2:20: use of undefined value %y
// -----
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  %0 = "math.nope"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  "func.return"(%0) : (tensor<2xf32>) -> ()
}
// ERROR: 2:8: unknown op 'math.nope'
// -----
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  %0 = "math.relu"(%x) : (tensor<2xf32>) -> tensor<2xf32>
  %0 = "math.relu"(%0) : (tensor<2xf32>) -> tensor<2xf32>
  "func.return"(%0) : (tensor<2xf32>) -> ()
}
// ERROR: 3:3: redefinition of %0
// -----
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  %0 = "math.relu"(%x) : (tensor<3xf32>) -> tensor<2xf32>
  "func.return"(%0) : (tensor<2xf32>) -> ()
}
// ERROR: 'math.relu' operand #0 is declared tensor<3xf32> but the value has type tensor<2xf32>
// -----
func.func @main(%x: tensor<2xq7>) -> (tensor<2xf32> {name = "y"}) {
  "func.return"(%x) : (tensor<2xf32>) -> ()
}
// ERROR: 1:21: unknown element type 'q7'
// -----
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  %0 = "math.relu"(%x) {alpha = } : (tensor<2xf32>) -> tensor<2xf32>
  "func.return"(%0) : (tensor<2xf32>) -> ()
}
// ERROR: 2:33: expected a number, string, true/false, inf or nan
// -----
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  %0 = "math.relu"(%x) : (tensor<2xf32>) -> tensor<2xf32>
// ERROR: expected '}' to close the function
// -----
func.func @main(%x: tensor<2xf32>) -> (tensor<3xf32> {name = "y"}) {
  "func.return"(%x) : (tensor<2xf32>) -> ()
}
// ERROR: func @main declares results (tensor<3xf32>) but returns (tensor<2xf32>)
