// The broker's request parser alone: what parsing one pipelined PUBLISH costs
// (RESP multibulk, 64 commands per input buffer, as a client library batches
// them), with no session or index behind it. Google Benchmark; not a test.
#include <cstddef>
#include <string>
#include <string_view>

#include <benchmark/benchmark.h>

#include "broker/resp/request_parser.hpp"
#include "resp_client.hpp"

namespace {

using ringcast::broker::ParserLimits;
using ringcast::broker::RequestParser;

constexpr std::size_t kPipelined = 64;

// arg: payload bytes. One iteration parses one buffer of kPipelined PUBLISHes;
// the per_publish counter is the CPU time divided by them.
void BM_ParsePublish(benchmark::State& state) {
  const std::string payload(static_cast<std::size_t>(state.range(0)), 'p');
  const std::string one = ringcast::test::resp_command({"PUBLISH", "bench", payload});
  std::string buffer;
  for (std::size_t i = 0; i < kPipelined; ++i) buffer += one;
  RequestParser parser(ParserLimits{});
  for (auto _ : state) {
    std::string_view in = buffer;
    std::size_t commands = 0;
    while (parser.parse(in) == RequestParser::Status::kCommand) {
      benchmark::DoNotOptimize(parser.args()[2].data());
      ++commands;
    }
    if (commands != kPipelined) state.SkipWithError("parse did not return every command");
  }
  const auto publishes = state.iterations() * static_cast<benchmark::IterationCount>(kPipelined);
  state.SetItemsProcessed(publishes);
  state.counters["per_publish"] =
      benchmark::Counter(static_cast<double>(publishes), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

BENCHMARK(BM_ParsePublish)->Arg(52)->Arg(4096);

}  // namespace

BENCHMARK_MAIN();
