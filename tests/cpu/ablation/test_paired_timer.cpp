// The paired timer driven by fake forwards on a fake clock: one baseline warm-up run, the
// candidate's warm-up, then ABBA order to the last pair; warm-up rules, the speedup and its interval, drift cancellation, throttled
// samples left out, budget and interruption.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>

#include "paired_timer.hpp"

using namespace tlb;

namespace {

// Virtual device: work advances `now`; the clock reads it back. `mhz_of_run` gives the SM
// clock sampled after the i-th run ever enqueued.
class FakeRunClock final : public RunClock {
 public:
  double now = 0;
  size_t runs = 0;
  std::function<double(size_t)> mhz_of_run = [](size_t) { return 1980.0; };

  void advance(double ms) { now += ms; }
  void enqueue(size_t slot, const std::function<void()>& work) override {
    if (ms_.size() <= slot) {
      ms_.resize(slot + 1);
      mhz_.resize(slot + 1);
    }
    const double start = now;
    work();
    ms_[slot] = now - start;
    mhz_[slot] = mhz_of_run(runs++);
  }
  void collect(size_t count, std::vector<double>& ms, std::vector<double>& mhz) override {
    ms.assign(ms_.begin(), ms_.begin() + static_cast<std::ptrdiff_t>(count));
    mhz.assign(mhz_.begin(), mhz_.begin() + static_cast<std::ptrdiff_t>(count));
  }
  double now_ms() override { return now; }

 private:
  std::vector<double> ms_, mhz_;
};

TimerOptions quick_options() {
  TimerOptions o;
  o.warmup_min_runs = 3;
  o.warmup_min_ms = 25;
  o.stop.min_pairs = 10;
  o.stop.max_pairs = 2000;
  o.stop.budget_ms = 1e9;
  return o;
}

}  // namespace

TEST_CASE("ABBA schedule alternates the side that goes first", "[timer]") {
  auto s = abba_schedule(0, 4);
  std::string str;
  for (Side x : s) str += x == Side::ref ? 'R' : 'C';
  CHECK(str == "RCCRRCCR");
  auto t = abba_schedule(1, 2);
  std::string str2;
  for (Side x : t) str2 += x == Side::ref ? 'R' : 'C';
  CHECK(str2 == "CRRC");
}

TEST_CASE("timer warms the candidate up, then times in one unbroken ABBA order", "[timer]") {
  FakeRunClock clock;
  std::string order;
  auto ref = [&] { order += 'R'; clock.advance(2.0); };
  auto cand = [&] { order += 'C'; clock.advance(1.0); };
  ClockTracker tracker;
  PairedMeasurement m = measure_paired(clock, ref, cand, quick_options(), tracker);
  // Warm-up: one baseline run, then 1 ms candidate runs until 25 ms.
  CHECK(m.warmup_ref_runs == 1);
  CHECK(m.warmup_runs >= 25);
  const size_t warm = 1 + m.warmup_runs;
  REQUIRE(order.size() > warm);
  CHECK(order.substr(0, warm) == std::string(1, 'R').append(m.warmup_runs, 'C'));
  const std::string timed = order.substr(warm);
  REQUIRE(timed.size() % 2 == 0);
  for (size_t k = 0; k < timed.size() / 2; ++k) {
    const std::string pair = timed.substr(2 * k, 2);
    INFO("pair " << k << " of " << timed);
    CHECK(pair == (k % 2 == 0 ? "RC" : "CR"));
  }
  CHECK(m.pairs == timed.size() / 2);
  CHECK(m.stop == stats::StopReason::converged);
  CHECK(m.speedup.median == Approx(2.0));
  CHECK(m.ref.median == Approx(2.0));
  CHECK(m.cand.median == Approx(1.0));
  CHECK(m.pairs >= 10);
}

