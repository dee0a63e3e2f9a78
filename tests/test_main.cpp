// Test entry point. GPU test cases call TLB_REQUIRE_GPU() first: with no usable CUDA device
// the process prints why and exits 77, which CTest reports as "skipped" (never as passed).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "test_support.hpp"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace tlb::test {

bool gpu_available(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("no usable CUDA device: ") + cudaGetErrorString(e);
    cudaGetLastError();
    return false;
  }
  if (n == 0) {
    if (why) *why = "no CUDA device present";
    return false;
  }
  return true;
}

void skip_test(const char* test_name, const std::string& what, const std::string& why) {
  std::printf("SKIPPED: %s needs %s: %s\n", test_name, what.c_str(), why.c_str());
  std::fflush(stdout);
  std::exit(kSkipExitCode);
}

void require_gpu_or_skip(const char* test_name) {
  std::string why;
  if (!gpu_available(&why)) skip_test(test_name, "a GPU", why);
}

}  // namespace tlb::test

int main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
