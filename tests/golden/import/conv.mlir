// RUN: import
// auto_pad and the omitted attributes become explicit, full-length pads
<ir_version: 8, opset_import: ["" : 11]>
g (float[1,3,7,8] x, float[4,3,3,3] w, float[4] b) => (float[1,4,4,3] y) {
  y = Conv <auto_pad="SAME_UPPER", strides=[2,3]> (x, w, b)
}
// CHECK:
func.func @main(%x: tensor<1x3x7x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> (tensor<1x4x4x3xf32> {name = "y"}) {
  %0 = "nn.conv"(%x, %w, %b) {dilations = [1, 1], group = 1, pads = [1, 0, 1, 1], strides = [2, 3]} : (tensor<1x3x7x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x4x3xf32> loc("Conv_0" : "Conv")
  "func.return"(%0) : (tensor<1x4x4x3xf32>) -> ()
}

// -----
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,4,4] x, float[2,3,3,3] w) => (float[1,3,9,8] y) {
  y = ConvTranspose <strides=[2,2], output_shape=[9,8]> (x, w)
}
// CHECK:
func.func @main(%x: tensor<1x2x4x4xf32>, %w: tensor<2x3x3x3xf32>) -> (tensor<1x3x9x8xf32> {name = "y"}) {
  %0 = "nn.conv_transpose"(%x, %w) {dilations = [1, 1], group = 1, output_padding = [0, 0], pads = [0, 1, 0, 0], strides = [2, 2]} : (tensor<1x2x4x4xf32>, tensor<2x3x3x3xf32>) -> tensor<1x3x9x8xf32> loc("ConvTranspose_0" : "ConvTranspose")
  "func.return"(%0) : (tensor<1x3x9x8xf32>) -> ()
}

// -----
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,9] x) => (float[1,2,4] y, float[1,2,5] z, float[1,2,1] g) {
  y = MaxPool <kernel_shape=[3], strides=[2], ceil_mode=1> (x)
  z = AveragePool <kernel_shape=[3], strides=[2], pads=[1,1], count_include_pad=1> (x)
  g = GlobalAveragePool (x)
}
// CHECK:
func.func @main(%x: tensor<1x2x9xf32>) -> (tensor<1x2x4xf32> {name = "y"}, tensor<1x2x5xf32> {name = "z"}, tensor<1x2x1xf32> {name = "g"}) {
  %0 = "nn.max_pool"(%x) {ceil_mode = true, dilations = [1], kernel = [3], pads = [0, 0], strides = [2]} : (tensor<1x2x9xf32>) -> tensor<1x2x4xf32> loc("MaxPool_0" : "MaxPool")
  %1 = "nn.avg_pool"(%x) {ceil_mode = false, count_include_pad = true, dilations = [1], kernel = [3], pads = [1, 1], strides = [2]} : (tensor<1x2x9xf32>) -> tensor<1x2x5xf32> loc("AveragePool_1" : "AveragePool")
  %2 = "reduce.mean"(%x) {axes = [2], keepdims = true} : (tensor<1x2x9xf32>) -> tensor<1x2x1xf32> loc("GlobalAveragePool_2" : "GlobalAveragePool")
  "func.return"(%0, %1, %2) : (tensor<1x2x4xf32>, tensor<1x2x5xf32>, tensor<1x2x1xf32>) -> ()
}

// -----
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,2,8,8] x) => (y, indices) {
  y, indices = MaxPool <kernel_shape=[2,2]> (x)
}
// ERROR: the Indices output is not supported

// -----
// dilated average pooling (opset 19)
<ir_version: 9, opset_import: ["" : 19]>
g (float[1,2,8,8] x) => (y) {
  y = AveragePool <kernel_shape=[2,2], dilations=[2,2]> (x)
}
// CHECK:
func.func @main(%x: tensor<1x2x8x8xf32>) -> (tensor<1x2x6x6xf32> {name = "y"}) {
  %0 = "nn.avg_pool"(%x) {ceil_mode = false, count_include_pad = false, dilations = [2, 2], kernel = [2, 2], pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x2x8x8xf32>) -> tensor<1x2x6x6xf32> loc("AveragePool_0" : "AveragePool")
  "func.return"(%0) : (tensor<1x2x6x6xf32>) -> ()
}

// -----
<ir_version: 8, opset_import: ["" : 17]>
g (float[3,8] x, float[4,3,3] w) => (y) {
  y = Conv (x, w)
}
// ERROR: needs an input of rank 3 or more

// -----
// RUN: roundtrip
func.func @main(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) -> (tensor<1x6x6x6xf32> {name = "y"}) {
  %0 = "nn.conv"(%x, %w) {dilations = [1, 1], group = 3, pads = [0, 0, 0, 0], strides = [1, 1]} : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x6x6xf32>
  "func.return"(%0) : (tensor<1x6x6x6xf32>) -> ()
}
// ERROR: do not fit group=3