TEST_CASE("warm-up takes at least 3 candidate runs even for slow forwards, and one baseline run",
          "[timer]") {
  FakeRunClock clock;
  int ref_runs = 0, cand_runs = 0;
  auto ref = [&] { ++ref_runs; clock.advance(40.0); };
  auto cand = [&] { ++cand_runs; clock.advance(30.0); };
  ClockTracker tracker;
  TimerOptions o = quick_options();
  o.stop.budget_ms = 1;  // spent by the warm-up: the floor of 5 pairs is all that follows
  PairedMeasurement m = measure_paired(clock, ref, cand, o, tracker);
  CHECK(m.warmup_runs == 3);
  CHECK(m.warmup_ref_runs == 1);
  CHECK(m.stop == stats::StopReason::budget);
  CHECK(m.pairs == 5);
  CHECK(ref_runs == 1 + 5);
  CHECK(cand_runs == 3 + 5);
}

TEST_CASE("the candidate's runs before the timer count toward its warm-up runs, not its warm-up time",
          "[timer]") {
  FakeRunClock clock;
  int cand_runs = 0;
  auto ref = [&] { clock.advance(40.0); };
  auto cand = [&] { ++cand_runs; clock.advance(30.0); };
  ClockTracker tracker;
  TimerOptions o = quick_options();
  o.stop.budget_ms = 1;
  o.warmup_prior_runs = 1;  // the accuracy check's
  PairedMeasurement m = measure_paired(clock, ref, cand, o, tracker);
  CHECK(m.warmup_runs == 3);  // the prior run and two timed ones
  CHECK(cand_runs == 2 + 5);

  // A prior run of a fast forward does not count toward the 25 ms: 0.5 ms runs still fill them.
  FakeRunClock fast_clock;
  int fast_runs = 0;
  auto fast = [&] { ++fast_runs; fast_clock.advance(0.5); };
  auto fast_ref = [&] { fast_clock.advance(0.5); };
  ClockTracker fast_tracker;
  PairedMeasurement f = measure_paired(fast_clock, fast_ref, fast, o, fast_tracker);
  CHECK(f.warmup_runs == 1 + 50);
  CHECK(f.pairs == 5);
  CHECK(fast_runs == 50 + 5);
}

TEST_CASE("a warm-up of one run makes one run of a slow forward, not two", "[timer]") {
  FakeRunClock clock;
  int cand_runs = 0;
  auto ref = [&] { clock.advance(100.0); };
  auto cand = [&] { ++cand_runs; clock.advance(60.0); };
  ClockTracker tracker;
  TimerOptions o = quick_options();
  o.stop.budget_ms = 1;
  o.stop.floor_pairs = 2;
  o.warmup_min_runs = 1;  // a later block's
  o.warmup_min_ms = 5;
  o.warmup_ref_runs = 0;
  PairedMeasurement m = measure_paired(clock, ref, cand, o, tracker);
  CHECK(m.warmup_runs == 1);
  CHECK(m.pairs == 2);
  CHECK(cand_runs == 1 + 2);
}

TEST_CASE("a baseline time the group knows replaces its warm-up run and keeps the point in its budget",
          "[timer]") {
  // A 2 ms baseline against a 0.1 ms candidate, no baseline warm-up run: batches sized from
  // the candidate's time alone would be 100 pairs (210 ms) into a 30 ms budget.
  auto measure = [](double baseline_ms, int& ref_runs) {
    FakeRunClock clock;
    auto ref = [&] { ++ref_runs; clock.advance(2.0); };
    auto cand = [&] { clock.advance(0.1); };
    ClockTracker tracker;
    TimerOptions o = quick_options();
    o.stop.budget_ms = 30;
    o.stop.min_pairs = 1000;  // never converged: the budget stops it
    o.warmup_min_ms = 1;
    o.warmup_ref_runs = 0;
    o.baseline_ms = baseline_ms;
    return measure_paired(clock, ref, cand, o, tracker);
  };
  int known_runs = 0, unknown_runs = 0;
  const PairedMeasurement known = measure(2.0, known_runs);
  CHECK(known.warmup_ref_runs == 0);
  CHECK(static_cast<size_t>(known_runs) == known.pairs);
  CHECK(known.stop == stats::StopReason::budget);
  CHECK(known.elapsed_ms <= 30 + 2 * 2.1);
  const PairedMeasurement unknown = measure(0, unknown_runs);
  CHECK(unknown.elapsed_ms > 100);  // what the known time prevents
}

