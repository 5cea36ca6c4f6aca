// RUN: import
// The Shape -> Gather -> Unsqueeze -> Concat chain that exporters emit folds:
// the Reshape gets a static shape.
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3,4] x) => (float[2,12] y) <int64[1] minus1 = {-1}, int64 zero = {0}, int64[1] ax = {0}> {
  s = Shape(x)
  n = Gather<axis=0>(s, zero)
  n1 = Unsqueeze(n, ax)
  target = Concat<axis=0>(n1, minus1)
  y = Reshape(x, target)
}
// CHECK:
func.func @main(%x: tensor<2x3x4xf32>) -> (tensor<2x12xf32> {name = "y"}) {
  %0 = "tensor.shape"(%x) {end = 3, start = 0} : (tensor<2x3x4xf32>) -> tensor<3xi64> loc("Shape_0" : "Shape")
  %zero = "const"() {value = dense<[0]>} : () -> tensor<i64>
  %1 = "tensor.gather"(%0, %zero) {axis = 0} : (tensor<3xi64>, tensor<i64>) -> tensor<i64> loc("Gather_1" : "Gather")
  %ax = "const"() {value = dense<[0]>} : () -> tensor<1xi64>
  %2 = "tensor.reshape"(%1) {shape = [1]} : (tensor<i64>) -> tensor<1xi64> loc("Unsqueeze_2" : "Unsqueeze")
  %minus1 = "const"() {value = dense<[-1]>} : () -> tensor<1xi64>
  %3 = "tensor.concat"(%2, %minus1) {axis = 0} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64> loc("Concat_3" : "Concat")
  %4 = "tensor.reshape"(%x) {shape = [2, 12]} : (tensor<2x3x4xf32>) -> tensor<2x12xf32> loc("Reshape_4" : "Reshape")
  "func.return"(%4) : (tensor<2x12xf32>) -> ()
}

// -----
// Slice: INT_MAX ends, negative axes and steps are normalized per dim.
<ir_version: 8, opset_import: ["" : 13]>
g (float[3,4,6] x) => (y) <int64[2] s = {-1, 1}, int64[2] e = {-9223372036854775808, 9223372036854775807}, int64[2] a = {-1, 0}, int64[2] t = {-2, 1}> {
  y = Slice(x, s, e, a, t)
}
// CHECK:
func.func @main(%x: tensor<3x4x6xf32>) -> (tensor<2x4x3xf32> {name = "y"}) {
  %s = "const"() {value = dense<[-1, 1]>} : () -> tensor<2xi64>
  %e = "const"() {value = dense<[-9223372036854775808, 9223372036854775807]>} : () -> tensor<2xi64>
  %a = "const"() {value = dense<[-1, 0]>} : () -> tensor<2xi64>
  %t = "const"() {value = dense<[-2, 1]>} : () -> tensor<2xi64>
  %0 = "tensor.slice"(%x) {ends = [3, 4, -1], starts = [1, 0, 5], steps = [1, 1, -2]} : (tensor<3x4x6xf32>) -> tensor<2x4x3xf32> loc("Slice_0" : "Slice")
  "func.return"(%0) : (tensor<2x4x3xf32>) -> ()
}

// -----
// Split at opset 18: num_outputs, the last part smaller.
<ir_version: 8, opset_import: ["" : 18]>
g (float[7,2] x) => (a, b, c) {
  a, b, c = Split<num_outputs=3>(x)
}
// CHECK:
func.func @main(%x: tensor<7x2xf32>) -> (tensor<3x2xf32> {name = "a"}, tensor<3x2xf32> {name = "b"}, tensor<1x2xf32> {name = "c"}) {
  %0, %1, %2 = "tensor.split"(%x) {axis = 0, sizes = [3, 3, 1]} : (tensor<7x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<1x2xf32>) loc("Split_0" : "Split")
  "func.return"(%0, %1, %2) : (tensor<3x2xf32>, tensor<3x2xf32>, tensor<1x2xf32>) -> ()
}

