// tlbench explain's input: every bad option is one line naming it and exit 2, checked against
// the cases file before a device is asked for; without a device, one line and exit 3. What it
// measures is covered by the [gpu][explain] tests.
#include <catch2/catch.hpp>
#include <cuda_runtime.h>

#include <fstream>
#include <string>

#include "bad_input_util.hpp"

using namespace tlb::test::bad_input;
using tlb::test::shell_quote;

TEST_CASE("tlbench explain refuses bad options with one line and exit 2, writing nothing", "[explain][cli][bad-input]") {
  Scratch s("explain");
  std::ofstream(s.dir / "only-fp16.json")
      << R"({"cases": [{"id": 4, "name": "x", "batch": 1, "seq": 16, "d_model": 64, "heads": 2, "d_ff": 128,
                         "layers": 1, "mask": "none", "dtypes": ["fp16"]}]})";
  const std::string base = "explain --config " + shell_quote(kCases) + " ";
  check_refused(tlbench(base + "--case 99 --configs 11111", s), {"--case 99", "no such case"});
  check_refused(tlbench(base + "--case 1 --configs 1111", s), {"--configs 1111", "bit string"});
  check_refused(tlbench(base + "--case 1 --configs 11111,,auto", s), {"--configs"});
  check_refused(tlbench(base + "--case 1 --configs 11111 --dtype fp8", s), {"--dtype fp8"});
  check_refused(tlbench(base + "--case 1 --configs 11111 --fp32-math fast", s), {"--fp32-math fast"});
  check_refused(tlbench(base + "--case 1 --configs 11111 --reps -1", s), {"--reps -1"});
  check_refused(tlbench(base + "--case 1 --configs 11111 --json-out missing/x.json", s), {"missing/x.json"});
  check_refused(tlbench(base + "--case 1 --configs 11111 --ceilings .", s), {"."});
  check_refused(tlbench("explain --config only-fp16.json --case 4 --dtype bf16 --configs 11111", s),
                {"--dtype bf16", "case 4 does not run in it"});
  check_refused(tlbench(base + "--configs 11111", s), {"--case"});  // required
  // A ceilings file that is not one: named with its JSON path, before any device.
  std::ofstream(s.dir / "ceilings.json") << R"({"device_uuid": "GPU-x", "ceilings": {"fp16": {"tensor_tflops": "fast"}}})";
  check_refused(tlbench(base + "--case 1 --configs 11111 --ceilings ceilings.json", s),
                {"ceilings.json", "$.ceilings.fp16.tensor_tflops", "expected a number"});
  CHECK(s.listing() == std::vector<std::string>{"ceilings.json", "only-fp16.json"});
}

TEST_CASE("tlbench explain without a GPU: one line and exit 3", "[explain][cli]") {
  int n = 0;
  if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {
    SUCCEED("a GPU is present: covered by the [gpu][explain] tests");
    return;
  }
  cudaGetLastError();
  Scratch s("explain-nogpu");
  const Result r = tlbench("explain --config " + shell_quote(kCases) + " --case 1 --configs 11111,auto", s);
  CHECK(r.rc == 3);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.find("explain needs a CUDA device") != std::string::npos);
  CHECK(r.out.empty());
  CHECK(s.listing().empty());
}
