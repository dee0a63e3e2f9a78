// Stage times from events, less the events' own cost (ablation/stage_timing.hpp): the cost is
// recovered from the two totals, taken off each stage once per layer, and the result adds up
// to the forward without events only where the model holds; where the totals are too noisy to
// give it, the probe does.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "stage_timing.hpp"

using namespace tlb;

namespace {

// The probe of a precise forward: never asked.
std::vector<double> not_probed() {
  FAIL("the event probe was asked although the forward's estimate was precise");
  return {};
}

// Runs of a forward whose stages take `work` ms (all layers together) and whose every event
// costs `event` ms, each run shifted by `drift` ms per stage.
StageEventRuns synthetic(const std::array<double, kNumCostStages>& work, double event, int layers,
                         const std::array<double, 3>& drifts) {
  StageEventRuns runs;
  double forward = 0;
  for (double w : work) forward += w;
  for (double drift : drifts) {
    std::array<double, kNumCostStages> st{};
    for (int s = 0; s < kNumCostStages; ++s) st[static_cast<size_t>(s)] = work[static_cast<size_t>(s)] + layers * event + drift;
    runs.stage_ms.push_back(st);
    runs.stage_events_total_ms.push_back(forward + kNumCostStages * layers * event + kNumCostStages * drift);
    runs.layer_events_total_ms.push_back(forward + layers * event + kNumCostStages * drift);
  }
  return runs;
}

// Two runs of a two-layer forward (ln1..ffn_down 0.004, 0.012, ... ms, events 2.5 us): too
// few for a spread.
StageEventRuns two_runs_of_two_layers() {
  StageEventRuns runs = synthetic({0.004, 0.012, 0.010, 0.006, 0.004, 0.011, 0.013}, 0.0025, 2, {0.0, 0.0, 0.0});
  runs.stage_ms.resize(2);
  runs.stage_events_total_ms.resize(2);
  runs.layer_events_total_ms.resize(2);
  return runs;
}

}  // namespace

TEST_CASE("stage timing recovers each event's cost and takes it off each stage once per layer", "[stage_timing]") {
  const std::array<double, kNumCostStages> work = {0.004, 0.012, 0.010, 0.006, 0.004, 0.011, 0.013};
  double forward = 0;
  for (double w : work) forward += w;
  for (int layers : {1, 2, 4}) {
    INFO(layers << " layers");
    const StageTiming t = stage_timing(synthetic(work, 0.0025, layers, {0.0, 0.0002, -0.0001}), layers, not_probed);
    CHECK(t.event_ms == Approx(0.0025));
    for (int s = 0; s < kNumCostStages; ++s) {
      CHECK(t.ms[static_cast<size_t>(s)] == Approx(work[static_cast<size_t>(s)]).margin(1e-12));
      CHECK(t.raw_ms[static_cast<size_t>(s)] == Approx(work[static_cast<size_t>(s)] + layers * 0.0025));
    }
    CHECK(t.sum_ms() == Approx(forward));
    CHECK(t.stage_events_total_ms == Approx(forward + 7 * layers * 0.0025));
    CHECK(t.layer_events_total_ms == Approx(forward + layers * 0.0025));
  }
}

TEST_CASE("stage timing never adds time for events that measured cheaper than nothing", "[stage_timing]") {
  const std::array<double, kNumCostStages> work = {0.1, 0.5, 2.0, 0.2, 0.1, 0.6, 0.6};
  // Noise larger than the events: the stage-events total reads below the layer-events one.
  const StageTiming t = stage_timing(synthetic(work, -0.001, 1, {0.0, 0.0, 0.0}), 1, not_probed);
  CHECK(t.event_ms == 0.0);
  for (int s = 0; s < kNumCostStages; ++s) CHECK(t.ms[static_cast<size_t>(s)] == t.raw_ms[static_cast<size_t>(s)]);
}

TEST_CASE("stage timing takes the event cost run by run, and no stage below zero", "[stage_timing]") {
  const std::array<double, kNumCostStages> work = {0.004, 0.012, 0.010, 0.006, 0.004, 0.011, 0.013};
  // Uneven runs: the second's stage-events total is slow by 0.3 ms, its layer-events total by
  // 0.3 ms too (the card slowed for both); the third's stage total alone is slow. The run-by-run
  // differences are 24 e, 24 e and 24 e + 0.5 (6 events a layer, 4 layers): their median is 24 e,
  // where the difference of the two totals' medians would be 24 e + 0.3.
  StageEventRuns runs = synthetic(work, 0.0025, 4, {0.0, 0.0, 0.0});
  runs.stage_events_total_ms[1] += 0.3;
  runs.layer_events_total_ms[1] += 0.3;
  runs.stage_events_total_ms[2] += 0.5;
  StageTiming t = stage_timing(runs, 4, not_probed);
  CHECK(t.event_ms == Approx(0.0025));
  // A stage shorter than its events' cost as estimated reads zero, not less.
  runs = synthetic(work, 0.0025, 4, {0.0, 0.0, 0.0});
  for (auto& st : runs.stage_ms) st[0] = 0.001;  // ln1: 4 events' cost is 0.01 ms
  t = stage_timing(runs, 4, not_probed);
  CHECK(t.ms[0] == 0.0);
  CHECK(t.raw_ms[0] == Approx(0.001));
}

