// RUN: import | canonicalize,fuse{level=0}
// Level 0: nothing fuses; one kernel per op, the IR is unchanged.
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3] x) => (float[2,2] y)
<float[3,2] w = {1,2,3,4,5,6}, float[2] b = {0.5,-0.5}> {
  h = Gemm(x, w, b)
  y = Relu(h)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x2xf32> {name = "y"}) {
  %w = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]>} : () -> tensor<3x2xf32>
  %b = "const"() {value = dense<[0.5, -0.5]>} : () -> tensor<2xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32> loc("Gemm_0" : "Gemm")
  %1 = "math.add"(%0, %b) : (tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x2xf32> loc("Gemm_0" : "Gemm")
  %2 = "math.relu"(%1) : (tensor<2x2xf32>) -> tensor<2x2xf32> loc("Relu_1" : "Relu")
  "func.return"(%2) : (tensor<2x2xf32>) -> ()
}

