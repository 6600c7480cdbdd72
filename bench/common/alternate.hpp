// How the load generators compare servers on a shared, noisy machine: run
// them alternately (A B A B ...) so that load from elsewhere falls on each
// alike, then report each one's median run and ratios within the one run.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

namespace ringcast::bench {

// Calls every contestant once per round, in order, for `rounds` rounds.
// Returns each contestant's results in the order they ran (result[c][round]).
template <class R>
std::vector<std::vector<R>> alternate(int rounds, const std::vector<std::function<R()>>& contestants) {
  std::vector<std::vector<R>> out(contestants.size());
  for (int i = 0; i < rounds; ++i) {
    for (std::size_t c = 0; c < contestants.size(); ++c) out[c].push_back(contestants[c]());
  }
  return out;
}

// The median run by `less` (the upper one of an even count), or R{} for none.
template <class R, class Less>
R median_by(std::vector<R> runs, Less less) {
  if (runs.empty()) return R{};
  std::sort(runs.begin(), runs.end(), less);
  return runs[runs.size() / 2];
}

}  // namespace ringcast::bench