TEST_CASE("stage timing refuses runs it cannot pair", "[stage_timing]") {
  StageEventRuns runs = synthetic({1, 1, 1, 1, 1, 1, 1}, 0.001, 1, {0.0, 0.0, 0.0});
  CHECK_THROWS_AS(stage_timing(runs, 0, not_probed), std::invalid_argument);
  runs.layer_events_total_ms.pop_back();
  CHECK_THROWS_AS(stage_timing(runs, 1, not_probed), std::invalid_argument);
  CHECK_THROWS_AS(stage_timing(StageEventRuns{}, 1, not_probed), std::invalid_argument);
}

TEST_CASE("stage timing takes the probe's event cost where the forward's noise hides it", "[stage_timing]") {
  // A 40 ms forward of one layer: its 6 extra events (15 us) against totals that move by a
  // few tenths of a millisecond from run to run, each total on its own.
  const std::array<double, kNumCostStages> work = {0.15, 1.0, 36.0, 0.3, 0.3, 1.3, 1.2};
  const double jitter[][2] = {{0.31, -0.12}, {-0.20, 0.25}, {0.05, 0.40}, {0.0, 0.0}, {-0.33, 0.11}, {0.18, -0.07}};
  StageEventRuns runs;
  for (const auto& j : jitter) {
    StageEventRuns one = synthetic(work, 0.0025, 1, {0.0, 0.0, 0.0});
    runs.stage_ms.push_back(one.stage_ms[0]);
    runs.stage_events_total_ms.push_back(one.stage_events_total_ms[0] + j[0]);
    runs.layer_events_total_ms.push_back(one.layer_events_total_ms[0] + j[1]);
  }
  int probed = 0;
  const StageTiming t = stage_timing(runs, 1, [&] {
    ++probed;
    return std::vector<double>{0.0031, 0.0027, 0.0026};  // their median
  });
  CHECK(probed == 1);
  CHECK(t.event_probed);
  CHECK(t.event_ms == 0.0027);
  CHECK(t.event_forward_se_ms >= kEventCostPrecisionMs);
  // The forward's own estimate is off by more than an event costs.
  CHECK(std::fabs(t.event_forward_ms - 0.0025) > 0.002);
  for (int s = 0; s < kNumCostStages; ++s)
    CHECK(t.ms[static_cast<size_t>(s)] == Approx(work[static_cast<size_t>(s)] + 0.0025 - 0.0027));
  // A probe that measured less than nothing takes nothing off.
  const StageTiming zero = stage_timing(runs, 1, [] { return std::vector<double>{-0.001}; });
  CHECK(zero.event_ms == 0.0);
  for (int s = 0; s < kNumCostStages; ++s) CHECK(zero.ms[static_cast<size_t>(s)] == zero.raw_ms[static_cast<size_t>(s)]);
}

TEST_CASE("stage timing asks the probe where under three runs leave the spread unknown", "[stage_timing]") {
  const StageEventRuns runs = two_runs_of_two_layers();
  const StageTiming t = stage_timing(runs, 2, [] { return std::vector<double>{0.002}; });
  CHECK(t.event_probed);
  CHECK(std::isinf(t.event_forward_se_ms));
  CHECK(t.event_forward_ms == Approx(0.0025));
  CHECK(t.event_ms == 0.002);
  CHECK(t.ms[1] == Approx(0.012 + 2 * 0.0005));
}

TEST_CASE("stage timing's standard error is the median's, from the runs' MAD, and decides at 0.5 us",
          "[stage_timing]") {
  // Five runs of one layer whose per-event estimates are 2.5 us + d for d in `offsets` (ms):
  // MAD = |offsets| median, standard error 1.2533 x 1.4826 x MAD / sqrt(5).
  const std::array<double, kNumCostStages> work = {0.1, 0.5, 2.0, 0.2, 0.1, 0.6, 0.6};
  auto runs_with = [&](double spread) {
    StageEventRuns runs;
    for (double d : {-2 * spread, -spread, 0.0, spread, 2 * spread}) {
      StageEventRuns one = synthetic(work, 0.0025, 1, {0.0, 0.0, 0.0});
      runs.stage_ms.push_back(one.stage_ms[0]);
      runs.stage_events_total_ms.push_back(one.stage_events_total_ms[0] + 6 * d);
      runs.layer_events_total_ms.push_back(one.layer_events_total_ms[0]);
    }
    return runs;
  };
  const double factor = 1.2533 * 1.4826 / std::sqrt(5.0);  // MAD of the five offsets is `spread`
  // Just under the threshold: the forward's estimate; just over: the probe's.
  const double under = 0.95 * kEventCostPrecisionMs / factor, over = 1.05 * kEventCostPrecisionMs / factor;
  const StageTiming precise = stage_timing(runs_with(under), 1, not_probed);
  CHECK(precise.event_forward_se_ms == Approx(factor * under));
  CHECK_FALSE(precise.event_probed);
  CHECK(precise.event_ms == Approx(0.0025));
  const StageTiming noisy = stage_timing(runs_with(over), 1, [] { return std::vector<double>{0.003}; });
  CHECK(noisy.event_forward_se_ms == Approx(factor * over));
  CHECK(noisy.event_probed);
  CHECK(noisy.event_ms == 0.003);
}

TEST_CASE("stage timing keeps the forward's estimate where the probe measured nothing", "[stage_timing]") {
  const StageEventRuns runs = two_runs_of_two_layers();
  // No readings, or readings whose median is not a time.
  for (const std::vector<double>& bad :
       {std::vector<double>{}, std::vector<double>{std::numeric_limits<double>::infinity()}}) {
    const StageTiming t = stage_timing(runs, 2, [&bad] { return bad; });
    CHECK_FALSE(t.event_probed);
    CHECK(t.event_ms == Approx(0.0025));
    CHECK(t.ms[1] == Approx(0.012));
  }
}