TEST_CASE("timer recovers a noisy speedup inside its interval", "[timer]") {
  FakeRunClock clock;
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> noise(0.0, 0.03);
  auto ref = [&] { clock.advance(3.0 * noise(rng)); };
  auto cand = [&] { clock.advance(2.0 * noise(rng)); };
  ClockTracker tracker;
  PairedMeasurement m = measure_paired(clock, ref, cand, quick_options(), tracker);
  CHECK(m.stop == stats::StopReason::converged);
  CHECK(m.speedup.lo <= 1.5);
  CHECK(m.speedup.hi >= 1.5);
  CHECK(m.speedup.rel_half_width() <= 0.01);
  CHECK(m.speedup.confidence >= 0.95);
}

TEST_CASE("ABBA pairing cancels a steady clock drift", "[timer]") {
  // Every run is 0.2 % slower than the one before (a GPU heating up). Equal work on both
  // sides must still give a ratio of 1: in AB order every pair would read ~0.998.
  FakeRunClock clock;
  double scale = 1.0;
  auto step = [&] {
    clock.advance(1.0 * scale);
    scale *= 1.002;
  };
  ClockTracker tracker;
  TimerOptions o = quick_options();
  o.stop.min_pairs = 40;
  PairedMeasurement m = measure_paired(clock, step, step, o, tracker);
  CHECK(std::fabs(m.speedup.median - 1.0) < 5e-4);
}

TEST_CASE("throttled samples are flagged, and only pairs whose runs' clocks differ are left out",
          "[timer]") {
  auto measure = [](size_t first_slow, ClockTracker& tracker) {
    FakeRunClock clock;
    // Runs [first_slow, first_slow + 20) are sampled at 1500 MHz against a maximum of 1980:
    // under 90 %, and 24 % below the others.
    clock.mhz_of_run = [first_slow](size_t i) {
      return i >= first_slow && i < first_slow + 20 ? 1500.0 : 1980.0;
    };
    auto ref = [&] { clock.advance(2.0); };
    auto cand = [&] { clock.advance(1.0); };
    TimerOptions o = quick_options();
    o.stop.min_pairs = 60;
    return measure_paired(clock, ref, cand, o, tracker);
  };
  // Warm-up: one baseline run and 25 candidate runs = runs 0..25; timed run t is run 26 + t.
  // Runs 60..79 are timed runs 34..53: whole pairs 17..26, both runs slowed alike, all kept.
  ClockTracker aligned_tracker;
  const PairedMeasurement aligned = measure(60, aligned_tracker);
  CHECK(aligned.warmup_runs == 25);
  CHECK(aligned.throttled_samples == 20);
  CHECK(aligned.throttled_pairs == 0);
  CHECK(aligned.pairs == aligned.pairs_attempted);
  CHECK(aligned.min_mhz == 1500.0);
  CHECK(aligned.max_mhz == 1980.0);
  CHECK(aligned_tracker.max_mhz == 1980.0);
  // Runs 61..80 are timed runs 35..54: pairs 17 and 27 have one slow and one fast run and
  // are left out; the nine pairs in between are kept.
  ClockTracker shifted_tracker;
  const PairedMeasurement shifted = measure(61, shifted_tracker);
  CHECK(shifted.throttled_samples == 20);
  CHECK(shifted.throttled_pairs == 2);
  CHECK(shifted.pairs + shifted.throttled_pairs == shifted.pairs_attempted);
  CHECK(shifted.speedup.median == Approx(2.0));
}

