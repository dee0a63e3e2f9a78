// The tally of NVML's clock-event reasons that the kernel benchmark's runs alone record: what
// held a kernel's clock, as the share of the run's samples each reason was active in.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "timing/energy_meter.hpp"

using tlb::ClockEventTally;
using tlb::kClockEventReasons;

TEST_CASE("Clock-event reasons have one bit and one name each", "[timer]") {
  std::set<unsigned long long> bits;
  std::set<std::string> names;
  for (const auto& r : kClockEventReasons) {
    CHECK((r.bit & (r.bit - 1)) == 0);  // a single bit
    bits.insert(r.bit);
    names.insert(r.name);
  }
  CHECK(bits.size() == std::size(kClockEventReasons));
  CHECK(names.size() == std::size(kClockEventReasons));
  // NVML's values of the reasons that hold a loaded GPU (nvmlClocksEventReasons).
  const auto bit_of = [](const std::string& name) {
    for (const auto& r : kClockEventReasons)
      if (name == r.name) return r.bit;
    return 0ull;
  };
  CHECK(bit_of("sw_power_cap") == 0x4);
  CHECK(bit_of("hw_slowdown") == 0x8);
  CHECK(bit_of("sw_thermal") == 0x20);
  CHECK(bit_of("hw_thermal") == 0x40);
  CHECK(bit_of("hw_power_brake") == 0x80);
}

TEST_CASE("A clock-event tally gives each reason seen the share of samples it was active in", "[timer]") {
  ClockEventTally t;
  CHECK(t.samples() == 0);
  CHECK(t.shares().empty());
  t.add(0x4);          // power cap
  t.add(0x4 | 0x8);    // power cap and a hardware slowdown
  t.add(0);            // nothing
  t.add(0x8 | 0x400);  // a hardware slowdown and a bit no name covers
  REQUIRE(t.samples() == 4);
  const auto s = t.shares();
  REQUIRE(s.size() == 3);
  // In the table's order, the unnamed bits last.
  CHECK(s[0].first == "sw_power_cap");
  CHECK(s[0].second == Approx(0.5));
  CHECK(s[1].first == "hw_slowdown");
  CHECK(s[1].second == Approx(0.5));
  CHECK(s[2].first == "other");
  CHECK(s[2].second == Approx(0.25));
}

TEST_CASE("A tally of samples without any reason has samples and no shares", "[timer]") {
  ClockEventTally t;
  for (int i = 0; i < 3; ++i) t.add(0);
  CHECK(t.samples() == 3);
  CHECK(t.shares().empty());
}
