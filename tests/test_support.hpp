// Shared helpers for the test suites.
#pragma once

#include <string>

namespace tlb::test {

constexpr int kSkipExitCode = 77;
bool gpu_available(std::string* why);
// Prints "SKIPPED: <test> needs <what>: <why>" and exits with kSkipExitCode (CTest: skipped).
[[noreturn]] void skip_test(const char* test_name, const std::string& what, const std::string& why);
// Exits the process with kSkipExitCode (CTest: skipped) when no GPU is usable.
void require_gpu_or_skip(const char* test_name);

}  // namespace tlb::test

// First line of every [gpu] test case.
#define TLB_REQUIRE_GPU() ::tlb::test::require_gpu_or_skip(Catch::getResultCapture().getCurrentTestName().c_str())