// -----
// Flatten, Squeeze and Unsqueeze are reshapes; Expand broadcasts both ways.
<ir_version: 8, opset_import: ["" : 11]>
g (float[2,1,3] x) => (f, s, u, e) <int64[3] shape = {2, 4, 1}> {
  f = Flatten<axis=-1>(x)
  s = Squeeze<axes=[1]>(x)
  u = Unsqueeze<axes=[0, -1]>(x)
  e = Expand(x, shape)
}
// CHECK:
func.func @main(%x: tensor<2x1x3xf32>) -> (tensor<2x3xf32> {name = "f"}, tensor<2x3xf32> {name = "s"}, tensor<1x2x1x3x1xf32> {name = "u"}, tensor<2x4x3xf32> {name = "e"}) {
  %0 = "tensor.reshape"(%x) {shape = [2, 3]} : (tensor<2x1x3xf32>) -> tensor<2x3xf32> loc("Flatten_0" : "Flatten")
  %1 = "tensor.reshape"(%x) {shape = [2, 3]} : (tensor<2x1x3xf32>) -> tensor<2x3xf32> loc("Squeeze_1" : "Squeeze")
  %2 = "tensor.reshape"(%x) {shape = [1, 2, 1, 3, 1]} : (tensor<2x1x3xf32>) -> tensor<1x2x1x3x1xf32> loc("Unsqueeze_2" : "Unsqueeze")
  %shape = "const"() {value = dense<[2, 4, 1]>} : () -> tensor<3xi64>
  %3 = "tensor.broadcast_to"(%x) {shape = [2, 4, 3]} : (tensor<2x1x3xf32>) -> tensor<2x4x3xf32> loc("Expand_3" : "Expand")
  "func.return"(%0, %1, %2, %3) : (tensor<2x3xf32>, tensor<2x3xf32>, tensor<1x2x1x3x1xf32>, tensor<2x4x3xf32>) -> ()
}

// -----
// Pad at opset 18 with axes; Gather with a negative index; Dropout with its mask.
<ir_version: 8, opset_import: ["" : 18]>
g (float[2,3] x) => (p, g, y, m) <int64[2] pads = {1, 2}, float v = {0.5}, int64[1] axes = {-1}, int64[1] i = {-1}> {
  p = Pad<mode="reflect">(x, pads, v, axes)
  g = Gather<axis=1>(x, i)
  y, m = Dropout(x)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x6xf32> {name = "p"}, tensor<2x1xf32> {name = "g"}, tensor<2x3xf32> {name = "y"}, tensor<2x3xi1> {name = "m"}) {
  %pads = "const"() {value = dense<[1, 2]>} : () -> tensor<2xi64>
  %v = "const"() {value = dense<[0.5]>} : () -> tensor<f32>
  %axes = "const"() {value = dense<[-1]>} : () -> tensor<1xi64>
  %0 = "tensor.pad"(%x) {mode = "reflect", pads = [0, 1, 0, 2], value = 0.5} : (tensor<2x3xf32>) -> tensor<2x6xf32> loc("Pad_0" : "Pad")
  %i = "const"() {value = dense<[-1]>} : () -> tensor<1xi64>
  %1 = "tensor.gather"(%x, %i) {axis = 1} : (tensor<2x3xf32>, tensor<1xi64>) -> tensor<2x1xf32> loc("Gather_1" : "Gather")
  %2 = "tensor.identity"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("Dropout_2" : "Dropout")
  %3 = "const"() {value = dense<true>} : () -> tensor<2x3xi1> loc("Dropout_2" : "Dropout")
  "func.return"(%0, %1, %2, %3) : (tensor<2x6xf32>, tensor<2x1xf32>, tensor<2x3xf32>, tensor<2x3xi1>) -> ()
}

// -----
// Resize as yolov8n exports it, and Upsample at opset 9.
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,4,5] x) => (y) <float[4] s = {1, 1, 2, 2}> {
  y = Resize<mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor">(x, , s)
}
// CHECK:
func.func @main(%x: tensor<1x3x4x5xf32>) -> (tensor<1x3x8x10xf32> {name = "y"}) {
  %s = "const"() {value = dense<[1.0, 1.0, 2.0, 2.0]>} : () -> tensor<4xf32>
  %0 = "tensor.resize"(%x) {coordinate_transformation_mode = "asymmetric", cubic_coeff_a = -0.75, exclude_outside = false, extrapolation_value = 0.0, mode = "nearest", nearest_mode = "floor", scales = [1.0, 1.0, 2.0, 2.0], sizes = [1, 3, 8, 10]} : (tensor<1x3x4x5xf32>) -> tensor<1x3x8x10xf32> loc("Resize_0" : "Resize")
  "func.return"(%0) : (tensor<1x3x8x10xf32>) -> ()
}

