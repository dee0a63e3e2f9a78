// What became of a point, as points.jsonl and points.csv spell it in "status":
//   ok | nonviable | oom | fallback:<stage>[,<stage>] | error | aa
// A fallback ran and was timed, with the named stages on their reference paths; aa is the A/A
// noise-floor row (the reference against itself). Text that is none of these (a hand-edited or
// foreign file) is kept as written, of kind `other`, so that the gate can name it.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace tlb {

enum class StatusKind { ok, nonviable, oom, fallback, error, aa, other };

class PointStatus {
 public:
  // Empty text, kind `other`: a row not yet settled.
  PointStatus() = default;
  // ok, nonviable, oom, error, aa by their names; fallback as "fallback:" with no stage.
  PointStatus(StatusKind kind);  // NOLINT(google-explicit-constructor): a kind is a status
  static PointStatus fallback(const std::vector<std::string>& stages);
  // Any text; its kind as the text says (every "fallback..." is a fallback).
  static PointStatus from_string(std::string text);

  StatusKind kind() const { return kind_; }
  bool is_fallback() const { return kind_ == StatusKind::fallback; }
  // Ran and was timed: ok, or a fallback (aa rows are timed too, but against themselves).
  bool ran() const { return kind_ == StatusKind::ok || is_fallback(); }
  // The stages of "fallback:attn,ffn"; empty for any other status.
  std::vector<std::string> fallback_stages() const;
  // As written in the files.
  const std::string& str() const { return text_; }
  // The text with every fallback as "fallback": the name it is counted under.
  std::string counted_as() const;

  bool operator==(StatusKind k) const { return kind_ == k; }
  bool operator==(const PointStatus& o) const { return text_ == o.text_; }

 private:
  StatusKind kind_ = StatusKind::other;
  std::string text_;
};

std::ostream& operator<<(std::ostream& os, const PointStatus& s);

}  // namespace tlb
