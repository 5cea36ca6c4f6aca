// RUN: import | canonicalize,cse,dce,layout{block=4}
// A conv chain with block 4: both 1x1 convs become nn.conv_blocked; the
// bias, the ReLU, the residual add and the per-channel scale follow the
// blocked value (the scale re-laid out now, at compile time), and so does
// the global mean. Transforms appear only at the chain's two ends.
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,2,2] x) => (float[1,4,1,1] y)
<float[4,4,1,1] w1 = {-1,1,-2,0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1}, float[4] b1 = {1,2,3,4}, float[4,4,1,1] w2 = {1,-2,0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1,1},
 float[1,4,1,1] s = {1,2,3,4}> {
  a = Conv(x, w1, b1)
  r = Relu(a)
  c = Conv(r, w2)
  d = Add(c, x)
  m = Mul(d, s)
  y = GlobalAveragePool(m)
}
// CHECK:
func.func @main(%x: tensor<1x4x2x2xf32>) -> (tensor<1x4x1x1xf32> {name = "y"}) {
  %w1 = "const"() {value = dense_resource<w1>} : () -> tensor<4x4x1x1xf32>
  %b1 = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0]>} : () -> tensor<4xf32>
  %0 = "layout.to_blocked"(%x) {block = 4} : (tensor<1x4x2x2xf32>) -> tensor<1x1x2x2x4xf32> loc("x/to_blocked" : "Layout")
  %1 = "nn.conv_blocked"(%0, %w1, %b1) {block = 4, dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x1x2x2x4xf32>, tensor<4x4x1x1xf32>, tensor<4xf32>) -> tensor<1x1x2x2x4xf32> loc("Conv_0" : "Conv")
  %2 = "math.relu"(%1) : (tensor<1x1x2x2x4xf32>) -> tensor<1x1x2x2x4xf32> loc("Relu_1" : "Relu")
  %w2 = "const"() {value = dense_resource<w2>} : () -> tensor<4x4x1x1xf32>
  %3 = "nn.conv_blocked"(%2, %w2) {block = 4, dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x1x2x2x4xf32>, tensor<4x4x1x1xf32>) -> tensor<1x1x2x2x4xf32> loc("Conv_2" : "Conv")
  %4 = "math.add"(%3, %0) : (tensor<1x1x2x2x4xf32>, tensor<1x1x2x2x4xf32>) -> tensor<1x1x2x2x4xf32> loc("Add_3" : "Add")
  %s = "const"() {value = dense<[1.0, 2.0, 3.0, 4.0]>} : () -> tensor<1x1x1x1x4xf32>
  %5 = "math.mul"(%4, %s) : (tensor<1x1x2x2x4xf32>, tensor<1x1x1x1x4xf32>) -> tensor<1x1x2x2x4xf32> loc("Mul_4" : "Mul")
  %6 = "reduce.mean"(%5) {axes = [2, 3], keepdims = true} : (tensor<1x1x2x2x4xf32>) -> tensor<1x1x1x1x4xf32> loc("GlobalAveragePool_5" : "GlobalAveragePool")
  %7 = "layout.from_blocked"(%6) : (tensor<1x1x1x1x4xf32>) -> tensor<1x4x1x1xf32> loc("GlobalAveragePool_5/from_blocked" : "Layout")
  "func.return"(%7) : (tensor<1x4x1x1xf32>) -> ()
}

// -----
// RUN: import | canonicalize,cse,dce,layout{block=4}
// A lone conv stays plain: a chain needs min_convs (2) convs to pay for
// its two transforms. With min_convs=1 (next case) it is blocked.
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,2,2] x) => (float[1,4,2,2] y)
<float[4,4,1,1] w = {-1,1,-2,0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1}> {
  c = Conv(x, w)
  y = Relu(c)
}
// CHECK:
func.func @main(%x: tensor<1x4x2x2xf32>) -> (tensor<1x4x2x2xf32> {name = "y"}) {
  %w = "const"() {value = dense_resource<w>} : () -> tensor<4x4x1x1xf32>
  %0 = "nn.conv"(%x, %w) {dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x4x2x2xf32>, tensor<4x4x1x1xf32>) -> tensor<1x4x2x2xf32> loc("Conv_0" : "Conv")
  %1 = "math.relu"(%0) : (tensor<1x4x2x2xf32>) -> tensor<1x4x2x2xf32> loc("Relu_1" : "Relu")
  "func.return"(%1) : (tensor<1x4x2x2xf32>) -> ()
}

// -----
// RUN: import | canonicalize,cse,dce,layout{block=4 min_convs=1}
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,2,2] x) => (float[1,4,2,2] y)
<float[4,4,1,1] w = {-1,1,-2,0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1}> {
  c = Conv(x, w)
  y = Relu(c)
}
// CHECK:
func.func @main(%x: tensor<1x4x2x2xf32>) -> (tensor<1x4x2x2xf32> {name = "y"}) {
  %w = "const"() {value = dense_resource<w>} : () -> tensor<4x4x1x1xf32>
  %0 = "layout.to_blocked"(%x) {block = 4} : (tensor<1x4x2x2xf32>) -> tensor<1x1x2x2x4xf32> loc("x/to_blocked" : "Layout")
  %1 = "nn.conv_blocked"(%0, %w) {block = 4, dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x1x2x2x4xf32>, tensor<4x4x1x1xf32>) -> tensor<1x1x2x2x4xf32> loc("Conv_0" : "Conv")
  %2 = "math.relu"(%1) : (tensor<1x1x2x2x4xf32>) -> tensor<1x1x2x2x4xf32> loc("Relu_1" : "Relu")
  %3 = "layout.from_blocked"(%2) : (tensor<1x1x2x2x4xf32>) -> tensor<1x4x2x2xf32> loc("Relu_1/from_blocked" : "Layout")
  "func.return"(%3) : (tensor<1x4x2x2xf32>) -> ()
}