TEST_CASE("a steady clock difference between baseline and candidate is kept, a stray one left out",
          "[timer]") {
  // Under a power cap the baseline runs at 1780 MHz and the candidate at 1980 every time
  // (ratio 1.11): that is what each costs, and those pairs are kept. Timed runs 20..23 (pairs
  // 10 and 11) catch a transient that puts both runs at 1500 MHz: their ratio (1.0) strays
  // from the typical 1.11, and they go.
  FakeRunClock clock;
  bool ran_ref = false;  // the work runs before its clock is sampled
  auto ref = [&] { ran_ref = true; clock.advance(2.0); };
  auto cand = [&] { ran_ref = false; clock.advance(1.0); };
  // Warm-up: one baseline run and 25 candidate runs = runs 0..25; timed run t is run 26 + t.
  clock.mhz_of_run = [&](size_t i) {
    if (i >= 26 + 20 && i < 26 + 24) return 1500.0;
    return ran_ref ? 1780.0 : 1980.0;
  };
  ClockTracker tracker;
  TimerOptions o = quick_options();
  o.stop.min_pairs = 40;
  o.stop.max_pairs = 40;
  const PairedMeasurement m = measure_paired(clock, ref, cand, o, tracker);
  CHECK(m.pairs_attempted == 40);
  CHECK(m.throttled_pairs == 2);
  CHECK(m.pairs == 38);
  CHECK(m.speedup.median == Approx(2.0));
}

TEST_CASE("budget ends a noisy point and interruption ends any point", "[timer]") {
  FakeRunClock clock;
  std::mt19937_64 rng(3);
  std::lognormal_distribution<double> noise(0.0, 0.5);  // far too noisy to reach ±1 %
  auto ref = [&] { clock.advance(1.0 * noise(rng)); };
  auto cand = [&] { clock.advance(1.0 * noise(rng)); };
  ClockTracker tracker;
  TimerOptions o = quick_options();
  o.stop.budget_ms = 200;
  PairedMeasurement m = measure_paired(clock, ref, cand, o, tracker);
  CHECK(m.stop == stats::StopReason::budget);
  CHECK(m.elapsed_ms >= 200);
  CHECK(m.elapsed_ms < 200 + 30);  // batches are sized not to overshoot the budget

  FakeRunClock clock2;
  int polls = 0;
  auto ref2 = [&] { clock2.advance(1.0 * noise(rng)); };
  auto cand2 = [&] { clock2.advance(1.0 * noise(rng)); };
  PairedMeasurement m2 =
      measure_paired(clock2, ref2, cand2, quick_options(), tracker, [&] { return ++polls > 5; });
  CHECK(m2.stop == stats::StopReason::interrupted);
}

TEST_CASE("blocks pool into one measurement: every pair, the counts summed, converged only if each block was",
          "[timer][blocks]") {
  FakeRunClock clock;
  double cand_ms = 1.0;
  auto ref = [&] { clock.advance(2.0); };
  auto cand = [&] { clock.advance(cand_ms); };
  ClockTracker tracker;
  const PairedMeasurement a = measure_paired(clock, ref, cand, quick_options(), tracker);
  cand_ms = 1.25;  // the second block runs slower: another clock state
  TimerOptions tight = quick_options();
  tight.stop.max_pairs = 12;
  tight.stop.target_rel_half_width = 0;  // never converges: stops at max_pairs
  const PairedMeasurement b = measure_paired(clock, ref, cand, tight, tracker);
  REQUIRE(a.stop == stats::StopReason::converged);
  REQUIRE(b.stop == stats::StopReason::max_pairs);
  REQUIRE(a.ratio_samples.size() == a.pairs);

  const PairedMeasurement p = pool_blocks({a, b}, 0.95);
  CHECK(p.pairs == a.pairs + b.pairs);
  CHECK(p.pairs_attempted == a.pairs_attempted + b.pairs_attempted);
  CHECK(p.warmup_runs == a.warmup_runs + b.warmup_runs);
  CHECK(p.ratio_samples.size() == p.pairs);
  CHECK(p.stop == stats::StopReason::max_pairs);
  CHECK(pool_blocks({a, a}, 0.95).stop == stats::StopReason::converged);
  CHECK(p.speedup.median <= 2.0);
  CHECK(p.speedup.median >= 1.6);
  CHECK(p.speedup.lo == Approx(1.6));  // the slower block's ratios are in the pooled interval
  CHECK(p.cand.n == p.pairs);
  const std::vector<double> m = block_medians({a, b});
  REQUIRE(m.size() == 2);
  CHECK(m[0] == Approx(2.0));
  CHECK(m[1] == Approx(1.6));
  CHECK(pool_blocks({a}, 0.95).pairs == a.pairs);
}
