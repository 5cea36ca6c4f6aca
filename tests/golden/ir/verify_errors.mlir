// RUN: roundtrip
// Verifier errors: the op's contract is broken although the text parses.
func.func @main(%x: tensor<2x3xf32>) -> (tensor<3x2xf32> {name = "y"}) {
  %0 = "tensor.transpose"(%x) {perm = [1, 0]} : (tensor<2x3xf32>) -> tensor<3x2xf32> loc("t" : "Transpose")
  %1 = "math.relu"(%0) : (tensor<3x2xf32>) -> tensor<2x3xf32> loc("r" : "Relu")
  "func.return"(%0) : (tensor<3x2xf32>) -> ()
}
// ERROR: r (Relu): 'math.relu' result types (tensor<2x3xf32>) differ from the inferred (tensor<3x2xf32>)
// -----
func.func @main(%x: tensor<2x3xf32>) -> (tensor<3x2xf32> {name = "y"}) {
  %0 = "tensor.transpose"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  "func.return"(%0) : (tensor<3x2xf32>) -> ()
}
// ERROR: 'tensor.transpose' requires attribute 'perm' (ints)
// -----
func.func @main(%x: tensor<2x3xf32>) -> (tensor<3x2xf32> {name = "y"}) {
  %0 = "tensor.transpose"(%x) {perm = [1, 0], speed = 3} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  "func.return"(%0) : (tensor<3x2xf32>) -> ()
}
// ERROR: 'tensor.transpose' has no attribute 'speed'
// -----
func.func @main(%x: tensor<2x3xf32>) -> (tensor<3x2xf32> {name = "y"}) {
  %0 = "tensor.transpose"(%x) {perm = [1, 1]} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  "func.return"(%0) : (tensor<3x2xf32>) -> ()
}
// ERROR: perm [1, 1] is not a permutation of 2 dims
// -----
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32> {name = "y"}) {
  %0 = "math.add"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  "func.return"(%0) : (tensor<2x3xf32>) -> ()
}
// ERROR: 'math.add' takes 2 operands (lhs, rhs), got 1
// -----
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x3xf32> {name = "y"}) {
  %0 = "tensor.reshape"(%x) {shape = ["a"]} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  "func.return"(%0) : (tensor<2x3xf32>) -> ()
}
// ERROR: 'tensor.reshape' attribute 'shape' must be a ints attribute, got ('a',)
// -----
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  %c = "const"() {value = dense<[1.0, 2.0, 3.0]>} : () -> tensor<2xf32>
  "func.return"(%x) : (tensor<2xf32>) -> ()
}
// ERROR: dense<...> holds 3 values but tensor<2xf32> needs 2
// -----
func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32> {name = "y"}) {
  %0 = "fuse.group"(%x) ({
  ^bb0(%1: tensor<2xf32>):
    %2 = "math.relu"(%1) : (tensor<2xf32>) -> tensor<2xf32>
    "fuse.yield"(%2) : (tensor<2xf32>) -> ()
  }) {name = "g"} : (tensor<2xf32>) -> tensor<3xf32>
  "func.return"(%x) : (tensor<2xf32>) -> ()
}
// ERROR: 'fuse.group' results must have the types its region yields