// -----
<ir_version: 8, opset_import: ["" : 19]>
g (float[1,3,4,5] x) => (y) <float[0] roi = {}, int64[2] sizes = {6, 9}> {
  y = Resize<mode="cubic", axes=[2, 3], keep_aspect_ratio_policy="not_larger">(x, roi, , sizes)
}
// CHECK:
func.func @main(%x: tensor<1x3x4x5xf32>) -> (tensor<1x3x6x8xf32> {name = "y"}) {
  %roi = "const"() {value = dense<[]>} : () -> tensor<0xf32>
  %sizes = "const"() {value = dense<[6, 9]>} : () -> tensor<2xi64>
  %0 = "tensor.resize"(%x) {coordinate_transformation_mode = "half_pixel", cubic_coeff_a = -0.75, exclude_outside = false, extrapolation_value = 0.0, mode = "cubic", nearest_mode = "round_prefer_floor", scales = [1.0, 1.0, 1.5, 1.5], sizes = [1, 3, 6, 8]} : (tensor<1x3x4x5xf32>) -> tensor<1x3x6x8xf32> loc("Resize_0" : "Resize")
  "func.return"(%0) : (tensor<1x3x6x8xf32>) -> ()
}

// -----
<ir_version: 8, opset_import: ["" : 9]>
g (float[1,3,4,5] x) => (y) <float[4] s = {1, 1, 2, 1.5}> {
  y = Upsample<mode="linear">(x, s)
}
// CHECK:
func.func @main(%x: tensor<1x3x4x5xf32>) -> (tensor<1x3x8x7xf32> {name = "y"}) {
  %s = "const"() {value = dense<[1.0, 1.0, 2.0, 1.5]>} : () -> tensor<4xf32>
  %0 = "tensor.resize"(%x) {coordinate_transformation_mode = "asymmetric", mode = "linear", scales = [1.0, 1.0, 2.0, 1.5], sizes = [1, 3, 8, 7]} : (tensor<1x3x4x5xf32>) -> tensor<1x3x8x7xf32> loc("Upsample_0" : "Upsample")
  "func.return"(%0) : (tensor<1x3x8x7xf32>) -> ()
}

// -----
// Constants: ConstantOfShape, Range and Size fold at import.
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (c, r, n) <int64[2] shape = {2, 2}, int64 a = {1}, int64 b = {7}, int64 d = {2}> {
  c = ConstantOfShape<value=int64[1] {7}>(shape)
  r = Range(a, b, d)
  n = Size(x)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x2xi64> {name = "c"}, tensor<3xi64> {name = "r"}, tensor<i64> {name = "n"}) {
  %shape = "const"() {value = dense<2>} : () -> tensor<2xi64>
  %0 = "const"() {value = dense<7>} : () -> tensor<2x2xi64> loc("ConstantOfShape_0" : "ConstantOfShape")
  %a = "const"() {value = dense<[1]>} : () -> tensor<i64>
  %b = "const"() {value = dense<[7]>} : () -> tensor<i64>
  %d = "const"() {value = dense<[2]>} : () -> tensor<i64>
  %1 = "const"() {value = dense<[1, 3, 5]>} : () -> tensor<3xi64> loc("Range_1" : "Range")
  %2 = "const"() {value = dense<[6]>} : () -> tensor<i64> loc("Size_2" : "Size")
  "func.return"(%0, %1, %2) : (tensor<2x2xi64>, tensor<3xi64>, tensor<i64>) -> ()
}

// -----
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, int64[2] s) => (y) {
  y = Reshape(x, s)
}
// ERROR: node Reshape_0 (Reshape): input 'shape' is computed at run time

// -----
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (y) <int64[1] a = {0}> {
  y = Squeeze(x, a)
}
// ERROR: cannot squeeze axes [0] of tensor<2x3xf32>: their size is not 1

// -----
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (y) <int64[4] p = {0, 1, 0, 1}> {
  y = Pad<mode="mirror">(x, p)
}
// ERROR: attribute 'mode' must be one of ['constant', 'reflect', 'edge', 'wrap'], got 'mirror'

// -----
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,2,2] x) => (y) <float[0] roi = {}, float[4] s = {1, 1, 2, 2}, int64[4] n = {1, 1, 4, 4}> {
  y = Resize(x, roi, s, n)
}
// ERROR: needs exactly one of the inputs scales and sizes
