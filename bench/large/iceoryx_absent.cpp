// The iceoryx peer when CMake found no iceoryx_posh package or no iox-roudi
// (bench/CMakeLists.txt): the harness skips it (bench/common/roudi.hpp says why).
#include <stdexcept>

#include "transport.hpp"

namespace ringcast::bench {

std::unique_ptr<Sender> make_iceoryx_sender(const CellSpec&) { throw std::runtime_error("built without iceoryx"); }
std::unique_ptr<Receiver> make_iceoryx_receiver(const CellSpec&) { throw std::runtime_error("built without iceoryx"); }

}  // namespace ringcast::bench
