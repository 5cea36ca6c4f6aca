// RUN: roundtrip
// Text that round-trips: names, inline and resource constants, regions, locations.
func.func @main(%x: tensor<1x4xf32>, %arg_1: tensor<4xf32> {name = "input:1"}) -> (tensor<1x4xf32> {name = "out"}, tensor<4x1xf32> {name = "t"}) {
  %w = "const"() {value = dense_resource<w>} : () -> tensor<16x4xf32> loc("w")
  %k = "const"() {value = dense<[1.5, -2.0, inf, nan]>} : () -> tensor<4xf32>
  %s = "const"() {value = dense<0.02>} : () -> tensor<4x4xf32>
  %h = "const"() {value = dense_resource<"/model.2/Constant_output_0">} : () -> tensor<2xi64>
  %0 = "math.add"(%x, %arg_1) : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32> loc("Add_0" : "Add")
  %1 = "fuse.group"(%0, %k) ({
  ^bb0(%2: tensor<1x4xf32>, %3: tensor<4xf32>):
    %4 = "math.mul"(%2, %3) : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32> loc("Mul_1" : "Mul")
    %5 = "math.relu"(%4) {braze.no_fuse = true} : (tensor<1x4xf32>) -> tensor<1x4xf32> loc("Relu_2" : "Relu")
    "fuse.yield"(%5) : (tensor<1x4xf32>) -> ()
  }) {level = 1, name = "mul_relu", rule = "elemwise_chain"} : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
  %6 = "tensor.reshape"(%arg_1) {shape = [4, 1]} : (tensor<4xf32>) -> tensor<4x1xf32> loc("node with \"quotes\"" : "Reshape")
  "func.return"(%1, %6) : (tensor<1x4xf32>, tensor<4x1xf32>) -> ()
}
// CHECK:
func.func @main(%x: tensor<1x4xf32>, %input_1: tensor<4xf32> {name = "input:1"}) -> (tensor<1x4xf32> {name = "out"}, tensor<4x1xf32> {name = "t"}) {
  %w = "const"() {value = dense_resource<w>} : () -> tensor<16x4xf32> loc("w")
  %k = "const"() {value = dense<[1.5, -2.0, inf, nan]>} : () -> tensor<4xf32>
  %s = "const"() {value = dense<0.02>} : () -> tensor<4x4xf32>
  %h = "const"() {value = dense_resource<"/model.2/Constant_output_0">} : () -> tensor<2xi64>
  %0 = "math.add"(%x, %input_1) : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32> loc("Add_0" : "Add")
  %1 = "fuse.group"(%0, %k) ({
  ^bb0(%2: tensor<1x4xf32>, %3: tensor<4xf32>):
    %4 = "math.mul"(%2, %3) : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32> loc("Mul_1" : "Mul")
    %5 = "math.relu"(%4) {braze.no_fuse = true} : (tensor<1x4xf32>) -> tensor<1x4xf32> loc("Relu_2" : "Relu")
    "fuse.yield"(%5) : (tensor<1x4xf32>) -> ()
  }) {level = 1, name = "mul_relu", rule = "elemwise_chain"} : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
  %6 = "tensor.reshape"(%input_1) {shape = [4, 1]} : (tensor<4xf32>) -> tensor<4x1xf32> loc("node with \"quotes\"" : "Reshape")
  "func.return"(%1, %6) : (tensor<1x4xf32>, tensor<4x1xf32>) -> ()
}

