// The iceoryx peer when CMake found no iceoryx_posh package or no iox-roudi
// (bench/large/CMakeLists.txt): the harness skips it and says why.
#include <stdexcept>

#include "transport.hpp"

namespace ringcast::bench {

bool iceoryx_built_in() noexcept { return false; }

std::unique_ptr<PeerDaemon> start_iceoryx_daemon(const std::vector<PoolNeed>&, std::string& why_not) {
  why_not = "built without iceoryx (install iceoryx and libiceoryx-posh-dev, then reconfigure)";
  return nullptr;
}

std::unique_ptr<Sender> make_iceoryx_sender(const CellSpec&) { throw std::runtime_error("built without iceoryx"); }
std::unique_ptr<Receiver> make_iceoryx_receiver(const CellSpec&) { throw std::runtime_error("built without iceoryx"); }

}  // namespace ringcast::bench
