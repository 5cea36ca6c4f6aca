"""Cases shared by the converter and lowering tests."""

#: (input type, attributes) of pooling windows: strides, pads, ceil mode, auto_pad, 1-D and 3-D
POOL_CASES = [
    ("float[1,2,9]", "<kernel_shape=[3]>"),
    ("float[1,2,9]", "<kernel_shape=[2], strides=[2], pads=[1,0]>"),
    ("float[1,2,7,8]", "<kernel_shape=[3,3], strides=[2,2], pads=[1,1,1,1]>"),
    ("float[1,2,7,8]", "<kernel_shape=[3,2], strides=[2,3], ceil_mode=1>"),
    ("float[1,2,6,6]", "<kernel_shape=[3,3], strides=[2,2], pads=[1,1,1,1], ceil_mode=1>"),
    ("float[1,2,5,5]", "<kernel_shape=[2,2], strides=[2,2], pads=[1,1,0,0], ceil_mode=1>"),  # a window past the input
    ("float[1,2,7,8]", "<kernel_shape=[3,3], strides=[2,3], auto_pad=\"SAME_UPPER\">"),
    ("float[1,2,7,8]", "<kernel_shape=[2,4], strides=[2,3], auto_pad=\"SAME_LOWER\">"),
    ("float[1,2,7,8]", "<kernel_shape=[3,3], auto_pad=\"VALID\">"),
    ("float[1,1,4,5,6]", "<kernel_shape=[2,2,3], strides=[2,1,2], pads=[0,1,1,1,0,1]>"),
]

#: IR text: two MatMul + Add + activation layers (fusion's and its drawing's tests)
MLP = """
func.func @main(%x: tensor<2x4xf32>) -> (tensor<2x4xf32> {name = "y"}) {
  %w = "const"() {value = dense<0.25>} : () -> tensor<4x4xf32>
  %b = "const"() {value = dense<0.5>} : () -> tensor<4xf32>
  %0 = "nn.matmul"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("fc0" : "MatMul")
  %1 = "math.add"(%0, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("bias0" : "Add")
  %2 = "math.relu"(%1) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("act0" : "Relu")
  %3 = "nn.matmul"(%2, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("fc1" : "MatMul")
  %4 = "math.add"(%3, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> loc("bias1" : "Add")
  %5 = "math.tanh"(%4) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("act1" : "Tanh")
  "func.return"(%5) : (tensor<2x4xf32>) -> ()
}
"""
