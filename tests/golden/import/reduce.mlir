// RUN: import
// axes as an attribute: normalized and sorted
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3,4] x) => (float[3] y, float[1,1,4] z) {
  y = ReduceMean <axes=[-1,0], keepdims=0> (x)
  z = ReduceMax <axes=[1,0]> (x)
}
// CHECK:
func.func @main(%x: tensor<2x3x4xf32>) -> (tensor<3xf32> {name = "y"}, tensor<1x1x4xf32> {name = "z"}) {
  %0 = "reduce.mean"(%x) {axes = [0, 2], keepdims = false} : (tensor<2x3x4xf32>) -> tensor<3xf32> loc("ReduceMean_0" : "ReduceMean")
  %1 = "reduce.max"(%x) {axes = [0, 1], keepdims = true} : (tensor<2x3x4xf32>) -> tensor<1x1x4xf32> loc("ReduceMax_1" : "ReduceMax")
  "func.return"(%0, %1) : (tensor<3xf32>, tensor<1x1x4xf32>) -> ()
}

// -----
// axes as an input (ReduceSum since 13, the others since 18); empty axes
// mean all of them, or none with noop_with_empty_axes
<ir_version: 8, opset_import: ["" : 18]>
g (float[2,3] x) => (float[1,3] y, float[] z, float[2,3] w) <int64[1] axes = {0}, int64[0] none = {}> {
  y = ReduceSum (x, axes)
  z = ReduceProd <keepdims=0> (x)
  w = ReduceMin <noop_with_empty_axes=1> (x, none)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<1x3xf32> {name = "y"}, tensor<f32> {name = "z"}, tensor<2x3xf32> {name = "w"}) {
  %axes = "const"() {value = dense<[0]>} : () -> tensor<1xi64>
  %0 = "reduce.sum"(%x) {axes = [0], keepdims = true} : (tensor<2x3xf32>) -> tensor<1x3xf32> loc("ReduceSum_0" : "ReduceSum")
  %1 = "reduce.prod"(%x) {axes = [0, 1], keepdims = false} : (tensor<2x3xf32>) -> tensor<f32> loc("ReduceProd_1" : "ReduceProd")
  %none = "const"() {value = dense<[]>} : () -> tensor<0xi64>
  "func.return"(%0, %1, %x) : (tensor<1x3xf32>, tensor<f32>, tensor<2x3xf32>) -> ()
}

// -----
// decomposed reductions
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (float[2,1] y, float[2,1] z) {
  y = ReduceL1 <axes=[1]> (x)
  z = ReduceLogSum <axes=[1]> (x)
}
// CHECK:
func.func @main(%x: tensor<2x3xf32>) -> (tensor<2x1xf32> {name = "y"}, tensor<2x1xf32> {name = "z"}) {
  %0 = "math.abs"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32> loc("ReduceL1_0" : "ReduceL1")
  %1 = "reduce.sum"(%0) {axes = [1], keepdims = true} : (tensor<2x3xf32>) -> tensor<2x1xf32> loc("ReduceL1_0" : "ReduceL1")
  %2 = "reduce.sum"(%x) {axes = [1], keepdims = true} : (tensor<2x3xf32>) -> tensor<2x1xf32> loc("ReduceLogSum_1" : "ReduceLogSum")
  %3 = "math.log"(%2) : (tensor<2x1xf32>) -> tensor<2x1xf32> loc("ReduceLogSum_1" : "ReduceLogSum")
  "func.return"(%1, %3) : (tensor<2x1xf32>, tensor<2x1xf32>) -> ()
}

// -----
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3,4] x) => (int64[2,4] y, int64[1,3,4] z) {
  y = ArgMax <axis=-2, keepdims=0, select_last_index=1> (x)
  z = ArgMin (x)
}
// CHECK:
func.func @main(%x: tensor<2x3x4xf32>) -> (tensor<2x4xi64> {name = "y"}, tensor<1x3x4xi64> {name = "z"}) {
  %0 = "reduce.argmax"(%x) {axis = 1, keepdims = false, select_last_index = true} : (tensor<2x3x4xf32>) -> tensor<2x4xi64> loc("ArgMax_0" : "ArgMax")
  %1 = "reduce.argmin"(%x) {axis = 0, keepdims = true, select_last_index = false} : (tensor<2x3x4xf32>) -> tensor<1x3x4xi64> loc("ArgMin_1" : "ArgMin")
  "func.return"(%0, %1) : (tensor<2x4xi64>, tensor<1x3x4xi64>) -> ()
}

// -----
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, int64[1] axes) => (y) {
  y = ReduceSum (x, axes)
}
// ERROR: input 'axes' is computed at run time

// -----
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (y) {
  y = ReduceMean <axes=[1,-1]> (x)
}
// ERROR: axes [1, -1] name a dimension twice

// -----
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (y) {
  y = ArgMax <axis=2> (x)
}
// ERROR: axis 2 is out of range for an input of rank 2

// -----
// from opset 13 ReduceSum takes its axes as an input only
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x) => (y) {
  y = ReduceSum <axes=[1]> (x)
}
// ERROR: unexpected inputs or attributes