// -----
// RUN: import | canonicalize,cse,dce,layout{block=4}
// Channels padded to whole blocks when that adds at most a third: the 3
// input channels take one block of 4, the 6 in the middle two (the conv
// records braze.channels = 6); the weights get zero rows and columns at
// compile time (8x4 and 4x8).
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,2,2] x) => (float[1,4,2,2] y)
<float[6,3,1,1] w1 = {-1,1,-2,0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1,1,-2}, float[4,6,1,1] w2 = {0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1,1}> {
  a = Conv(x, w1)
  r = Relu(a)
  y = Conv(r, w2)
}
// CHECK:
func.func @main(%x: tensor<1x3x2x2xf32>) -> (tensor<1x4x2x2xf32> {name = "y"}) {
  %0 = "layout.to_blocked"(%x) {block = 4} : (tensor<1x3x2x2xf32>) -> tensor<1x1x2x2x4xf32> loc("x/to_blocked" : "Layout")
  %w1 = "const"() {value = dense_resource<w1_1>} : () -> tensor<8x4x1x1xf32>
  %1 = "nn.conv_blocked"(%0, %w1) {block = 4, braze.channels = 6, dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x1x2x2x4xf32>, tensor<8x4x1x1xf32>) -> tensor<1x2x2x2x4xf32> loc("Conv_0" : "Conv")
  %2 = "math.relu"(%1) : (tensor<1x2x2x2x4xf32>) -> tensor<1x2x2x2x4xf32> loc("Relu_1" : "Relu")
  %w2 = "const"() {value = dense_resource<w2_1>} : () -> tensor<4x8x1x1xf32>
  %3 = "nn.conv_blocked"(%2, %w2) {block = 4, dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x2x2x2x4xf32>, tensor<4x8x1x1xf32>) -> tensor<1x1x2x2x4xf32> loc("Conv_2" : "Conv")
  %4 = "layout.from_blocked"(%3) : (tensor<1x1x2x2x4xf32>) -> tensor<1x4x2x2xf32> loc("Conv_2/from_blocked" : "Layout")
  "func.return"(%4) : (tensor<1x4x2x2xf32>) -> ()
}

// -----
// RUN: import | canonicalize,cse,dce,layout{block=4}
// Concat along the channels of whole blocks stays blocked.
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,2,2] x) => (float[1,4,2,2] y)
<float[4,4,1,1] w1 = {-1,1,-2,0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1}, float[4,4,1,1] w2 = {0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1,1,-2,0}, float[4,8,1,1] w3 = {2,-1,1,-2,0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1,1,-2,0,2,-1}> {
  a = Conv(x, w1)
  b = Conv(x, w2)
  c = Concat<axis = 1>(a, b)
  y = Conv(c, w3)
}
// CHECK:
func.func @main(%x: tensor<1x4x2x2xf32>) -> (tensor<1x4x2x2xf32> {name = "y"}) {
  %w1 = "const"() {value = dense_resource<w1>} : () -> tensor<4x4x1x1xf32>
  %0 = "layout.to_blocked"(%x) {block = 4} : (tensor<1x4x2x2xf32>) -> tensor<1x1x2x2x4xf32> loc("x/to_blocked" : "Layout")
  %1 = "nn.conv_blocked"(%0, %w1) {block = 4, dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x1x2x2x4xf32>, tensor<4x4x1x1xf32>) -> tensor<1x1x2x2x4xf32> loc("Conv_0" : "Conv")
  %w2 = "const"() {value = dense_resource<w2>} : () -> tensor<4x4x1x1xf32>
  %2 = "nn.conv_blocked"(%0, %w2) {block = 4, dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x1x2x2x4xf32>, tensor<4x4x1x1xf32>) -> tensor<1x1x2x2x4xf32> loc("Conv_1" : "Conv")
  %3 = "tensor.concat"(%1, %2) {axis = 1} : (tensor<1x1x2x2x4xf32>, tensor<1x1x2x2x4xf32>) -> tensor<1x2x2x2x4xf32> loc("Concat_2" : "Concat")
  %w3 = "const"() {value = dense_resource<w3>} : () -> tensor<4x8x1x1xf32>
  %4 = "nn.conv_blocked"(%3, %w3) {block = 4, dilations = [1, 1], group = 1, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x2x2x2x4xf32>, tensor<4x8x1x1xf32>) -> tensor<1x1x2x2x4xf32> loc("Conv_3" : "Conv")
  %5 = "layout.from_blocked"(%4) : (tensor<1x1x2x2x4xf32>) -> tensor<1x4x2x2xf32> loc("Conv_3/from_blocked" : "Layout")
  "func.return"(%5) : (tensor<1x4x2x2xf32>) -> ()
}

