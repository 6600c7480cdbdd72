# What a cluster node takes in from NATS: frames and bundles
# (src/relay/cluster_frame.hpp; seeds in corpus/fuzz_cluster_frame/).
# Included by tests/fuzz/CMakeLists.txt.
ringcast_add_fuzzer(NAME fuzz_cluster_frame
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/relay_cluster_frame_fuzz.cpp ${PROJECT_SOURCE_DIR}/src/relay/cluster_frame.cpp
  LIBS fmt::fmt)
target_include_directories(fuzz_cluster_frame PRIVATE ${PROJECT_SOURCE_DIR}/src)
