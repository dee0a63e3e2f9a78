#include "time_limit.hpp"

#include <fmt/core.h>

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "config.hpp"

namespace tlb {

namespace {
constexpr double kWeekSeconds = 7 * 24 * 3600.0;
}  // namespace

double parse_duration_seconds(const std::string& text, const std::string& option) {
  const auto refuse = [&] {
    throw ConfigError(fmt::format("{} \"{}\": expected a duration: seconds, or a number followed by s, m or h "
                                  "(540, 9m, 1.5h), above 0 and at most a week",
                                  option, text));
  };
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) refuse();
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) refuse();
  const std::string unit(end);
  double scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  else if (unit == "m") scale = 60;
  else if (unit == "h") scale = 3600;
  else refuse();
  const double seconds = v * scale;
  if (!(std::isfinite(seconds) && seconds > 0 && seconds <= kWeekSeconds)) refuse();
  return seconds;
}

double TimeBudget::predicted_s(double modelled_s) const {
  if (modelled_sum_ > 0 && took_sum_ > 0) return modelled_s * (took_sum_ / modelled_sum_);
  if (first_modelled_ > 0 && first_took_ > 0) return modelled_s * (first_took_ / first_modelled_);
  return modelled_s;
}

bool TimeBudget::begin(double modelled_s, double now_s) const {
  if (left_s(now_s) <= 0) return false;
  return groups_ == 0 || predicted_s(modelled_s) <= left_s(now_s);
}

void TimeBudget::record(double modelled_s, double took_s) {
  const bool first = groups_++ == 0;
  if (!(std::isfinite(modelled_s) && std::isfinite(took_s)) || modelled_s <= 0 || took_s < 0) return;
  if (first) {
    first_modelled_ = modelled_s;
    first_took_ = took_s;
    return;
  }
  modelled_sum_ += modelled_s;
  took_sum_ += took_s;
}

}  // namespace tlb
