// Runs a braze artifact on inputs of ones and prints what comes out.
#include <braze/runtime.hpp>

#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: run_model ARTIFACT\n";
    return 2;
  }
  try {
    braze::Model model = braze::Model::load(argv[1]);
    for (const braze::TensorInfo& input : model.inputs()) {
      braze::Tensor x = braze::Tensor::zeros(input);
      if (input.dtype == "float32")
        for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 1.0f;
      model.set_input(input.name, x);
    }
    model.run();
    for (size_t i = 0; i < model.outputs().size(); ++i) {
      braze::Tensor y = model.output(i);
      std::cout << model.outputs()[i].name << ": " << y.dtype << ", " << y.numel() << " values";
      if (y.dtype == "float32" && y.numel() > 0) std::cout << ", first " << y.data<float>()[0];
      std::cout << "\n";
    }
  } catch (const braze::Error& e) {  // ArtifactError, InputError, ...: one line each
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
